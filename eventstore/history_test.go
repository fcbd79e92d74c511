package eventstore_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
)

// wallet is a state that deliberately does not remember payment keys: a
// rule that refuses a repeated key must look at the events themselves.
type wallet struct {
	Balance  int64 `json:"balance"`
	Payments int   `json:"payments"`
}

type paid struct {
	Key    string `json:"key"`
	Amount int64  `json:"amount"`
}

// uniqueKeyRule refuses a Paid event whose key an earlier Paid event of
// the aggregate already used: an idempotency key that only history can
// check. Without the past it refuses to guess.
func uniqueKeyRule(w wallet, p paid, h eventstore.History, out *eventstore.Outbox) (wallet, error) {
	if err := h.RequirePast(); err != nil {
		return w, err
	}
	for _, prev := range h.Before() {
		var q paid
		if prev.EventType == "Paid" && prev.DecodePayload(&q) == nil && q.Key == p.Key {
			return w, eventstore.Rejectf("key %s already used by sequence %d", p.Key, prev.Sequence)
		}
	}
	w.Balance += p.Amount
	w.Payments++
	if w.Payments == 1 {
		out.Publish("firstPayment", p)
	}
	return w, nil
}

func walletProcessor() eventstore.Processor[wallet] {
	return eventstore.Processor[wallet]{
		Initial: func() wallet { return wallet{} },
		Rules: map[string]eventstore.Rule[wallet]{
			"Fee": eventstore.On(func(w wallet, f struct{ Amount int64 }, _ *eventstore.Outbox) (wallet, error) {
				w.Balance -= f.Amount
				return w, nil
			}),
		},
		HistoryRules: map[string]eventstore.HistoryRule[wallet]{
			"Paid": eventstore.OnHistory(uniqueKeyRule),
		},
	}
}

// walletLog builds envelopes with sequences from+1, from+2, …; each spec
// is "key:amount" (a Paid event) or "fee:amount" (a Fee event).
func walletLog(from int64, specs ...string) []eventstore.Envelope {
	out := make([]eventstore.Envelope, len(specs))
	for i, s := range specs {
		key, amount, _ := strings.Cut(s, ":")
		typ, payload := "Paid", fmt.Sprintf(`{"key":%q,"amount":%s}`, key, amount)
		if key == "fee" {
			typ, payload = "Fee", fmt.Sprintf(`{"Amount":%s}`, amount)
		}
		out[i] = eventstore.Envelope{EventID: eventstore.NewEventID(time.Now()), AggregateType: "wallet", AggregateID: "w1",
			Sequence: from + int64(i) + 1, EventType: typ, SchemaVersion: 1, OccurredAt: time.Now(), Payload: json.RawMessage(payload)}
	}
	return out
}

func seqs(evs []eventstore.Envelope) []int64 {
	out := []int64{}
	for _, e := range evs {
		out = append(out, e.Sequence)
	}
	return out
}

// seen is what a history rule was shown for one event.
type seen struct {
	Seq        int64
	Past       []int64
	PastLoaded bool
	New        []int64
	Index      int
	Replayed   bool
	Before     []int64
}

