package bankaccount

import "github.com/eventpipe/eventpipe/eventstore"

// Processor returns the ledger's rules. They are pure: no I/O.
func Processor() eventstore.Processor[Account] {
	return eventstore.Processor[Account]{
		Initial: Initial,
		Rules: map[string]eventstore.Rule[Account]{
			EventAccountCreation:     eventstore.On(applyCreation),
			EventAccountUpdate:       eventstore.On(applyUpdate),
			EventTransactionAccepted: eventstore.On(applyTransaction),
		},
	}
}

func applyCreation(a Account, ev AccountCreation, _ *eventstore.Outbox) (Account, error) {
	if a.ID != "" {
		return a, eventstore.Rejectf("account %s already exists", a.ID)
	}
	a.ID = ev.ID
	return a, nil
}

func applyUpdate(a Account, ev AccountUpdate, _ *eventstore.Outbox) (Account, error) {
	a.OwnerFirst, a.OwnerLast = ev.OwnerFirst, ev.OwnerLast
	return a, nil
}

func applyTransaction(a Account, ev Transaction, out *eventstore.Outbox) (Account, error) {
	next := a.Balance + ev.Amount
	if next < a.MinimumBalance {
		return a, eventstore.Reject("insufficient funds")
	}
	if a.Balance >= 0 && next < 0 {
		out.Publish(OutboundAccountOverdrawn, AccountOverdrawn{AccountID: a.ID})
	}
	a.Balance = next
	return a, nil
}
