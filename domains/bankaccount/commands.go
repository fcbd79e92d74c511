package bankaccount

import (
	"encoding/json"
	"strings"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
)

// Command types of the ledger.
const (
	CommandOpen     = "OpenAccount"       // payload {}
	CommandRename   = "RenameOwner"       // payload AccountUpdate
	CommandTransact = "RecordTransaction" // payload Transaction; refused past the overdraft
)

func decode(cmd commands.Command, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(cmd.Payload)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &eventstore.ValidationError{Field: "payload", Reason: cmd.Type + ": " + err.Error()}
	}
	return nil
}

func decideOpen(cur eventstore.State[Account], cmd commands.Command) ([]eventstore.NewEvent, error) {
	if err := decode(cmd, &struct{}{}); err != nil {
		return nil, err
	}
	if cur.Item.ID != "" {
		return nil, commands.Conflict("account %s already exists", cmd.AggregateID)
	}
	return []eventstore.NewEvent{Create(cmd.AggregateID)}, nil
}

func decideRename(cur eventstore.State[Account], cmd commands.Command) ([]eventstore.NewEvent, error) {
	var u AccountUpdate
	if err := decode(cmd, &u); err != nil {
		return nil, err
	}
	if cur.Item.ID == "" {
		return nil, commands.NotFound("account %s does not exist", cmd.AggregateID)
	}
	return []eventstore.NewEvent{Rename(u.OwnerFirst, u.OwnerLast)}, nil
}

// decideTransact records the transaction; the ledger's rule refuses it
// (a rejected result) when it would pass the overdraft limit.
func decideTransact(cur eventstore.State[Account], cmd commands.Command) ([]eventstore.NewEvent, error) {
	var tx Transaction
	if err := decode(cmd, &tx); err != nil {
		return nil, err
	}
	if tx.Amount == 0 {
		return nil, &eventstore.ValidationError{Field: "amount", Reason: "is 0"}
	}
	if cur.Item.ID == "" {
		return nil, commands.NotFound("account %s does not exist", cmd.AggregateID)
	}
	return []eventstore.NewEvent{Transact(tx.Desc, tx.Amount)}, nil
}

// Domain describes the ledger's write model: its events and its commands
// (OpenAccount, RenameOwner, RecordTransaction), each deciding against the
// account's STATE.
func Domain() commands.Domain {
	return commands.FacetDomain(AggregateType, Processor(), map[string]commands.Decide[Account]{
		CommandOpen: decideOpen, CommandRename: decideRename, CommandTransact: decideTransact,
	})
}