// TestHistoryRuleSeesWhatEachCallRead records the History of every event
// through Apply (no past), ApplyWithHistory (the whole log before the
// batch) and Replay (the log before each event, each event its own batch).
func TestHistoryRuleSeesWhatEachCallRead(t *testing.T) {
	var got []seen
	p := eventstore.Processor[int]{
		Initial: func() int { return 0 },
		HistoryRules: map[string]eventstore.HistoryRule[int]{
			"Paid": func(n int, ev eventstore.Envelope, h eventstore.History, _ *eventstore.Outbox) (int, error) {
				if h.New[h.Index].EventID != ev.EventID {
					t.Errorf("sequence %d: New[Index] is not the event applied", ev.Sequence)
				}
				got = append(got, seen{ev.Sequence, seqs(h.Past), h.PastLoaded, seqs(h.New), h.Index, h.Replayed, seqs(h.Before())})
				return n + 1, nil
			},
		},
	}
	log := walletLog(0, "a:1", "b:1", "c:1", "d:1", "e:1")
	for _, tc := range []struct {
		name string
		run  func() (int, error)
		want []seen
	}{
		{"Apply", func() (int, error) { n, _, err := p.Apply(0, log[3:]); return n, err }, []seen{
			{4, []int64{}, false, []int64{4, 5}, 0, false, []int64{}},
			{5, []int64{}, false, []int64{4, 5}, 1, false, []int64{4}},
		}},
		{"ApplyWithHistory", func() (int, error) { n, _, err := p.ApplyWithHistory(0, log[:3], log[3:]); return n, err }, []seen{
			{4, []int64{1, 2, 3}, true, []int64{4, 5}, 0, false, []int64{1, 2, 3}},
			{5, []int64{1, 2, 3}, true, []int64{4, 5}, 1, false, []int64{1, 2, 3, 4}},
		}},
		{"Replay", func() (int, error) { return p.Replay(log[:3]) }, []seen{
			{1, []int64{}, true, []int64{1}, 0, true, []int64{}},
			{2, []int64{1}, true, []int64{2}, 0, true, []int64{1}},
			{3, []int64{1, 2}, true, []int64{3}, 0, true, []int64{1, 2}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got = nil
			n, err := tc.run()
			if err != nil || n != len(tc.want) {
				t.Fatalf("applied %d events, err %v", n, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("history seen\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestHistoryRuleWithoutPastFailsWithPermanentErrPastNotLoaded: Apply
// (what Facet.Append runs) does not read the past, so a rule that needs
// it refuses with ErrPastNotLoaded rather than seeing an empty past.
func TestHistoryRuleWithoutPastFailsWithPermanentErrPastNotLoaded(t *testing.T) {
	p := walletProcessor()
	st, out, err := p.Apply(wallet{Balance: 7}, walletLog(3, "fee:2", "a:5"))
	if !errors.Is(err, eventstore.ErrPastNotLoaded) {
		t.Fatalf("Apply without past: %v, want ErrPastNotLoaded", err)
	}
	if !eventstore.IsPermanent(err) || !strings.Contains(err.Error(), "Paid (sequence 5)") {
		t.Fatalf("error %q: permanent %v, want permanent and naming the event", err, eventstore.IsPermanent(err))
	}
	var rej *eventstore.RuleRejection
	if errors.As(err, &rej) {
		t.Fatal("a missing past is not a rule's rejection")
	}
	if st.Balance != 5 || out != nil {
		t.Fatalf("state %+v, outbound %v: want the state before the Paid event, no outbound", st, out)
	}
	// Plain rules are unaffected.
	if st, _, err := p.Apply(wallet{Balance: 7}, walletLog(3, "fee:2")); err != nil || st.Balance != 5 {
		t.Fatalf("plain rule: %+v, %v", st, err)
	}
}

// TestUniqueKeyRuleNeedsHistoryToRejectARepeatedKey is the example: the
// state has no keys, so only the events can tell that a key was used, in
// the stored log or earlier in the same batch; Replay re-derives the same
// state as applying every batch with its full past.
func TestUniqueKeyRuleNeedsHistoryToRejectARepeatedKey(t *testing.T) {
	p := walletProcessor()
	log := walletLog(0, "a:10", "fee:1", "b:20")
	st, err := p.Replay(log)
	if err != nil || st != (wallet{Balance: 29, Payments: 2}) {
		t.Fatalf("replay: %+v, %v", st, err)
	}

	for _, tc := range []struct {
		name, reason string
		seq          int64
		batch        []string
		before       wallet // the state returned: before the rejected event
	}{
		{"key in the stored log", "key a already used by sequence 1", 4, []string{"a:5"}, wallet{Balance: 29, Payments: 2}},
		{"key earlier in the batch", "key c already used by sequence 4", 5, []string{"c:1", "c:1"}, wallet{Balance: 30, Payments: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, out, err := p.ApplyWithHistory(st, log, walletLog(3, tc.batch...))
			var rej *eventstore.RuleRejection
			if !errors.As(err, &rej) || rej.Reason != tc.reason || rej.Sequence != tc.seq || rej.EventType != "Paid" {
				t.Fatalf("got %v, want rejection of sequence %d: %s", err, tc.seq, tc.reason)
			}
			if out != nil || got != tc.before {
				t.Fatalf("state %+v, outbound %v after rejection", got, out)
			}
		})
	}

	// New keys pass; the state after them equals a replay of the longer log.
	batch := walletLog(3, "c:1", "fee:1", "d:2")
	got, out, err := p.ApplyWithHistory(st, log, batch)
	if err != nil || len(out) != 0 {
		t.Fatalf("new keys: %v, outbound %v", err, out)
	}
	replayed, err := p.Replay(append(append([]eventstore.Envelope{}, log...), batch...))
	if err != nil || replayed != got || got != (wallet{Balance: 31, Payments: 4}) {
		t.Fatalf("after the batch %+v, replay %+v (%v)", got, replayed, err)
	}

	// Outbound events of new events are published; Replay drops them.
	if _, out, err := p.ApplyWithHistory(wallet{}, nil, walletLog(0, "a:1")); err != nil || len(out) != 1 || out[0].Name != "firstPayment" || out[0].Seq != 1 {
		t.Fatalf("first payment: outbound %+v, %v", out, err)
	}

	// A duplicate already in the log (written behind the rules' back)
	// fails its replay at the event, naming it.
	_, err = p.Replay(walletLog(0, "a:1", "b:1", "a:1"))
	var rej *eventstore.RuleRejection
	if !errors.As(err, &rej) || rej.Sequence != 3 {
		t.Fatalf("replay of a log with a repeated key: %v", err)
	}
}

// TestHistoryIsTheWholeLogOrRefused: a past that does not start at
// sequence 1 or has a gap, or new events that do not follow it, are
// refused before any rule runs, so PastLoaded always means "every event".
func TestHistoryIsTheWholeLogOrRefused(t *testing.T) {
	p := walletProcessor()
	log := walletLog(0, "a:1", "b:1", "c:1")
	for _, tc := range []struct {
		name        string
		past, batch []eventstore.Envelope
		field       string
	}{
		{"past from 2", log[1:], walletLog(3, "d:1"), "past"},
		{"gap in past", []eventstore.Envelope{log[0], log[2]}, walletLog(3, "d:1"), "past"},
		{"batch after a gap", log, walletLog(4, "d:1"), "events"},
		{"batch overlapping the past", log, walletLog(2, "d:1"), "events"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ve *eventstore.ValidationError
			if _, _, err := p.ApplyWithHistory(wallet{}, tc.past, tc.batch); !errors.As(err, &ve) || ve.Field != tc.field {
				t.Fatalf("got %v, want *ValidationError on %s", err, tc.field)
			}
		})
	}
	var ve *eventstore.ValidationError
	if _, err := p.Replay(log[1:]); !errors.As(err, &ve) || ve.Field != "events" {
		t.Fatalf("Replay of a log from 2: %v", err)
	}
}

// TestHistoryBeforeCannotOverwriteTheLog: appending to the slices a rule
// is given allocates; the log the processor walks is unchanged.
func TestHistoryBeforeCannotOverwriteTheLog(t *testing.T) {
	log := walletLog(0, "a:1", "b:1", "c:1")
	want := seqs(log)
	p := eventstore.Processor[int]{
		Initial: func() int { return 0 },
		HistoryRules: map[string]eventstore.HistoryRule[int]{
			"Paid": func(n int, ev eventstore.Envelope, h eventstore.History, _ *eventstore.Outbox) (int, error) {
				junk := eventstore.Envelope{Sequence: 99}
				_ = append(h.Before(), junk)
				_ = append(h.Past, junk)
				_ = append(h.New, junk)
				return n + 1, nil
			},
		},
	}
	if n, err := p.Replay(log); err != nil || n != 3 {
		t.Fatalf("replay: %d, %v", n, err)
	}
	if _, _, err := p.ApplyWithHistory(0, log[:1], log[1:2]); err != nil {
		t.Fatal(err)
	}
	if got := seqs(log); !reflect.DeepEqual(got, want) {
		t.Fatalf("log now has sequences %v, want %v", got, want)
	}
}

// TestFacetConfigTakesHistoryRulesAndRefusesAnEventTypeInBothMaps.
func TestFacetConfigTakesHistoryRulesAndRefusesAnEventTypeInBothMaps(t *testing.T) {
	var anyStore struct{ eventstore.Store }
	plain := func(w wallet, _ eventstore.Envelope, _ *eventstore.Outbox) (wallet, error) { return w, nil }
	hist := func(w wallet, _ eventstore.Envelope, _ eventstore.History, _ *eventstore.Outbox) (wallet, error) {
		return w, nil
	}
	for _, tc := range []struct {
		name    string
		rules   map[string]eventstore.Rule[wallet]
		history map[string]eventstore.HistoryRule[wallet]
		// wantField is the ValidationError's Field, wantErr a part of its
		// Reason; both "" when the config is valid.
		wantField string
		wantErr   string
	}{
		{"history rules only", nil, map[string]eventstore.HistoryRule[wallet]{"Paid": hist}, "", ""},
		{"both kinds", map[string]eventstore.Rule[wallet]{"Fee": plain}, map[string]eventstore.HistoryRule[wallet]{"Paid": hist}, "", ""},
		{"no rule at all", nil, nil, "Processor.Rules", "is empty, and so are HistoryRules and FoldRules"},
		{"one type in both", map[string]eventstore.Rule[wallet]{"Paid": plain}, map[string]eventstore.HistoryRule[wallet]{"Paid": hist}, `Processor.Rules["Paid"]`, `"Paid" has a rule in both`},
		{"nil history rule", nil, map[string]eventstore.HistoryRule[wallet]{"Paid": nil}, `Processor.HistoryRules["Paid"]`, "is nil"},
		{"bad history event type", nil, map[string]eventstore.HistoryRule[wallet]{"Pa#id": hist}, "Processor.HistoryRules", "invalid event_type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := eventstore.FacetConfig[wallet]{Store: anyStore, AggregateType: "wallet",
				Processor: eventstore.Processor[wallet]{Initial: func() wallet { return wallet{} }, Rules: tc.rules, HistoryRules: tc.history}}
			err := cfg.Validate()
			if tc.wantField == "" {
				if err != nil {
					t.Fatalf("Validate: %v, want no error", err)
				}
				return
			}
			var ve *eventstore.ValidationError
			if !errors.As(err, &ve) || ve.Field != tc.wantField || !strings.Contains(ve.Reason, tc.wantErr) {
				t.Fatalf("Validate: %v, want an *eventstore.ValidationError on %s with %q", err, tc.wantField, tc.wantErr)
			}
		})
	}
	types := walletProcessor().Types()
	if _, ok := types["Paid"]; !ok || len(types) != 2 {
		t.Fatalf("Types %v, want Fee and Paid", types)
	}
}
