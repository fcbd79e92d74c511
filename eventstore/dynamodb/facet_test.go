package dynamodb_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/eventpipe/eventpipe/eventstore"
	store "github.com/eventpipe/eventpipe/eventstore/dynamodb"
)

// tally is a small facet state: how many Added events, their sum, and the
// sequence of each, so that a replay in another order would show.
type tally struct {
	Count int     `json:"count"`
	Sum   int64   `json:"sum"`
	Seqs  []int64 `json:"seqs"`
}

type added struct {
	N int64 `json:"n"`
}

func newTallyFacet(t testing.TB, s eventstore.Store) *eventstore.Facet[tally] {
	t.Helper()
	f, err := eventstore.NewFacet(eventstore.FacetConfig[tally]{
		Store: s, AggregateType: "tally",
		Processor: eventstore.Processor[tally]{
			Initial: func() tally { return tally{} },
			Rules: map[string]eventstore.Rule[tally]{
				"Added": func(st tally, ev eventstore.Envelope, out *eventstore.Outbox) (tally, error) {
					var a added
					if err := json.Unmarshal(ev.Payload, &a); err != nil {
						return st, err
					}
					st.Count++
					st.Sum += a.N
					st.Seqs = append(st.Seqs, ev.Sequence)
					return st, nil
				},
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestConcurrentAppendsToOneAggregateKeepTheLogGapless races 16
// goroutines on one aggregate: first all against the same known state
// (exactly one wins), then each reading STATE and appending in a loop.
// Every success has its own sequence, the log has no gap or duplicate,
// every loser gets *ConcurrencyError, and STATE equals a full replay.
func TestConcurrentAppendsToOneAggregateKeepTheLogGapless(t *testing.T) {
	ctx := ctxT(t)
	s, _, _ := newStore(t, nil)
	f := newTallyFacet(t, s)
	const id, workers, rounds = "hot", 16, 8
	first, err := f.Append(ctx, id, eventstore.Change{Events: []eventstore.NewEvent{eventstore.Event("Added", added{N: 1})}})
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var won []int64
	var conflicts int
	var other []error
	record := func(res eventstore.Result[tally], err error, wantActualAbove int64) {
		mu.Lock()
		defer mu.Unlock()
		var ce *eventstore.ConcurrencyError
		switch {
		case err == nil:
			won = append(won, res.State.Seq)
		case errors.As(err, &ce) && ce.Actual > ce.Expected && ce.Expected >= wantActualAbove:
			conflicts++
		default:
			other = append(other, err)
		}
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			<-start
			res, err := f.AppendTo(ctx, first.State, eventstore.Change{Events: []eventstore.NewEvent{eventstore.Event("Added", added{N: int64(w)})}})
			record(res, err, 1)
		})
	}
	close(start)
	wg.Wait()
	if len(won) != 1 || conflicts != workers-1 || len(other) > 0 {
		t.Fatalf("same-state race: %d won, %d conflicts, other errors %v", len(won), conflicts, other)
	}

	start = make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			<-start
			for r := range rounds {
				res, err := f.Append(ctx, id, eventstore.Change{Events: []eventstore.NewEvent{eventstore.Event("Added", added{N: int64(w*100 + r)})}})
				record(res, err, 0)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(other) > 0 {
		t.Fatalf("errors other than *ConcurrencyError: %v", other)
	}
	t.Logf("read-and-append race: %d successes, %d conflicts", len(won)-1, conflicts-(workers-1))
	if conflicts == workers-1 {
		t.Errorf("16 concurrent read-then-append loops never conflicted: not a race")
	}
	sort.Slice(won, func(i, j int) bool { return won[i] < won[j] })
	for i, seq := range won {
		if seq != int64(i+2) {
			t.Fatalf("successful appends got versions %v, want 2..%d each once", won, len(won)+1)
		}
	}
	events, err := s.Load(ctx, eventstore.Ref{Type: "tally", ID: id}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != len(won)+1 {
		t.Fatalf("log has %d events, %d appends succeeded", len(events), len(won)+1)
	}
	ids := map[string]bool{}
	for i, e := range events {
		if e.Sequence != int64(i+1) || ids[e.EventID] {
			t.Fatalf("event %d: sequence %d, id %s (gap or duplicate)", i, e.Sequence, e.EventID)
		}
		ids[e.EventID] = true
	}
	replayed, _, err := eventstore.Processor[tally]{Initial: func() tally { return tally{} }, Rules: map[string]eventstore.Rule[tally]{
		"Added": eventstore.On(func(st tally, a added, _ *eventstore.Outbox) (tally, error) {
			st.Count++
			st.Sum += a.N
			return st, nil
		}),
	}}.Apply(tally{}, events)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Seq != int64(len(events)) || got.Item.Count != replayed.Count || got.Item.Sum != replayed.Sum {
		t.Fatalf("STATE %+v at %d, replay %+v at %d", got.Item, got.Seq, replayed, len(events))
	}
	recalc, err := f.Recalculate(ctx, id, eventstore.Change{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(recalc.State.Item, got.Item) {
		t.Fatalf("Recalculate %+v differs from STATE %+v", recalc.State.Item, got.Item)
	}
}

// TestSnapshotThenLoadEqualsState takes a snapshot mid-way and checks
// that snapshot + later events rebuild the same state as STATE, and that
// an older snapshot never replaces a newer one.
func TestSnapshotThenLoadEqualsState(t *testing.T) {
	ctx := ctxT(t)
	s, _, _ := newStore(t, nil)
	f := newTallyFacet(t, s)
	add := func(n int64) {
		if _, err := f.Append(ctx, "snap", eventstore.Change{Events: []eventstore.NewEvent{eventstore.Event("Added", added{N: n})}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		add(int64(i))
	}
	snap, err := f.Snapshot(ctx, "snap")
	if err != nil || snap.Seq != 5 {
		t.Fatalf("snapshot at %d, %v", snap.Seq, err)
	}
	for i := range 3 {
		add(int64(10 + i))
	}
	ref := eventstore.Ref{Type: "tally", ID: "snap"}
	stored, err := s.Snapshot(ctx, ref)
	if err != nil || stored.Seq != 5 {
		t.Fatalf("stored snapshot at %d, %v", stored.Seq, err)
	}
	loaded, err := f.Load(ctx, "snap")
	if err != nil {
		t.Fatal(err)
	}
	state, err := f.Get(ctx, "snap")
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Seq != 8 || !reflect.DeepEqual(loaded.Item, state.Item) {
		t.Fatalf("snapshot+events %+v at %d, STATE %+v at %d", loaded.Item, loaded.Seq, state.Item, state.Seq)
	}
	if err := s.PutSnapshot(ctx, ref, eventstore.Stored{Seq: 3, Data: json.RawMessage(`{"count":-1}`)}); err != nil {
		t.Fatal(err)
	}
	if again, _ := s.Snapshot(ctx, ref); again.Seq != 5 {
		t.Fatalf("older snapshot replaced the newer: now at %d", again.Seq)
	}
	if _, err := f.Snapshot(ctx, "snap"); err != nil {
		t.Fatal(err)
	}
	if again, _ := s.Snapshot(ctx, ref); again.Seq != 8 {
		t.Fatalf("snapshot at %d after a second Snapshot, want 8", again.Seq)
	}
}

// TestFacetOperationsOnUnknownAggregate: Get, Load, Snapshot and an empty
// Recalculate need an aggregate; AppendTo a state that is not the stored
// one conflicts. Nothing is written.
func TestFacetOperationsOnUnknownAggregate(t *testing.T) {
	ctx := ctxT(t)
	s, client, table := newStore(t, nil)
	f := newTallyFacet(t, s)
	before := dumpTable(t, client, table)
	errs := map[string]error{}
	_, errs["Get"] = f.Get(ctx, "ghost")
	_, errs["Load"] = f.Load(ctx, "ghost")
	_, errs["Snapshot"] = f.Snapshot(ctx, "ghost")
	_, errs["Recalculate"] = f.Recalculate(ctx, "ghost", eventstore.Change{})
	ghost := f.Initial("ghost")
	ghost.Seq = 3
	_, errs["AppendTo"] = f.AppendTo(ctx, ghost, eventstore.Change{Events: []eventstore.NewEvent{eventstore.Event("Added", added{N: 1})}})
	for op, err := range errs {
		if !errors.Is(err, eventstore.ErrAggregateNotFound) {
			t.Errorf("%s: %v, want ErrAggregateNotFound", op, err)
		}
	}
	if after := dumpTable(t, client, table); after != before {
		t.Fatalf("table changed")
	}
}

// TestListByTypeAcrossAggregatesInULIDOrder covers events of a type: events of one
// type from several aggregates, page by page with a small page size, in
// ULID order, optionally bounded in time.
func TestListByTypeAcrossAggregatesInULIDOrder(t *testing.T) {
	ctx := ctxT(t)
	s, _, _ := newStore(t, nil)
	var want []string
	versions := map[string]int64{}
	for round := range 4 {
		for a := range 5 {
			ref := eventstore.Ref{Type: "order", ID: fmt.Sprintf("o-%d", a)}
			res := appendEvents(t, s, ref, versions[ref.ID], "OrderPlaced", "OrderNoted")
			versions[ref.ID] = res.LastSeq
			want = append(want, res.EventIDs[0])
			_ = round
		}
	}
	var got []string
	var pages int
	for cursor := ""; ; {
		page, err := s.ListByType(ctx, store.TypeQuery{EventType: "OrderPlaced", Limit: 3, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, e := range page.Events {
			if e.EventType != "OrderPlaced" {
				t.Fatalf("listed a %s", e.EventType)
			}
			got = append(got, e.EventID)
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("listed\n%v\nwant (append order = ULID order)\n%v", got, want)
	}
	if !sort.StringsAreSorted(got) || pages < 7 {
		t.Fatalf("not in ULID order, or %d pages for %d events of page size 3", pages, len(got))
	}

	// A time range: the ULID times of events 5..14.
	from, to := ulidTime(t, want[5]), ulidTime(t, want[14])
	page, err := s.ListByType(ctx, store.TypeQuery{EventType: "OrderPlaced", From: from, To: to.Add(1e6), Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range page.Events {
		if tm := ulidTime(t, e.EventID); tm.Before(from) || tm.After(to) {
			t.Fatalf("event at %v outside [%v, %v]", tm, from, to)
		}
	}
	if len(page.Events) < 10 {
		t.Fatalf("time range listed %d events, want at least the 10 between", len(page.Events))
	}

	// After an event id: exactly the later events, also combined with a
	// cursor and a lower-case id, and none after the last.
	for _, i := range []int{0, 7, 18} {
		var after []string
		for cursor := ""; ; {
			page, err := s.ListByType(ctx, store.TypeQuery{EventType: "OrderPlaced", Limit: 4, Cursor: cursor, After: strings.ToLower(want[i])})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range page.Events {
				after = append(after, e.EventID)
			}
			if cursor = page.Next; cursor == "" {
				break
			}
		}
		if fmt.Sprint(after) != fmt.Sprint(want[i+1:]) {
			t.Fatalf("after event %d listed\n%v\nwant\n%v", i, after, want[i+1:])
		}
	}
	if page, err := s.ListByType(ctx, store.TypeQuery{EventType: "OrderPlaced", After: want[len(want)-1]}); err != nil || len(page.Events) != 0 {
		t.Fatalf("after the last event: %d events, %v", len(page.Events), err)
	}

	_, err = s.ListByType(ctx, store.TypeQuery{EventType: "OrderPlaced", Cursor: "garbage"})
	var ve *eventstore.ValidationError
	if !errors.As(err, &ve) || ve.Field != "cursor" {
		t.Fatalf("bad cursor: %v", err)
	}
	_, err = s.ListByType(ctx, store.TypeQuery{EventType: "OrderPlaced", After: "not-an-id"})
	if !errors.As(err, &ve) || ve.Field != "after" {
		t.Fatalf("bad after: %v", err)
	}
}
