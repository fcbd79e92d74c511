package bankaccount

import "github.com/eventpipe/eventpipe/eventstore"

// Processor returns the ledger's rules: an account is opened once, a
// transaction may not take the balance below the overdraft limit, a
// refund must be a credit, and a closed account refuses every
// transaction but a refund. They are pure: no I/O.
func Processor() eventstore.Processor[Account] {
	return eventstore.Processor[Account]{
		Initial: Initial,
		Rules: map[string]eventstore.Rule[Account]{
			AccountOpened:       eventstore.On(applyOpened),
			OwnerRenamed:        eventstore.On(applyRenamed),
			TransactionAccepted: eventstore.On(applyTransaction),
			AccountClosed:       eventstore.On(applyClosed),
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
	if ev.Refund && ev.Amount <= 0 {
		return a, eventstore.Rejectf("a refund must be a credit, got %d", ev.Amount)
	}
	if a.Closed && !ev.Refund {
		return a, eventstore.Reject("account closed")
	}
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

// applyClosed closes an open account, keeping its balance.
func applyClosed(a Account, _ AccountClosedData, _ *eventstore.Outbox) (Account, error) {
	switch {
	case a.ID == "":
		return a, eventstore.Reject("account was never opened")
	case a.Closed:
		return a, eventstore.Rejectf("account %s is already closed", a.ID)
	}
	a.Closed = true
	return a, nil
}
