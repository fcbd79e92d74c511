package transfer_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/domains/transfer"
	"github.com/eventpipe/eventpipe/eventstore"
)

// envelopes numbers evs from sequence first on transfer t1.
func envelopes(t *testing.T, first int64, evs ...any) []eventstore.Envelope {
	t.Helper()
	out := make([]eventstore.Envelope, 0, len(evs)/2)
	for i := 0; i+1 < len(evs); i += 2 {
		b, err := json.Marshal(evs[i+1])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, eventstore.Envelope{
			EventID: eventstore.NewEventID(time.Now()), AggregateType: transfer.AggregateType, AggregateID: "t1",
			Sequence: first + int64(i/2), EventType: evs[i].(string), SchemaVersion: 1, OccurredAt: time.Now(), Payload: b,
		})
	}
	return out
}

var request = transfer.RequestedData{From: "a", To: "b", Amount: 250}

// TestRulesFinishATransferOnceAndPublishItsOutcome applies the transfer
// rules without a store: a request sets the transfer up, each outcome
// finishes it with its status and reason and publishes its outbound
// event, and nothing changes a finished transfer.
func TestRulesFinishATransferOnceAndPublishItsOutcome(t *testing.T) {
	p := transfer.Processor()
	requested, out, err := p.Apply(p.Initial(), envelopes(t, 1, transfer.TransferRequested, request))
	if err != nil || len(out) != 0 {
		t.Fatalf("request: outbound %v, %v", out, err)
	}
	want := transfer.Transfer{ID: "t1", From: "a", To: "b", Amount: 250, Status: transfer.StatusRequested}
	if requested != want || requested.Status.Finished() {
		t.Fatalf("requested %+v, want %+v (not finished)", requested, want)
	}

	outcomes := []struct {
		event    string
		payload  any
		status   transfer.Status
		outbound string
		body     string
	}{
		{transfer.TransferCompleted, transfer.CompletedData{}, transfer.StatusCompleted, transfer.OutboundTransferCompleted,
			`{"transferId":"t1","from":"a","to":"b","amount":250}`},
		{transfer.TransferCompensated, transfer.ReasonData{Reason: "credit rejected: account closed"}, transfer.StatusCompensated, transfer.OutboundTransferCompensated,
			`{"transferId":"t1","from":"a","to":"b","amount":250,"reason":"credit rejected: account closed"}`},
		{transfer.TransferFailed, transfer.ReasonData{Reason: "debit rejected: insufficient funds"}, transfer.StatusFailed, transfer.OutboundTransferFailed,
			`{"transferId":"t1","from":"a","to":"b","amount":250,"reason":"debit rejected: insufficient funds"}`},
	}
	for _, o := range outcomes {
		st, out, err := p.Apply(requested, envelopes(t, 2, o.event, o.payload))
		if err != nil {
			t.Fatalf("%s: %v", o.event, err)
		}
		var reason string
		if r, ok := o.payload.(transfer.ReasonData); ok {
			reason = r.Reason
		}
		fin := want
		fin.Status, fin.Reason = o.status, reason
		if st != fin || !st.Status.Finished() {
			t.Errorf("%s: state %+v, want %+v (finished)", o.event, st, fin)
		}
		if len(out) != 1 || out[0].Name != o.outbound || out[0].Seq != 2 || string(out[0].Payload) != o.body {
			t.Errorf("%s: outbound %+v, want one %s from sequence 2: %s", o.event, out, o.outbound, o.body)
		}
		// A finished transfer refuses every outcome, and a second request.
		for _, again := range outcomes {
			_, _, err := p.Apply(st, envelopes(t, 3, again.event, again.payload))
			rejected(t, err, again.event, "transfer t1 is already "+string(o.status))
		}
		_, _, err = p.Apply(st, envelopes(t, 3, transfer.TransferRequested, request))
		rejected(t, err, transfer.TransferRequested, "transfer t1 was already requested")
	}
}

