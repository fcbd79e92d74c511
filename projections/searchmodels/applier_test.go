package searchmodels_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/projections/searchmodels"
)

// TestDuplicateShuffledAndDroppedDeliveryEndsAtTheHighestSequence
// delivers 30 todos' events twice, shuffled, in random batches, with a
// tenth of the events dropped (never the last of an aggregate): every
// document ends at its aggregate's last sequence, equal to a from-scratch
// application, with the dropped events repaired from the store and the
// duplicates refused.
func TestDuplicateShuffledAndDroppedDeliveryEndsAtTheHighestSequence(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	w := newWorld(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	var all []eventstore.Envelope
	for _, id := range ids("todo-", 30) {
		all = append(all, w.todoHistory(id, rng)...)
	}
	last := lastSequences(all)
	var delivery []eventstore.Envelope
	dropped := 0
	for _, e := range all {
		if e.Sequence != last[e.AggregateID] && rng.IntN(10) == 0 {
			dropped++
			continue
		}
		delivery = append(delivery, e, e)
	}
	rng.Shuffle(len(delivery), func(i, j int) { delivery[i], delivery[j] = delivery[j], delivery[i] })
	a := w.applier(searchmodels.TodoSearch{})
	var applied, repaired, skipped int
	for len(delivery) > 0 {
		n := min(len(delivery), 1+rng.IntN(40))
		out, err := a.Apply(ctx, delivery[:n])
		if err != nil {
			t.Fatal(err)
		}
		applied, repaired, skipped = applied+out.Applied, repaired+out.Repaired, skipped+out.Skipped
		delivery = delivery[n:]
	}
	if applied+repaired != len(all) {
		t.Errorf("applied %d + repaired %d events, want %d in all", applied, repaired, len(all))
	}
	if dropped == 0 || repaired == 0 {
		t.Errorf("dropped %d events and repaired %d: the test did not exercise gap repair", dropped, repaired)
	}
	got := w.documents(w.alias(searchmodels.TodoSearch{}))
	for id, seq := range last {
		if got[id].Version != seq {
			t.Errorf("todo %s at version %d, want its last sequence %d", id, got[id].Version, seq)
		}
	}
	assertSame(t, "shuffled delivery", got, w.scratch(searchmodels.TodoSearch{}, all))
	t.Logf("%d events: %d applied, %d repaired, %d skipped (%d dropped from delivery)", len(all), applied, repaired, skipped, dropped)
}

// TestAStaleRedeliveryIsRefusedByTheIndex has two Appliers (two
// consumers, as around a rebalance) write one todo: the first applies its
// first events and caches the document, the second applies the rest; then
// the first gets a redelivery of an event it has not applied. It folds it
// onto its (now stale) cached document and writes, and the index refuses
// the lower version: the document keeps the second Applier's state.
func TestAStaleRedeliveryIsRefusedByTheIndex(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	ref := eventstore.Ref{Type: todo.AggregateType, ID: "stale"}
	evs := w.append(ref, 0, eventstore.Event(todo.TodoCreated, todo.TodoData{Title: "one"}),
		eventstore.Event(todo.TodoUpdated, todo.TodoData{Title: "two"}), eventstore.Event(todo.TodoUpdated, todo.TodoData{Title: "three"}))
	first, second := w.applier(searchmodels.TodoSearch{}), w.applier(searchmodels.TodoSearch{})
	if _, err := first.Apply(ctx, evs[:1]); err != nil {
		t.Fatal(err)
	}
	if _, err := second.Apply(ctx, evs); err != nil {
		t.Fatal(err)
	}
	before := w.documents(w.alias(searchmodels.TodoSearch{}))
	out, err := first.Apply(ctx, evs[1:2])
	if err != nil {
		t.Fatal(err)
	}
	if out.Applied != 0 || out.Skipped != 1 {
		t.Fatalf("the stale redelivery: %+v, want it refused and skipped", out)
	}
	assertSame(t, "after the stale write", w.documents(w.alias(searchmodels.TodoSearch{})), before)
	if got := before["stale"]; got.Version != 3 || !strings.Contains(got.Source, `"three"`) {
		t.Fatalf("document %+v, want version 3 titled three", got)
	}
	// Its cache entry is gone: the next event applies from the index.
	out, err = first.Apply(ctx, w.append(ref, 3, eventstore.Event(todo.TodoUpdated, todo.TodoData{Title: "four"})))
	if err != nil || out.Applied != 1 || out.Repaired != 0 {
		t.Fatalf("the next event after the refusal: %+v %v, want it applied from the stored document", out, err)
	}
}
