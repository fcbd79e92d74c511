package storetest

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/eventpipe/eventpipe/eventstore"
)

func testAppendAndLoad(t *testing.T, open Opener) {
	e := setup(t, open, eventstore.Schema{})
	ref := e.ref("order")
	meta := eventstore.Metadata{CorrelationID: "corr-1", Actor: "u_alice", IP: "10.0.0.1", ActorSource: eventstore.ActorSigned}
	req, err := eventstore.Prepare(ref, 0, eventstore.Change{CommandID: "cmd-1", Metadata: meta, Events: []eventstore.NewEvent{
		eventstore.Event("Placed", map[string]int{"total": 4500}),
		eventstore.Event("Paid", map[string]any{"amount": 4500, "note": "ünïcode ✓"}),
	}}, e.schema)
	if err != nil {
		t.Fatal(err)
	}
	res := e.mustAppend(req)
	if res.Aggregate != ref || res.FirstSeq != 1 || res.LastSeq != 2 || len(res.EventIDs) != 2 || len(res.Events) != 2 {
		t.Fatalf("result %+v; want %s 1..2 with 2 events", res, ref)
	}
	for i, ev := range req.Events {
		if res.EventIDs[i] != ev.EventID || res.Events[i].EventID != ev.EventID {
			t.Fatalf("result event %d is %s/%s, want %s", i, res.EventIDs[i], res.Events[i].EventID, ev.EventID)
		}
	}
	for v := int64(2); v < 5; v++ {
		e.mustAppend(e.prepare(ref, v, "", "Shipped"))
	}
	all := e.load(ref)
	if len(all) != 5 {
		t.Fatalf("loaded %d events, want 5", len(all))
	}
	for i, ev := range all {
		if ev.Sequence != int64(i+1) || ev.Aggregate() != ref {
			t.Fatalf("event %d is %s, want sequence %d of %s", i, ev, i+1, ref)
		}
		if ev.OccurredAt.Location().String() != "UTC" {
			t.Errorf("event %d occurred at %v, want UTC", i, ev.OccurredAt)
		}
	}
	if got, want := marshalAll(t, all[:2]), marshalAll(t, req.Events); got != want {
		t.Fatalf("loaded\n%s\nappended\n%s", got, want)
	}
	after3, err := e.s.Load(e.ctx, ref, 3)
	if err != nil || len(after3) != 2 || after3[0].Sequence != 4 || after3[1].Sequence != 5 {
		t.Fatalf("Load after 3: %d events, %v; want sequences 4, 5", len(after3), err)
	}
	if rest, err := e.s.Load(e.ctx, ref, 5); err != nil || len(rest) != 0 {
		t.Fatalf("Load after the last event: %d events, %v; want none and no error", len(rest), err)
	}
	if v, err := e.s.Version(e.ctx, ref); err != nil || v != 5 {
		t.Fatalf("Version = %d, %v; want 5", v, err)
	}
	if _, err := e.s.Load(e.ctx, ref, -1); !isValidation(err, "") {
		t.Errorf("Load after -1: %v; want a *ValidationError", err)
	}
	all[0].Payload[0] = 'X' // the store's copy must not change
	if again := e.load(ref); again[0].Payload[0] == 'X' {
		t.Error("modifying a loaded payload changed the stored event")
	}
}

