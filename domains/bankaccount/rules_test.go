package bankaccount_test

import (
	"errors"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
)

func envelopes(t *testing.T, evs ...eventstore.NewEvent) []eventstore.Envelope {
	t.Helper()
	out := make([]eventstore.Envelope, len(evs))
	for i, e := range evs {
		out[i] = eventstore.Envelope{
			EventID: eventstore.NewEventID(time.Now()), AggregateType: bankaccount.AggregateType, AggregateID: "1",
			Sequence: int64(i + 1), EventType: e.Type, SchemaVersion: 1, OccurredAt: time.Now(), Payload: e.Payload,
		}
	}
	return out
}

// TestRulesPublishOverdrawnOnceAndRejectPastTheOverdraft applies the
// rules without a store.
func TestRulesPublishOverdrawnOnceAndRejectPastTheOverdraft(t *testing.T) {
	p := bankaccount.Processor()
	st, out, err := p.Apply(p.Initial(), envelopes(t,
		bankaccount.Opened("1"), bankaccount.Renamed("John", "Brown"),
		bankaccount.Transacted("A", 200), bankaccount.Transacted("B", -300), bankaccount.Transacted("C", -100),
	))
	if err != nil {
		t.Fatal(err)
	}
	want := bankaccount.Account{ID: "1", OwnerFirst: "John", OwnerLast: "Brown", Balance: -200, MinimumBalance: -1000}
	if st != want {
		t.Fatalf("state %+v, want %+v", st, want)
	}
	if len(out) != 1 || out[0].Name != "accountOverdrawn" || out[0].Seq != 4 || string(out[0].Payload) != `{"accountId":"1"}` {
		t.Fatalf("outbound %+v, want one accountOverdrawn from sequence 4", out)
	}
	_, _, err = p.Apply(st, envelopes(t, bankaccount.Transacted("D", -801)))
	var rej *eventstore.RuleRejection
	if !errors.As(err, &rej) || !errors.Is(err, bankaccount.ErrInsufficientFunds) || rej.EventType != bankaccount.TransactionAccepted {
		t.Fatalf("past the overdraft: %v", err)
	}
	if _, _, err := p.Apply(st, envelopes(t, bankaccount.Transacted("D", -800))); err != nil {
		t.Fatalf("exactly at the overdraft limit: %v", err)
	}
	_, _, err = p.Apply(st, envelopes(t, bankaccount.Opened("2")))
	if !errors.As(err, &rej) {
		t.Fatalf("second creation: %v", err)
	}
}

// TestRulesClosedAccountKeepsItsBalanceAndTakesOnlyRefunds closes an
// account without a store: the balance stays, every later transaction is
// rejected ("account closed") but a refund, which is credited; a refund
// must be a credit, open or closed; an account closes once, and only
// after it was opened.
func TestRulesClosedAccountKeepsItsBalanceAndTakesOnlyRefunds(t *testing.T) {
	p := bankaccount.Processor()
	open, _, err := p.Apply(p.Initial(), envelopes(t, bankaccount.Opened("1"), bankaccount.Transacted("A", 300)))
	if err != nil {
		t.Fatal(err)
	}
	closed, _, err := p.Apply(open, envelopes(t, bankaccount.Closed("moved away")))
	if err != nil {
		t.Fatal(err)
	}
	want := bankaccount.Account{ID: "1", Balance: 300, MinimumBalance: bankaccount.DefaultMinimumBalance, Closed: true}
	if closed != want {
		t.Fatalf("closed %+v, want %+v", closed, want)
	}

	refunded, out, err := p.Apply(closed, envelopes(t, bankaccount.Refunded("refund of t1", 50), bankaccount.Refunded("refund of t2", 25)))
	if err != nil || refunded.Balance != 375 || !refunded.Closed || len(out) != 0 {
		t.Fatalf("refunds to a closed account: %+v, outbound %v, %v; want balance 375, still closed", refunded, out, err)
	}
	// A refund to an open account is an ordinary credit.
	if st, _, err := p.Apply(open, envelopes(t, bankaccount.Refunded("R", 10))); err != nil || st.Balance != 310 {
		t.Fatalf("refund to an open account: %+v, %v", st, err)
	}

	refusals := map[string]struct {
		from   bankaccount.Account
		ev     eventstore.NewEvent
		reason string
		code   eventstore.Code
	}{
		"debit of a closed account":         {closed, bankaccount.Transacted("D", -1), "account closed", bankaccount.ErrClosed},
		"credit of a closed account":        {closed, bankaccount.Transacted("C", 1), "account closed", bankaccount.ErrClosed},
		"refund that is a debit, closed":    {closed, refundOf(-5), "a refund must be a credit, got -5", bankaccount.ErrRefundNotCredit},
		"refund of nothing, closed":         {closed, refundOf(0), "a refund must be a credit, got 0", bankaccount.ErrRefundNotCredit},
		"refund that is a debit, open":      {open, refundOf(-5), "a refund must be a credit, got -5", bankaccount.ErrRefundNotCredit},
		"closing a closed account":          {closed, bankaccount.Closed(""), "account 1 is already closed", bankaccount.ErrAlreadyClosed},
		"closing an account never opened":   {p.Initial(), bankaccount.Closed(""), "account was never opened", bankaccount.ErrNotFound},
		"reopening a closed account (open)": {closed, bankaccount.Opened("1"), "account 1 already exists", bankaccount.ErrExists},
	}
	for name, tc := range refusals {
		st, _, err := p.Apply(tc.from, envelopes(t, tc.ev))
		var rej *eventstore.RuleRejection
		if !errors.As(err, &rej) || rej.Reason != tc.reason || rej.EventType != tc.ev.Type || !errors.Is(err, tc.code) {
			t.Errorf("%s: %v, want a RuleRejection %s of %s: %s", name, err, tc.code, tc.ev.Type, tc.reason)
		}
		if st != tc.from {
			t.Errorf("%s: state moved to %+v", name, st)
		}
	}
}

// refundOf is a refund event of amount, whatever its sign.
func refundOf(amount int64) eventstore.NewEvent {
	return bankaccount.TransactionAcceptedEvent.New(bankaccount.TransactionAcceptedData{Desc: "R", Amount: amount, Refund: true})
}
