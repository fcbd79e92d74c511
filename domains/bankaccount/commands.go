package bankaccount

import (
	"fmt"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/privacy"
)

// Command types.
const (
	OpenAccount       = "OpenAccount"       // payload {}
	RenameOwner       = "RenameOwner"       // payload OwnerRenamedData
	RecordTransaction = "RecordTransaction" // payload TransactionAcceptedData; rejected past the overdraft or on a closed account (but a refund)
	CloseAccount      = "CloseAccount"      // payload CloseAccountData
)

// Command definitions: each command type with the Go type of its payload.
var (
	OpenAccountCommand       = commands.DefineCommand[struct{}](OpenAccount)
	RenameOwnerCommand       = commands.DefineCommand[OwnerRenamedData](RenameOwner)
	RecordTransactionCommand = commands.DefineCommand[TransactionAcceptedData](RecordTransaction)
	CloseAccountCommand      = commands.DefineCommand[CloseAccountData](CloseAccount)
)

// CloseAccountData is the payload of CloseAccount.
type CloseAccountData struct {
	Reason string `json:"reason,omitempty"`
}

// Domain describes the ledger's write model: its events and its
// commands, each deciding against the account's STATE.
func Domain() commands.Domain {
	d := commands.FacetDomain(AggregateType, Processor(), deciders()...)
	d.Personal = Personal
	d.PersonalCommands = PersonalCommands
	return d
}

// Personal is the bank accounts' personal data (docs/privacy.md): the
// holder's name and the transactions' descriptions, whose subject is the
// account.
var Personal = map[string]privacy.Personal{
	OwnerRenamed:        {SubjectIsAggregate: true, Fields: []string{"/ownerFirst", "/ownerLast"}},
	TransactionAccepted: {SubjectIsAggregate: true, Fields: []string{"/desc"}},
}

// PersonalCommands is the personal data of the ledger's command
// payloads, sealed on the bus: the holder's name and a transaction's
// description, as their events hold them, whose subject is the account.
var PersonalCommands = map[string]privacy.Personal{
	RenameOwner:       {SubjectIsAggregate: true, Fields: []string{"/ownerFirst", "/ownerLast"}},
	RecordTransaction: {SubjectIsAggregate: true, Fields: []string{"/desc"}},
}

// deciders returns the ledger's decision per command type.
func deciders() []commands.Decider[Account] {
	return []commands.Decider[Account]{
		commands.OnCommand(OpenAccountCommand, decideOpen),
		commands.OnCommand(RenameOwnerCommand, decideRename),
		commands.OnCommand(RecordTransactionCommand, decideTransact),
		commands.OnCommand(CloseAccountCommand, decideClose),
	}
}

// NewFacet returns the ledger facet on store (reads of an account's
// STATE, appends that the rules check). upcasters may be nil.
func NewFacet(store eventstore.Store, upcasters *eventstore.Upcasters) (*eventstore.Facet[Account], error) {
	return eventstore.NewFacet(eventstore.FacetConfig[Account]{Store: store, AggregateType: AggregateType, Processor: Processor(), Upcasters: upcasters})
}

func decideOpen(cur eventstore.State[Account], cmd commands.Command, _ struct{}) ([]eventstore.NewEvent, error) {
	if cur.Item.ID != "" {
		return nil, commands.ConflictWith(ErrExists, "account %s already exists", cmd.AggregateID)
	}
	return []eventstore.NewEvent{Opened(cmd.AggregateID)}, nil
}

func decideRename(cur eventstore.State[Account], cmd commands.Command, d OwnerRenamedData) ([]eventstore.NewEvent, error) {
	if cur.Item.ID == "" {
		return nil, commands.NotFoundWith(ErrNotFound, "account %s does not exist", cmd.AggregateID)
	}
	return []eventstore.NewEvent{Renamed(d.OwnerFirst, d.OwnerLast)}, nil
}

// decideTransact records the transaction; the ledger's rule refuses it
// (a rejected result) when it would pass the overdraft limit, or when the
// account is closed and it is not a refund. A refund must be a credit.
func decideTransact(cur eventstore.State[Account], cmd commands.Command, d TransactionAcceptedData) ([]eventstore.NewEvent, error) {
	if d.Amount == 0 {
		return nil, &eventstore.ValidationError{Field: "amount", Reason: "is 0"}
	}
	if d.Refund && d.Amount < 0 {
		return nil, &eventstore.ValidationError{Field: "amount", Reason: fmt.Sprintf("is %d, want > 0 for a refund", d.Amount)}
	}
	if cur.Item.ID == "" {
		return nil, commands.NotFoundWith(ErrNotFound, "account %s does not exist", cmd.AggregateID)
	}
	return []eventstore.NewEvent{TransactionAcceptedEvent.New(d)}, nil
}

// decideClose closes an open account; its balance stays where it is.
func decideClose(cur eventstore.State[Account], cmd commands.Command, d CloseAccountData) ([]eventstore.NewEvent, error) {
	if cur.Item.ID == "" {
		return nil, commands.NotFoundWith(ErrNotFound, "account %s does not exist", cmd.AggregateID)
	}
	if cur.Item.Closed {
		return nil, commands.ConflictWith(ErrAlreadyClosed, "account %s is already closed", cmd.AggregateID)
	}
	return []eventstore.NewEvent{Closed(d.Reason)}, nil
}