func testNotFound(t *testing.T, open Opener) {
	e := setup(t, open, eventstore.Schema{})
	ref := e.ref("nobody")
	checks := map[string]error{}
	_, checks["Load"] = e.s.Load(e.ctx, ref, 0)
	_, checks["Version"] = e.s.Version(e.ctx, ref)
	_, checks["State"] = e.s.State(e.ctx, ref)
	_, checks["Snapshot"] = e.s.Snapshot(e.ctx, ref)
	checks["PutSnapshot"] = e.s.PutSnapshot(e.ctx, ref, eventstore.Stored{Seq: 1, Data: json.RawMessage(`{}`)})
	_, checks["Append at version 3"] = e.s.Append(e.ctx, e.prepare(ref, 3, "", "Happened"))
	for op, err := range checks {
		if !errors.Is(err, eventstore.ErrAggregateNotFound) {
			t.Errorf("%s: %v; want ErrAggregateNotFound", op, err)
		}
	}
	if _, err := e.s.CommandResult(e.ctx, ref, "cmd-1"); !errors.Is(err, eventstore.ErrCommandNotFound) {
		t.Errorf("CommandResult: %v; want ErrCommandNotFound", err)
	}
	if evs, err := e.s.Load(e.ctx, ref, 4); err != nil || len(evs) != 0 {
		t.Errorf("Load after 4: %d events, %v; want none and no error", len(evs), err)
	}
	if _, err := e.s.Version(e.ctx, ref); !errors.Is(err, eventstore.ErrAggregateNotFound) {
		t.Errorf("the failed append created the aggregate: Version %v", err)
	}
}

