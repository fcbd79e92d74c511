package bankaccount

import "github.com/eventpipe/eventpipe/eventstore"

// Processor returns the ledger's rules: an account is opened once, a
// transaction may not take the balance below the overdraft limit, a
// refund must be a credit, and a closed account refuses every
// transaction but a refund. They are pure: no I/O.
func Processor() eventstore.Processor[Account] {
	return eventstore.NewProcessor(Initial,
		eventstore.OnEvent(AccountOpenedEvent, applyOpened),
		eventstore.OnEvent(OwnerRenamedEvent, applyRenamed),
		eventstore.OnEvent(TransactionAcceptedEvent, applyTransaction),
		eventstore.OnEvent(AccountClosedEvent, applyClosed),
	)
}

func applyOpened(a Account, ev AccountOpenedData, _ *eventstore.Outbox) (Account, error) {
	if a.ID != "" {
		return a, eventstore.RejectWith(ErrExists, "account %s already exists", a.ID)
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
		return a, eventstore.RejectWith(ErrRefundNotCredit, "a refund must be a credit, got %d", ev.Amount)
	}
	if a.Closed && !ev.Refund {
		return a, eventstore.RejectWith(ErrClosed, "account closed")
	}
	next := a.Balance + ev.Amount
	if next < a.MinimumBalance {
		return a, eventstore.RejectWith(ErrInsufficientFunds, "insufficient funds")
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
		return a, eventstore.RejectWith(ErrNotFound, "account was never opened")
	case a.Closed:
		return a, eventstore.RejectWith(ErrAlreadyClosed, "account %s is already closed", a.ID)
	}
	a.Closed = true
	return a, nil
}
