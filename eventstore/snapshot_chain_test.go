package eventstore_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/eventstore/memstore"
)

// TestASnapshotTakenUnderAnotherUpcasterChainIsNotRead: a wallet's fees
// were stored as v1 {"Amount": n} in euros; a later v1→v2 upcaster reads
// them in cents. A snapshot taken before the upcaster folds euros: loaded
// through the new chain it must be ignored, the log folded again (and a
// snapshot taken under the new chain records it and is read: the next
// load reads only the events after it).
func TestASnapshotTakenUnderAnotherUpcasterChainIsNotRead(t *testing.T) {
	ctx := context.Background()
	p := eventstore.Processor[wallet]{Initial: func() wallet { return wallet{} }, Rules: map[string]eventstore.Rule[wallet]{
		"Fee": eventstore.On(func(w wallet, f struct{ Amount int64 }, _ *eventstore.Outbox) (wallet, error) {
			w.Balance -= f.Amount
			return w, nil
		}),
	}}
	var upcasters eventstore.Upcasters
	mem, err := memstore.New(memstore.Config{Schema: eventstore.Schema{Types: p.Types(), Upcasters: &upcasters}})
	if err != nil {
		t.Fatal(err)
	}
	s := &countingStore{Store: mem}
	facet := func() *eventstore.Facet[wallet] {
		f, err := eventstore.NewFacet(eventstore.FacetConfig[wallet]{Store: s, AggregateType: "wallet", Processor: p, Upcasters: &upcasters})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	old := facet()
	for range 3 {
		if _, err := old.Append(ctx, "w1", eventstore.Change{Events: []eventstore.NewEvent{eventstore.Event("Fee", struct{ Amount int64 }{2})}}); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := old.Snapshot(ctx, "w1"); err != nil || st.Item.Balance != -6 {
		t.Fatalf("snapshot under v1: %+v, %v", st, err)
	}

	upcasters.MustRegister("Fee", 1, func(raw json.RawMessage) (json.RawMessage, error) {
		var v1 struct{ Amount int64 }
		if err := json.Unmarshal(raw, &v1); err != nil {
			return nil, err
		}
		return json.Marshal(struct{ Amount int64 }{v1.Amount * 100})
	})
	st, err := facet().Load(ctx, "w1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Item.Balance != -600 {
		t.Fatalf("balance %d after the upcaster, want -600 (the log folded in cents); -6 means the old snapshot was read", st.Item.Balance)
	}

	// Under the current chain a snapshot is taken (at a later sequence:
	// the store keeps the first snapshot of a sequence), records the
	// chain, and is read: a load reads only the events after it.
	if _, err := facet().Append(ctx, "w1", eventstore.Change{Events: []eventstore.NewEvent{eventstore.Event("Fee", struct{ Amount int64 }{100})}}); err != nil {
		t.Fatal(err)
	}
	if _, err := facet().Snapshot(ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	snap, err := mem.Snapshot(ctx, eventstore.Ref{Type: "wallet", ID: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(snap.Data, &doc); err != nil || string(doc["chain"]) != `"Fee@2"` {
		t.Fatalf("snapshot %s: want it to record the chain Fee@2", snap.Data)
	}
	s.reset()
	if st, err := facet().Load(ctx, "w1"); err != nil || st.Item.Balance != -700 {
		t.Fatalf("load from the new snapshot: %+v, %v", st, err)
	}
	if loads, snapshots := s.reset(); snapshots != 1 || len(loads) != 1 || loads[0] != snap.Seq {
		t.Errorf("the load read the snapshot %d times and the log after %v, want once and after %d", snapshots, loads, snap.Seq)
	}
}
