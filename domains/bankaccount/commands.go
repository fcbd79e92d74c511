package bankaccount

import (
	"fmt"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
)

// Command types.
const (
	OpenAccount       = "OpenAccount"       // payload {}
	RenameOwner       = "RenameOwner"       // payload OwnerRenamedData
	RecordTransaction = "RecordTransaction" // payload TransactionAcceptedData; rejected past the overdraft or on a closed account (but a refund)
	CloseAccount      = "CloseAccount"      // payload CloseAccountData
)

// CloseAccountData is the payload of CloseAccount.
type CloseAccountData struct {
	Reason string `json:"reason,omitempty"`
}

// Domain describes the ledger's write model: its events and its
// commands, each deciding against the account's STATE.
func Domain() commands.Domain {
	return commands.FacetDomain(AggregateType, Processor(), decides())
}

// decides returns the ledger's decide function per command type.
func decides() map[string]commands.Decide[Account] {
	return map[string]commands.Decide[Account]{
		OpenAccount: decideOpen, RenameOwner: decideRename, RecordTransaction: decideTransact, CloseAccount: decideClose,
	}
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
// (a rejected result) when it would pass the overdraft limit, or when the
// account is closed and it is not a refund. A refund must be a credit.
func decideTransact(cur eventstore.State[Account], cmd commands.Command) ([]eventstore.NewEvent, error) {
	var d TransactionAcceptedData
	if err := cmd.DecodePayload(&d); err != nil {
		return nil, err
	}
	if d.Amount == 0 {
		return nil, &eventstore.ValidationError{Field: "amount", Reason: "is 0"}
	}
	if d.Refund && d.Amount < 0 {
		return nil, &eventstore.ValidationError{Field: "amount", Reason: fmt.Sprintf("is %d, want > 0 for a refund", d.Amount)}
	}
	if cur.Item.ID == "" {
		return nil, commands.NotFound("account %s does not exist", cmd.AggregateID)
	}
	return []eventstore.NewEvent{eventstore.Event(TransactionAccepted, d)}, nil
}

// decideClose closes an open account; its balance stays where it is.
func decideClose(cur eventstore.State[Account], cmd commands.Command) ([]eventstore.NewEvent, error) {
	var d CloseAccountData
	if err := cmd.DecodePayload(&d); err != nil {
		return nil, err
	}
	if cur.Item.ID == "" {
		return nil, commands.NotFound("account %s does not exist", cmd.AggregateID)
	}
	if cur.Item.Closed {
		return nil, commands.Conflict("account %s is already closed", cmd.AggregateID)
	}
	return []eventstore.NewEvent{Closed(d.Reason)}, nil
}
