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
	if !errors.As(err, &rej) || rej.Reason != "insufficient funds" || rej.EventType != bankaccount.TransactionAccepted {
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
