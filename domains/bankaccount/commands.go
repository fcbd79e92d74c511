package bankaccount

import (
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
)

// Command types.
const (
	OpenAccount       = "OpenAccount"       // payload {}
	RenameOwner       = "RenameOwner"       // payload OwnerRenamedData
	RecordTransaction = "RecordTransaction" // payload TransactionAcceptedData; rejected past the overdraft
)

// Domain describes the ledger's write model: its events and its
// commands, each deciding against the account's STATE.
func Domain() commands.Domain {
	return commands.FacetDomain(AggregateType, Processor(), map[string]commands.Decide[Account]{
		OpenAccount: decideOpen, RenameOwner: decideRename, RecordTransaction: decideTransact,
	})
}

// NewFacet returns the ledger facet on store (reads of an account's
// STATE, appends that the rules check). upcasters may be nil.
func NewFacet(store eventstore.Store, upcasters *eventstore.Upcasters) (*eventstore.Facet[Account], error) {
	return eventstore.NewFacet(eventstore.FacetConfig[Account]{Store: store, AggregateType: AggregateType, Processor: Processor(), Upcasters: upcasters})
}

func decideOpen(cur eventstore.State[Account], cmd commands.Command) ([]eventstore.NewEvent, error) {
	if err := cmd.DecodePayload(&struct{}{}); err != nil {
		return nil, err
	}
	if cur.Item.ID != "" {
		return nil, commands.Conflict("account %s already exists", cmd.AggregateID)
	}
	return []eventstore.NewEvent{Opened(cmd.AggregateID)}, nil
}

func decideRename(cur eventstore.State[Account], cmd commands.Command) ([]eventstore.NewEvent, error) {
	var d OwnerRenamedData
	if err := cmd.DecodePayload(&d); err != nil {
		return nil, err
	}
	if cur.Item.ID == "" {
		return nil, commands.NotFound("account %s does not exist", cmd.AggregateID)
	}
	return []eventstore.NewEvent{Renamed(d.OwnerFirst, d.OwnerLast)}, nil
}

// decideTransact records the transaction; the ledger's rule refuses it
// (a rejected result) when it would pass the overdraft limit.
func decideTransact(cur eventstore.State[Account], cmd commands.Command) ([]eventstore.NewEvent, error) {
	var d TransactionAcceptedData
	if err := cmd.DecodePayload(&d); err != nil {
		return nil, err
	}
	if d.Amount == 0 {
		return nil, &eventstore.ValidationError{Field: "amount", Reason: "is 0"}
	}
	if cur.Item.ID == "" {
		return nil, commands.NotFound("account %s does not exist", cmd.AggregateID)
	}
	return []eventstore.NewEvent{Transacted(d.Desc, d.Amount)}, nil
}
