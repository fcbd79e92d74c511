package bankaccount

import "github.com/eventpipe/eventpipe/eventstore"

// Processor returns the ledger's rules. They are pure: no I/O.
func Processor() eventstore.Processor[Account] {
	return eventstore.Processor[Account]{
		Initial: Initial,
		Rules: map[string]eventstore.Rule[Account]{
			AccountOpened:       eventstore.On(applyOpened),
			OwnerRenamed:        eventstore.On(applyRenamed),
			TransactionAccepted: eventstore.On(applyTransaction),
		},
	}
}

func applyOpened(a Account, ev AccountOpenedData, _ *eventstore.Outbox) (Account, error) {
	if a.ID != "" {
		return a, eventstore.Rejectf("account %s already exists", a.ID)
	}
	a.ID = ev.ID
	return a, nil
}

func applyRenamed(a Account, ev OwnerRenamedData, _ *eventstore.Outbox) (Account, error) {
	a.OwnerFirst, a.OwnerLast = ev.OwnerFirst, ev.OwnerLast
	return a, nil
}

func applyTransaction(a Account, ev TransactionAcceptedData, out *eventstore.Outbox) (Account, error) {
	next := a.Balance + ev.Amount
	if next < a.MinimumBalance {
		return a, eventstore.Reject("insufficient funds")
	}
	if a.Balance >= 0 && next < 0 {
		out.Publish(OutboundAccountOverdrawn, AccountOverdrawnData{AccountID: a.ID})
	}
	a.Balance = next
	return a, nil
}