func testExpectedVersion(t *testing.T, open Opener) {
	e := setup(t, open, eventstore.Schema{})
	ref := e.ref("account")
	e.mustAppend(e.prepare(ref, 0, "", "Opened", "Deposited"))
	before := e.snapshotOf(ref)
	for _, expected := range []int64{0, 1, 3, 7} {
		req := e.prepare(ref, expected, "", "Withdrawn")
		req.State = json.RawMessage(`{"v":"late"}`)
		req.Outbound = []eventstore.Outbound{{Seq: expected + 1, Name: "Late", Payload: json.RawMessage(`{}`)}}
		_, err := e.s.Append(e.ctx, req)
		ce := asConflict(err)
		if ce == nil || ce.Expected != expected || ce.Actual != 2 || ce.Aggregate != ref {
			t.Errorf("append at %d: %v; want *ConcurrencyError{%s, Expected %d, Actual 2}", expected, err, ref, expected)
		}
	}
	if after := e.snapshotOf(ref); after != before {
		t.Fatalf("conflicting appends wrote:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	e.mustAppend(e.prepare(ref, 2, "", "Withdrawn"))
	if v, err := e.s.Version(e.ctx, ref); err != nil || v != 3 {
		t.Fatalf("Version = %d, %v; want 3 after an append at the current version", v, err)
	}
}

func testStateAndOutbox(t *testing.T, open Opener) {
	e := setup(t, open, eventstore.Schema{})
	if e.sub.Outbound == nil {
		t.Log("Subject.Outbound is nil: the outbox is not checked")
	}
	ref := e.ref("cart")
	req := e.prepare(ref, 0, "", "Created", "ItemAdded")
	req.State = json.RawMessage(`{"items":1}`)
	req.Outbound = []eventstore.Outbound{
		{Seq: 2, Index: 0, Name: "CartChanged", Payload: json.RawMessage(`{"items":1}`)},
		{Seq: 2, Index: 1, Name: "Notify", Payload: json.RawMessage(`{"to":"u1"}`)},
		{Seq: 1, Index: 0, Name: "CartOpened", Payload: json.RawMessage(`{}`)},
	}
	e.mustAppend(req)
	st, err := e.s.State(e.ctx, ref)
	if err != nil || st.Seq != 2 || !sameJSON(st.Data, req.State) {
		t.Fatalf("State = %d %s, %v; want 2 %s", st.Seq, st.Data, err, req.State)
	}
	if e.sub.Outbound != nil {
		obs, err := e.sub.Outbound(e.ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		want := []struct {
			seq   int64
			index int
			name  string
		}{{1, 0, "CartOpened"}, {2, 0, "CartChanged"}, {2, 1, "Notify"}}
		if len(obs) != len(want) {
			t.Fatalf("%d outbound records, want %d: %+v", len(obs), len(want), obs)
		}
		for i, w := range want {
			o, cause := obs[i], req.Events[w.seq-1]
			if o.Seq != w.seq || o.Index != w.index || o.Name != w.name || o.EventID != cause.EventID ||
				o.AggregateType != ref.Type || o.AggregateID != ref.ID || o.Metadata.CausationID != cause.EventID || o.ID == "" {
				t.Errorf("outbound %d = %+v; want %s (%d/%d) caused by %s", i, o, w.name, w.seq, w.index, cause.EventID)
			}
		}
	}

	// STATE alone, at the same version.
	rewrite := eventstore.AppendRequest{Aggregate: ref, ExpectedVersion: 2, State: json.RawMessage(`{"items":1,"recalculated":true}`)}
	res, err := e.s.Append(e.ctx, rewrite)
	if err != nil || res.LastSeq != 2 {
		t.Fatalf("STATE-only append = %+v, %v; want version 2", res, err)
	}
	if st, err := e.s.State(e.ctx, ref); err != nil || st.Seq != 2 || !sameJSON(st.Data, rewrite.State) {
		t.Fatalf("State after rewrite = %d %s, %v", st.Seq, st.Data, err)
	}
	if v, _ := e.s.Version(e.ctx, ref); v != 2 {
		t.Fatalf("a STATE-only append moved the version to %d", v)
	}

	// Failed appends write neither STATE nor outbox.
	before := e.snapshotOf(ref)
	stale := e.prepare(ref, 1, "", "ItemAdded")
	stale.State = json.RawMessage(`{"items":99}`)
	stale.Outbound = []eventstore.Outbound{{Seq: 2, Name: "CartChanged", Payload: json.RawMessage(`{"items":99}`)}}
	if _, err := e.s.Append(e.ctx, stale); asConflict(err) == nil {
		t.Fatalf("stale append with STATE and outbox: %v; want *ConcurrencyError", err)
	}
	if _, err := e.s.Append(e.ctx, eventstore.AppendRequest{Aggregate: ref, ExpectedVersion: 1, State: json.RawMessage(`{"items":98}`)}); asConflict(err) == nil {
		t.Fatalf("stale STATE-only append: %v; want *ConcurrencyError", err)
	}
	tooBig := e.prepare(ref, 2, "", "ItemAdded")
	tooBig.State = json.RawMessage(`{"blob":"` + strings.Repeat("x", 401*1024) + `"}`)
	tooBig.Outbound = []eventstore.Outbound{{Seq: 3, Name: "CartChanged", Payload: json.RawMessage(`{"items":2}`)}}
	if _, err := e.s.Append(e.ctx, tooBig); !errors.Is(err, eventstore.ErrItemTooLarge) {
		t.Fatalf("append with a STATE over 400 KB: %v; want ErrItemTooLarge", err)
	}
	if after := e.snapshotOf(ref); after != before {
		t.Fatalf("failed appends wrote:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func testBadInput(t *testing.T, open Opener) {
	e := setup(t, open, eventstore.Schema{Types: eventstore.NewEventTypes("Deposited", "Withdrawn")})
	ref := e.ref("account")
	e.mustAppend(e.prepare(ref, 0, "", "Deposited", "Withdrawn"))
	// good returns a valid request at version 2 with n events and a
	// command id, which a failed append must not record.
	good := func(n int) eventstore.AppendRequest {
		types := make([]string, n)
		for i := range types {
			types[i] = "Deposited"
		}
		return e.prepare(ref, 2, "bad-cmd", types...)
	}
	big := json.RawMessage(`{"blob":"` + strings.Repeat("x", 400*1024) + `"}`)
	almostBig := json.RawMessage(`{"blob":"` + strings.Repeat("x", 390*1024) + `"}`)
	cases := []struct {
		name   string
		req    func() eventstore.AppendRequest
		wanted func(error) bool
	}{
		{"unknown event type", func() eventstore.AppendRequest { r := good(1); r.Events[0].EventType = "Stolen"; return r }, validation("event_type")},
		{"reserved character in event type", func() eventstore.AppendRequest { r := good(1); r.Events[0].EventType = "Deposited#1"; return r }, validation("event_type")},
		{"malformed payload", func() eventstore.AppendRequest {
			r := good(1)
			r.Events[0].Payload = json.RawMessage(`{"amount":`)
			return r
		}, validation("payload")},
		{"null payload", func() eventstore.AppendRequest { r := good(1); r.Events[0].Payload = json.RawMessage(`null`); return r }, validation("payload")},
		{"malformed STATE", func() eventstore.AppendRequest { r := good(1); r.State = json.RawMessage(`{`); return r }, validation("state")},
		{"sequence gap", func() eventstore.AppendRequest { r := good(2); r.Events[1].Sequence = 5; return r }, validation("sequence")},
		{"event id not a ULID", func() eventstore.AppendRequest { r := good(1); r.Events[0].EventID = "evt-1"; return r }, validation("event_id")},
		{"event of another aggregate", func() eventstore.AppendRequest { r := good(1); r.Events[0].AggregateID += "x"; return r }, validation("aggregate")},
		{"reserved character in aggregate id", func() eventstore.AppendRequest {
			r := good(1)
			r.Aggregate.ID += "#1"
			r.Events[0].AggregateID = r.Aggregate.ID
			return r
		}, validation("aggregate_id")},
		{"reserved character in command id", func() eventstore.AppendRequest { r := good(1); r.CommandID = "c#1"; return r }, validation("command_id")},
		{"negative expected version", func() eventstore.AppendRequest { return restage(good(1), -1) }, validation("")},
		{"outbound of another append", func() eventstore.AppendRequest {
			r := good(1)
			r.Outbound = []eventstore.Outbound{{Seq: 1, Name: "X", Payload: json.RawMessage(`{}`)}}
			return r
		}, validation("outbound")},
		{"repeated outbound index", func() eventstore.AppendRequest {
			r := good(1)
			r.Outbound = []eventstore.Outbound{{Seq: 3, Name: "X", Payload: json.RawMessage(`{}`)}, {Seq: 3, Name: "Y", Payload: json.RawMessage(`{}`)}}
			return r
		}, validation("outbound")},
		{"no events and no STATE", func() eventstore.AppendRequest { r := good(1); r.Events = nil; return r }, validation("events")},
		{"event over 400 KB", func() eventstore.AppendRequest { r := good(2); r.Events[1].Payload = big; return r }, errorIs(eventstore.ErrItemTooLarge)},
		{"STATE over 400 KB", func() eventstore.AppendRequest { r := good(1); r.State = big; return r }, errorIs(eventstore.ErrItemTooLarge)},
		{"outbound over 400 KB", func() eventstore.AppendRequest {
			r := good(1)
			r.Outbound = []eventstore.Outbound{{Seq: 3, Name: "X", Payload: big}}
			return r
		}, errorIs(eventstore.ErrItemTooLarge)},
		{"more than 100 items", func() eventstore.AppendRequest { return good(100) }, errorIs(eventstore.ErrTooManyItems)},
		{"more than 4 MB", func() eventstore.AppendRequest {
			r := good(11)
			for i := range r.Events {
				r.Events[i].Payload = almostBig
			}
			return r
		}, errorIs(eventstore.ErrTransactionTooLarge)},
	}
	before := e.snapshotOf(ref, "bad-cmd")
	for _, tc := range cases {
		_, err := e.s.Append(e.ctx, tc.req())
		if err == nil || !tc.wanted(err) {
			t.Errorf("%s: Append returned %v", tc.name, err)
		}
		if after := e.snapshotOf(ref, "bad-cmd"); after != before {
			t.Fatalf("%s: the store changed:\nbefore:\n%s\nafter:\n%s", tc.name, before, after)
		}
	}
	// A new aggregate's bad append creates nothing either.
	fresh := e.ref("fresh")
	freshBefore := e.snapshotOf(fresh, "bad-cmd")
	huge := e.prepare(fresh, 0, "bad-cmd", "Deposited")
	huge.Events[0].Payload = big
	if _, err := e.s.Append(e.ctx, huge); !errors.Is(err, eventstore.ErrItemTooLarge) {
		t.Errorf("new aggregate, event over 400 KB: %v; want ErrItemTooLarge", err)
	}
	if _, err := e.s.Append(e.ctx, eventstore.AppendRequest{Aggregate: fresh, State: json.RawMessage(`{}`)}); !isValidation(err, "events") {
		t.Errorf("new aggregate, STATE without events: %v; want a *ValidationError on events", err)
	}
	if after := e.snapshotOf(fresh, "bad-cmd"); after != freshBefore {
		t.Fatalf("bad appends to a new aggregate wrote:\n%s", after)
	}
}

func validation(field string) func(error) bool {
	return func(err error) bool { return isValidation(err, field) }
}

// isValidation reports whether err is a *eventstore.ValidationError whose
// field contains field.
func isValidation(err error, field string) bool {
	var ve *eventstore.ValidationError
	return errors.As(err, &ve) && strings.Contains(ve.Field, field)
}

func errorIs(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

func testConcurrentAppenders(t *testing.T, open Opener) {
	e := setup(t, open, eventstore.Schema{})
	ref := e.ref("hot")
	const racers, rounds, each = 6, 4, 4

	// Rounds: every racer appends at the same version at once.
	for round := range rounds {
		expected := int64(round)
		reqs := make([]eventstore.AppendRequest, racers)
		for r := range reqs {
			reqs[r] = e.prepare(ref, expected, "", "Raced")
		}
		errs := make([]error, racers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for r := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[r] = e.s.Append(e.ctx, reqs[r])
			}()
		}
		close(start)
		wg.Wait()
		winners := 0
		for r, err := range errs {
			switch ce := asConflict(err); {
			case err == nil:
				winners++
			case ce != nil && ce.Expected == expected && ce.Actual == expected+1:
			default:
				t.Errorf("round %d racer %d: %v; want success or *ConcurrencyError{Expected %d, Actual %d}", round, r, err, expected, expected+1)
			}
		}
		if winners != 1 {
			t.Fatalf("round %d: %d racers appended at version %d; want exactly 1", round, winners, expected)
		}
	}

	// Free-running: each racer appends `each` events, reloading the
	// version after every conflict.
	type win struct {
		seq int64
		id  string
	}
	wins := make([][]win, racers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for r := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for len(wins[r]) < each {
				v, err := e.s.Version(e.ctx, ref)
				if err != nil {
					t.Errorf("racer %d: version: %v", r, err)
					return
				}
				req, err := eventstore.Prepare(ref, v, eventstore.Change{Events: []eventstore.NewEvent{eventstore.Event("Raced", map[string]int{"racer": r})}}, e.schema)
				if err != nil {
					t.Errorf("racer %d: %v", r, err)
					return
				}
				res, err := e.s.Append(e.ctx, req)
				if ce := asConflict(err); ce != nil {
					if ce.Expected != v || ce.Actual <= v {
						t.Errorf("racer %d: %v; want Actual above %d", r, ce, v)
					}
					continue
				}
				if err != nil {
					t.Errorf("racer %d: append at %d: %v; want success or *ConcurrencyError", r, v, err)
					return
				}
				wins[r] = append(wins[r], win{res.LastSeq, res.EventIDs[0]})
			}
		}()
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	log := e.load(ref)
	want := rounds + racers*each
	if len(log) != want {
		t.Fatalf("log holds %d events, want %d", len(log), want)
	}
	for i, ev := range log {
		if ev.Sequence != int64(i+1) {
			t.Fatalf("event %d has sequence %d: the log has a gap or a duplicate", i, ev.Sequence)
		}
	}
	owner := map[int64]string{}
	for r, ws := range wins {
		for _, w := range ws {
			if prev, ok := owner[w.seq]; ok {
				t.Fatalf("version %d was won twice (%s and %s)", w.seq, prev, w.id)
			}
			owner[w.seq] = w.id
			if log[w.seq-1].EventID != w.id {
				t.Errorf("racer %d won version %d with %s, the log holds %s", r, w.seq, w.id, log[w.seq-1].EventID)
			}
		}
	}
	if v, err := e.s.Version(e.ctx, ref); err != nil || v != int64(want) {
		t.Fatalf("Version = %d, %v; want %d", v, err, want)
	}
}