// TestRulesRefuseOutcomesBeforeARequestAndBadRequests: an outcome of a
// transfer never requested, a second request, and a request that is not
// between two different accounts or not for a positive amount are
// rejected.
func TestRulesRefuseOutcomesBeforeARequestAndBadRequests(t *testing.T) {
	p := transfer.Processor()
	requested, _, err := p.Apply(p.Initial(), envelopes(t, 1, transfer.TransferRequested, request))
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		from    transfer.Transfer
		event   string
		payload any
		reason  string
	}{
		"completed before requested":   {p.Initial(), transfer.TransferCompleted, transfer.CompletedData{}, "transfer was never requested"},
		"compensated before requested": {p.Initial(), transfer.TransferCompensated, transfer.ReasonData{Reason: "x"}, "transfer was never requested"},
		"failed before requested":      {p.Initial(), transfer.TransferFailed, transfer.ReasonData{Reason: "x"}, "transfer was never requested"},
		"requested twice":              {requested, transfer.TransferRequested, request, "transfer t1 was already requested"},
		"to the same account":          {p.Initial(), transfer.TransferRequested, transfer.RequestedData{From: "a", To: "a", Amount: 1}, `a transfer needs two different accounts, got "a" and "a"`},
		"from no account":              {p.Initial(), transfer.TransferRequested, transfer.RequestedData{To: "b", Amount: 1}, `a transfer needs two different accounts, got "" and "b"`},
		"of nothing":                   {p.Initial(), transfer.TransferRequested, transfer.RequestedData{From: "a", To: "b"}, "amount 0, want > 0"},
		"of a negative amount":         {p.Initial(), transfer.TransferRequested, transfer.RequestedData{From: "a", To: "b", Amount: -5}, "amount -5, want > 0"},
	} {
		seq := int64(1)
		if tc.from.Status != transfer.StatusNone {
			seq = 2
		}
		st, out, err := p.Apply(tc.from, envelopes(t, seq, tc.event, tc.payload))
		if st != tc.from || len(out) != 0 {
			t.Errorf("%s: state %+v, outbound %v after a rejection", name, st, out)
		}
		var rej *eventstore.RuleRejection
		if !errors.As(err, &rej) || rej.EventType != tc.event || rej.Reason != tc.reason {
			t.Errorf("%s: %v, want a RuleRejection of %s: %s", name, err, tc.event, tc.reason)
		}
	}
}

// TestReplayOfAFinishedTransferGivesItsOutcome: replaying a transfer's
// whole log gives its final status and reason.
func TestReplayOfAFinishedTransferGivesItsOutcome(t *testing.T) {
	st, err := transfer.Processor().Replay(envelopes(t, 1,
		transfer.TransferRequested, request, transfer.TransferCompensated, transfer.ReasonData{Reason: "late"}))
	want := transfer.Transfer{ID: "t1", From: "a", To: "b", Amount: 250, Status: transfer.StatusCompensated, Reason: "late"}
	if err != nil || st != want {
		t.Fatalf("replay %+v, %v; want %+v", st, err, want)
	}
}

func rejected(t *testing.T, err error, eventType, reason string) {
	t.Helper()
	var rej *eventstore.RuleRejection
	if !errors.As(err, &rej) || rej.EventType != eventType || rej.Reason != reason {
		t.Errorf("%v, want a RuleRejection of %s: %s", err, eventType, reason)
	}
}

// TestStatusFinished: only the three outcomes are finished.
func TestStatusFinished(t *testing.T) {
	for s, want := range map[transfer.Status]bool{
		transfer.StatusNone: false, transfer.StatusRequested: false,
		transfer.StatusCompleted: true, transfer.StatusCompensated: true, transfer.StatusFailed: true,
	} {
		if s.Finished() != want {
			t.Errorf("%q.Finished() = %v, want %v", s, !want, want)
		}
	}
}

// TestDomainDescribesTheTransferCommandsAndEvents: the domain is valid
// and names exactly the four commands and four events.
func TestDomainDescribesTheTransferCommandsAndEvents(t *testing.T) {
	d := transfer.Domain()
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if d.AggregateType != "transfer" || d.NewSnapshot == nil {
		t.Errorf("domain %+v", d)
	}
	wantCmds := []string{"CompensateTransfer", "CompleteTransfer", "FailTransfer", "RequestTransfer"}
	if len(d.CommandTypes) != len(wantCmds) {
		t.Fatalf("commands %v, want %v", d.CommandTypes, wantCmds)
	}
	for i := range wantCmds {
		if d.CommandTypes[i] != wantCmds[i] {
			t.Fatalf("commands %v, want %v", d.CommandTypes, wantCmds)
		}
	}
	for _, e := range []string{"TransferRequested", "TransferCompleted", "TransferCompensated", "TransferFailed"} {
		if _, ok := d.EventTypes[e]; !ok {
			t.Errorf("event type %s missing from %v", e, d.EventTypes.Names())
		}
	}
	if len(d.EventTypes) != 4 {
		t.Errorf("event types %v, want 4", d.EventTypes.Names())
	}
}
