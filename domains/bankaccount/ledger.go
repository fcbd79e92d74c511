package bankaccount

import "github.com/eventpipe/eventpipe/eventstore"

// Ledger is the facet of bank accounts.
type Ledger = eventstore.Facet[Account]

// NewLedger returns the ledger facet on store. upcasters may be nil.
func NewLedger(store eventstore.Store, upcasters *eventstore.Upcasters) (*Ledger, error) {
	return eventstore.NewFacet(eventstore.FacetConfig[Account]{
		Store:         store,
		AggregateType: AggregateType,
		Processor:     Processor(),
		Upcasters:     upcasters,
	})
}

// Create is the event that opens account id.
func Create(id string) eventstore.NewEvent {
	return eventstore.Event(EventAccountCreation, AccountCreation{ID: id})
}

// Rename is the event that sets the owner's name.
func Rename(first, last string) eventstore.NewEvent {
	return eventstore.Event(EventAccountUpdate, AccountUpdate{OwnerFirst: first, OwnerLast: last})
}

// Transact is the event of a transaction of amount.
func Transact(desc string, amount int64) eventstore.NewEvent {
	return eventstore.Event(EventTransactionAccepted, Transaction{Desc: desc, Amount: amount})
}
