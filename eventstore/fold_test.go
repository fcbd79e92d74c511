package eventstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/eventstore/memstore"
)

// usedKeys is the fold of the wallet's Paid keys: each key with the
// sequence of the Paid event that first used it.
type usedKeys map[string]int64

func usedKeysFold() eventstore.Fold[usedKeys] {
	return eventstore.Fold[usedKeys]{
		Key:     "keys",
		Initial: func() usedKeys { return usedKeys{} },
		Step: func(acc usedKeys, ev eventstore.Envelope) (usedKeys, error) {
			var p paid
			if ev.EventType == "Paid" && ev.DecodePayload(&p) == nil {
				if _, ok := acc[p.Key]; !ok {
					acc[p.Key] = ev.Sequence
				}
			}
			return acc, nil
		},
	}
}

// foldingWalletProcessor is cappedWalletProcessor with its history rules
// written as fold rules: the same answers from the keys and the count of
// fees instead of the events.
func foldingWalletProcessor() eventstore.Processor[wallet] {
	return eventstore.Processor[wallet]{
		Initial: func() wallet { return wallet{} },
		FoldRules: map[string]eventstore.FoldRule[wallet]{
			"Fee": eventstore.OnFold(feeCount(), func(w wallet, f struct{ Amount int64 }, fees int, _ *eventstore.Outbox) (wallet, error) {
				return chargeFee(w, f.Amount, fees)
			}),
			"Paid": eventstore.OnFold(usedKeysFold(), func(w wallet, p paid, keys usedKeys, out *eventstore.Outbox) (wallet, error) {
				if seq, ok := keys[p.Key]; ok {
					return w, eventstore.Rejectf("key %s already used by sequence %d", p.Key, seq)
				}
				w.Balance += p.Amount
				w.Payments++
				if w.Payments == 1 {
					out.Publish("firstPayment", p)
				}
				return w, nil
			}),
		},
	}
}

// maxFees is how many Fee events a wallet takes: the fee rules of
// cappedWalletProcessor and foldingWalletProcessor refuse the next ones.
const maxFees = 12

// feeCount folds the number of Fee events.
func feeCount() eventstore.Fold[int] {
	return eventstore.Fold[int]{Key: "fees", Initial: func() int { return 0 },
		Step: func(n int, ev eventstore.Envelope) (int, error) {
			if ev.EventType == "Fee" {
				n++
			}
			return n, nil
		}}
}

func chargeFee(w wallet, amount int64, fees int) (wallet, error) {
	if fees >= maxFees {
		return w, eventstore.Rejectf("%d fees already", fees)
	}
	w.Balance -= amount
	return w, nil
}

// cappedWalletProcessor is walletProcessor with the fee rule capped at
// maxFees, counting the Fee events of the whole log.
func cappedWalletProcessor() eventstore.Processor[wallet] {
	p := walletProcessor()
	p.Rules = nil
	p.HistoryRules["Fee"] = eventstore.OnHistory(func(w wallet, f struct{ Amount int64 }, h eventstore.History, _ *eventstore.Outbox) (wallet, error) {
		if err := h.RequirePast(); err != nil {
			return w, err
		}
		n := 0
		for _, ev := range h.Before() {
			if ev.EventType == "Fee" {
				n++
			}
		}
		return chargeFee(w, f.Amount, n)
	})
	return p
}

// countingStore records the afterSeq of every Load and counts snapshot
// reads.
type countingStore struct {
	eventstore.Store
	mu        sync.Mutex
	loads     []int64
	snapshots int
}

func (s *countingStore) Load(ctx context.Context, ref eventstore.Ref, after int64) ([]eventstore.Envelope, error) {
	s.mu.Lock()
	s.loads = append(s.loads, after)
	s.mu.Unlock()
	return s.Store.Load(ctx, ref, after)
}

func (s *countingStore) Snapshot(ctx context.Context, ref eventstore.Ref) (eventstore.Stored, error) {
	s.mu.Lock()
	s.snapshots++
	s.mu.Unlock()
	return s.Store.Snapshot(ctx, ref)
}

func (s *countingStore) reset() (loads []int64, snapshots int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	loads, snapshots = s.loads, s.snapshots
	s.loads, s.snapshots = nil, 0
	return loads, snapshots
}

func newWalletFacet(t testing.TB, s eventstore.Store, p eventstore.Processor[wallet]) *eventstore.Facet[wallet] {
	t.Helper()
	return newWalletFacetCaching(t, s, p, 0)
}

// newWalletFacetCaching is newWalletFacet with FacetConfig.FoldCache set.
func newWalletFacetCaching(t testing.TB, s eventstore.Store, p eventstore.Processor[wallet], cache int) *eventstore.Facet[wallet] {
	t.Helper()
	f, err := eventstore.NewFacet(eventstore.FacetConfig[wallet]{Store: s, AggregateType: "wallet", Processor: p, FoldCache: cache})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func newMemstore(t testing.TB) *memstore.Store {
	t.Helper()
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// outcome is what an append did, without what differs between stores
// (event ids, times).
func outcome[S any](res eventstore.Result[S], err error) string {
	if err != nil {
		var rej *eventstore.RuleRejection
		var conflict *eventstore.ConcurrencyError
		switch {
		case errors.As(err, &rej):
			return fmt.Sprintf("rejected %s at %d: %s", rej.EventType, rej.Sequence, rej.Reason)
		case errors.As(err, &conflict):
			return fmt.Sprintf("conflict: expected %d, actual %d", conflict.Expected, conflict.Actual)
		}
		return "error: " + err.Error()
	}
	if res.Duplicate {
		b, _ := json.Marshal(res.State.Item)
		return fmt.Sprintf("duplicate: state %s at %d, %v", b, res.State.Seq, res.Append.EventIDs != nil)
	}
	b, _ := json.Marshal(res.State.Item)
	outs := make([]string, len(res.Outbound))
	for i, o := range res.Outbound {
		outs[i] = fmt.Sprintf("%s@%d#%d:%s", o.Name, o.Seq, o.Index, o.Payload)
	}
	return fmt.Sprintf("state %s at %d, outbound %v", b, res.State.Seq, outs)
}

// walletEvents turns specs (see walletLog) into new events.
func walletEvents(specs ...string) []eventstore.NewEvent {
	out := make([]eventstore.NewEvent, len(specs))
	for i, e := range walletLog(0, specs...) {
		out[i] = eventstore.NewEvent{Type: e.EventType, Payload: e.Payload}
	}
	return out
}

// TestFoldRuleAnswersAsTheWholeLogOnRandomHistories runs random commands
// (Paid with keys that repeat, capped fees, up to three events each, some
// redelivered) through AppendWithHistory on two stores: one facet with
// the whole-log rules (cappedWalletProcessor), one with the same rules as
// folds, whose snapshots are
// taken at random points (often older than the latest events, sometimes
// never, sometimes a snapshot holding only a state), with and without
// the facet's cache of folds. Every answer
// (state, outbound events, rejection and its sequence, conflicts on a
// stale state) is the same; so are Load, Recalculate and Replay.
func TestFoldRuleAnswersAsTheWholeLogOnRandomHistories(t *testing.T) {
	ctx := context.Background()
	seen := map[string]int{}
	for run := range 40 {
		rng := rand.New(rand.NewPCG(uint64(run), 7))
		wholeStore, foldStore := newMemstore(t), newMemstore(t)
		whole := newWalletFacet(t, wholeStore, cappedWalletProcessor())
		fold := newWalletFacetCaching(t, foldStore, foldingWalletProcessor(), []int{-1, 0, 1}[run%3])
		id := fmt.Sprintf("w%d", run)
		ref := eventstore.Ref{Type: "wallet", ID: id}
		snapEvery := []int{0, 1, 3, 7, 25}[run%5] // 0: no snapshot ever
		if run%10 == 9 {
			// A snapshot of the state alone (as a facet without folds
			// writes it) is not used for the folds.
			plain := newWalletFacet(t, foldStore, walletProcessor())
			if _, err := plain.Append(ctx, id, eventstore.Change{Events: walletEvents("fee:1")}); err != nil {
				t.Fatal(err)
			}
			if _, err := plain.Snapshot(ctx, id); err != nil {
				t.Fatal(err)
			}
			if _, err := newWalletFacet(t, wholeStore, walletProcessor()).Append(ctx, id, eventstore.Change{Events: walletEvents("fee:1")}); err != nil {
				t.Fatal(err)
			}
		}
		var changes []eventstore.Change
		for step := range 60 {
			specs := make([]string, 1+rng.IntN(3))
			for i := range specs {
				if rng.IntN(3) == 0 {
					specs[i] = fmt.Sprintf("fee:%d", 1+rng.IntN(5))
				} else {
					specs[i] = fmt.Sprintf("k%d:%d", rng.IntN(40), 1+rng.IntN(9))
				}
			}
			ch := eventstore.Change{Events: walletEvents(specs...), CommandID: fmt.Sprintf("c%d", step)}
			if len(changes) > 0 && rng.IntN(6) == 0 {
				ch = changes[rng.IntN(len(changes))] // redelivered
			}
			changes = append(changes, ch)
			curWhole, err1 := whole.Get(ctx, id)
			curFold, err2 := fold.Get(ctx, id)
			if errors.Is(err1, eventstore.ErrAggregateNotFound) && errors.Is(err2, eventstore.ErrAggregateNotFound) {
				curWhole, curFold = whole.Initial(id), fold.Initial(id)
			} else if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if rng.IntN(8) == 0 && curWhole.Seq > 0 {
				// A stale state: both must conflict the same way.
				curWhole.Seq -= int64(1 + rng.IntN(int(curWhole.Seq)))
				curFold.Seq = curWhole.Seq
			}
			want := outcome(whole.AppendWithHistory(ctx, curWhole, ch))
			got := outcome(fold.AppendWithHistory(ctx, curFold, ch))
			if got != want {
				t.Fatalf("run %d step %d %v on %d:\n fold  %s\n whole %s", run, step, specs, curFold.Seq, got, want)
			}
			seen[strings.Fields(got)[0]]++
			if snapEvery > 0 && rng.IntN(snapEvery) == 0 {
				if _, err := fold.Snapshot(ctx, id); err != nil && !errors.Is(err, eventstore.ErrAggregateNotFound) {
					t.Fatal(err)
				}
			}
		}
		lw, err1 := whole.Load(ctx, id)
		lf, err2 := fold.Load(ctx, id)
		if err1 != nil || err2 != nil || !reflect.DeepEqual(lw, lf) {
			t.Fatalf("run %d: Load whole %+v (%v), fold %+v (%v)", run, lw, err1, lf, err2)
		}
		ch := eventstore.Change{Events: walletEvents("k1:1", "k99:1")}
		if got, want := outcome(fold.Recalculate(ctx, id, ch)), outcome(whole.Recalculate(ctx, id, ch)); got != want {
			t.Fatalf("run %d Recalculate:\n fold  %s\n whole %s", run, got, want)
		}
		log, err := foldStore.Load(ctx, ref, 0)
		if err != nil {
			t.Fatal(err)
		}
		w1, err1 := cappedWalletProcessor().Replay(log)
		w2, err2 := foldingWalletProcessor().Replay(log)
		if w1 != w2 || fmt.Sprint(err1) != fmt.Sprint(err2) {
			t.Fatalf("run %d Replay: %+v (%v) vs %+v (%v)", run, w1, err1, w2, err2)
		}
	}
	if seen["state"] == 0 || seen["rejected"] == 0 || seen["conflict:"] == 0 || seen["duplicate:"] == 0 || len(seen) != 4 {
		t.Fatalf("outcomes %v: want appends, rejections, conflicts and duplicates, nothing else", seen)
	}
	t.Logf("outcomes %v", seen)
}

// TestFoldRuleReadsTheSnapshotAndTheEventsAfterIt: with a snapshot, a
// command (of a facet without a cache of folds) reads the snapshot and
// the events after it (not the log from the start), and so does Load;
// without one, or with one that lacks the fold (a state alone, or another
// fold key), both read the whole log.
func TestFoldRuleReadsTheSnapshotAndTheEventsAfterIt(t *testing.T) {
	ctx := context.Background()
	counting := &countingStore{Store: newMemstore(t)}
	f := newWalletFacetCaching(t, counting, foldingWalletProcessor(), -1)
	id := "w1"
	ref := eventstore.Ref{Type: "wallet", ID: id}
	appendOne := func(spec string) (eventstore.Result[wallet], error) {
		cur, err := f.Get(ctx, id)
		if errors.Is(err, eventstore.ErrAggregateNotFound) {
			cur, err = f.Initial(id), nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return f.AppendWithHistory(ctx, cur, eventstore.Change{Events: walletEvents(spec)})
	}
	for i := range 20 {
		if _, err := appendOne(fmt.Sprintf("k%d:1", i)); err != nil {
			t.Fatal(err)
		}
	}
	if loads, snaps := counting.reset(); len(loads) != 20 || loads[19] != 0 || snaps != 20 {
		t.Fatalf("without a snapshot: loads after %v, %d snapshot reads; want the whole log each time", loads, snaps)
	}
	if _, err := f.Snapshot(ctx, id); err != nil {
		t.Fatal(err)
	}
	stored, err := counting.Store.Snapshot(ctx, ref)
	if err != nil || stored.Seq != 20 || !strings.Contains(string(stored.Data), `"folds":{"fees":0,"keys":{"k0":1,`) {
		t.Fatalf("snapshot %d %s, %v: want the folds beside the state", stored.Seq, stored.Data, err)
	}
	counting.reset()
	for i := range 3 {
		if _, err := appendOne(fmt.Sprintf("n%d:1", i)); err != nil {
			t.Fatal(err)
		}
	}
	if loads, _ := counting.reset(); fmt.Sprint(loads) != "[20 20 20]" {
		t.Fatalf("after a snapshot at 20, loads after %v; want [20 20 20]", loads)
	}
	if _, err := appendOne("k3:1"); err == nil || !strings.Contains(err.Error(), "key k3 already used by sequence 4") {
		t.Fatalf("a key used before the snapshot: %v", err)
	}
	if _, err := appendOne("n1:1"); err == nil || !strings.Contains(err.Error(), "key n1 already used by sequence 22") {
		t.Fatalf("a key used after the snapshot: %v", err)
	}
	counting.reset()
	if st, err := f.Load(ctx, id); err != nil || st.Seq != 23 || st.Item.Payments != 23 {
		t.Fatalf("Load %+v, %v", st, err)
	}
	if loads, _ := counting.reset(); fmt.Sprint(loads) != "[20]" {
		t.Fatalf("Load read after %v, want [20]", loads)
	}

	// A fold under another key (its meaning changed) does not use the
	// snapshot: the log is read from the start, with the same answers.
	renamed := foldingWalletProcessor()
	fold := usedKeysFold()
	fold.Key = "keys-v2"
	renamed.FoldRules = map[string]eventstore.FoldRule[wallet]{"Paid": eventstore.OnFold(fold, func(w wallet, p paid, keys usedKeys, out *eventstore.Outbox) (wallet, error) {
		if seq, ok := keys[p.Key]; ok {
			return w, eventstore.Rejectf("key %s already used by sequence %d", p.Key, seq)
		}
		w.Balance += p.Amount
		w.Payments++
		return w, nil
	})}
	f2 := newWalletFacetCaching(t, counting, renamed, -1)
	cur, err := f2.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f2.AppendWithHistory(ctx, cur, eventstore.Change{Events: walletEvents("k5:1")}); err == nil || !strings.Contains(err.Error(), "key k5 already used by sequence 6") {
		t.Fatalf("renamed fold: %v", err)
	}
	if loads, _ := counting.reset(); fmt.Sprint(loads) != "[0]" {
		t.Fatalf("a snapshot without the fold's key: loads after %v, want [0]", loads)
	}

	// Append reads no past: a fold rule fails as a history rule does.
	if _, err := f.Append(ctx, id, eventstore.Change{Events: walletEvents("z:1")}); !errors.Is(err, eventstore.ErrPastNotLoaded) || !eventstore.IsPermanent(err) {
		t.Fatalf("Append of a fold rule's event: %v, want permanent ErrPastNotLoaded", err)
	}

	// A snapshot newer than the caller's state is a conflict, as a longer
	// log is.
	stale, err := f.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := appendOne("late:1"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Snapshot(ctx, id); err != nil {
		t.Fatal(err)
	}
	var conflict *eventstore.ConcurrencyError
	if _, err := f.AppendWithHistory(ctx, stale, eventstore.Change{Events: walletEvents("x:1")}); !errors.As(err, &conflict) || conflict.Expected != 23 || conflict.Actual != 24 {
		t.Fatalf("stale state behind a snapshot: %v", err)
	}
}

// TestFacetConfigChecksFoldRules: fold rules count as rules, and their
// event types and fold keys must be unique.
func TestFacetConfigChecksFoldRules(t *testing.T) {
	rule := func(key string) eventstore.FoldRule[wallet] {
		f := usedKeysFold()
		f.Key = key
		return eventstore.Folding(f, func(w wallet, _ eventstore.Envelope, _ usedKeys, _ *eventstore.Outbox) (wallet, error) { return w, nil })
	}
	noStep := usedKeysFold()
	noStep.Step = nil
	plain := eventstore.On(func(w wallet, _ paid, _ *eventstore.Outbox) (wallet, error) { return w, nil })
	for _, tc := range []struct {
		name  string
		rules map[string]eventstore.Rule[wallet]
		folds map[string]eventstore.FoldRule[wallet]
		// wantField is the ValidationError's Field, wantErr a part of its
		// Reason; both "" when the config is valid.
		wantField string
		wantErr   string
	}{
		{"fold rules only", nil, map[string]eventstore.FoldRule[wallet]{"Paid": rule("keys")}, "", ""},
		{"two folds", nil, map[string]eventstore.FoldRule[wallet]{"Paid": rule("keys"), "Fee": rule("fees")}, "", ""},
		{"one key twice", nil, map[string]eventstore.FoldRule[wallet]{"Paid": rule("keys"), "Fee": rule("keys")}, "Processor.FoldRules", `both use fold key "keys"`},
		{"in Rules too", map[string]eventstore.Rule[wallet]{"Paid": plain}, map[string]eventstore.FoldRule[wallet]{"Paid": rule("keys")}, `Processor.FoldRules["Paid"]`, `"Paid" has a rule in FoldRules and in Rules`},
		{"nil fold rule", nil, map[string]eventstore.FoldRule[wallet]{"Paid": nil}, `Processor.FoldRules["Paid"]`, "is nil"},
		{"bad key", nil, map[string]eventstore.FoldRule[wallet]{"Paid": rule("a#b")}, `Processor.FoldRules["Paid"]`, "invalid fold key"},
		{"no step", nil, map[string]eventstore.FoldRule[wallet]{"Paid": eventstore.Folding(noStep, func(w wallet, _ eventstore.Envelope, _ usedKeys, _ *eventstore.Outbox) (wallet, error) { return w, nil })}, `Processor.FoldRules["Paid"]`, "Initial, Step and the rule are required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := eventstore.NewFacet(eventstore.FacetConfig[wallet]{Store: newMemstore(t), AggregateType: "wallet",
				Processor: eventstore.Processor[wallet]{Initial: func() wallet { return wallet{} }, Rules: tc.rules, FoldRules: tc.folds}})
			if tc.wantField == "" {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			var ve *eventstore.ValidationError
			if !errors.As(err, &ve) || ve.Field != tc.wantField || !strings.Contains(ve.Reason, tc.wantErr) {
				t.Fatalf("got %v, want an *eventstore.ValidationError on %s with %q", err, tc.wantField, tc.wantErr)
			}
		})
	}
}

// TestFoldCacheSparesTheSnapshotRead: a facet that keeps folds reads,
// after its first append to an aggregate, only the events appended since
// its last one (none, or another writer's), never the snapshot; a
// refused append or a conflict keeps them, and the answers stay those
// of the whole log.
func TestFoldCacheSparesTheSnapshotRead(t *testing.T) {
	ctx := context.Background()
	counting := &countingStore{Store: newMemstore(t)}
	f := newWalletFacetCaching(t, counting, foldingWalletProcessor(), 2)
	other := newWalletFacetCaching(t, counting, foldingWalletProcessor(), -1)
	appendTo := func(f *eventstore.Facet[wallet], id, spec string) error {
		cur, err := f.Get(ctx, id)
		if errors.Is(err, eventstore.ErrAggregateNotFound) {
			cur, err = f.Initial(id), nil
		}
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.AppendWithHistory(ctx, cur, eventstore.Change{Events: walletEvents(spec)})
		return err
	}
	for i := range 5 {
		if err := appendTo(f, "w1", fmt.Sprintf("k%d:1", i)); err != nil {
			t.Fatal(err)
		}
	}
	if loads, snaps := counting.reset(); fmt.Sprint(loads) != "[0 1 2 3 4]" || snaps != 1 {
		t.Fatalf("loads after %v, %d snapshot reads; want [0 1 2 3 4] and 1", loads, snaps)
	}
	if err := appendTo(f, "w1", "k2:1"); err == nil || !strings.Contains(err.Error(), "key k2 already used by sequence 3") {
		t.Fatalf("repeat: %v", err)
	}
	if err := appendTo(other, "w1", "k9:1"); err != nil { // another writer
		t.Fatal(err)
	}
	counting.reset()
	if err := appendTo(f, "w1", "k9:1"); err == nil || !strings.Contains(err.Error(), "key k9 already used by sequence 6") {
		t.Fatalf("a key another writer used: %v", err)
	}
	if err := appendTo(f, "w1", "k10:1"); err != nil {
		t.Fatal(err)
	}
	if loads, snaps := counting.reset(); fmt.Sprint(loads) != "[5 6]" || snaps != 0 {
		t.Fatalf("loads after %v, %d snapshot reads; want [5 6] and none", loads, snaps)
	}
	// Two more aggregates push w1 out of a cache of two.
	for _, id := range []string{"w2", "w3"} {
		if err := appendTo(f, id, "a:1"); err != nil {
			t.Fatal(err)
		}
	}
	counting.reset()
	if err := appendTo(f, "w1", "k11:1"); err != nil {
		t.Fatal(err)
	}
	if loads, snaps := counting.reset(); fmt.Sprint(loads) != "[0]" || snaps != 1 {
		t.Fatalf("after eviction: loads after %v, %d snapshot reads; want [0] and 1", loads, snaps)
	}
}
