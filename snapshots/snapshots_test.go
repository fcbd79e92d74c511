package snapshots_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/domains/order"
	"github.com/eventpipe/eventpipe/eventstore"
	ddbstore "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	"github.com/eventpipe/eventpipe/snapshots"
)

// longAccount builds, on store, a bank account of 10,000 events whose
// snapshot was taken at 9,900 by the domain's snapshot function (the one
// the consumer calls), and returns its id.
func longAccount(tb testing.TB, store eventstore.Store) string {
	tb.Helper()
	ctx := context.Background()
	facet, err := bankaccount.NewFacet(store, nil)
	if err != nil {
		tb.Fatal(err)
	}
	snapshot, err := bankaccount.Domain().NewSnapshot(store, nil)
	if err != nil {
		tb.Fatal(err)
	}
	id := "acc-10k"
	start := time.Now()
	appendAccount(tb, facet, id, 9_900)
	if seq, err := snapshot(ctx, id); err != nil || seq != 9_900 {
		tb.Fatalf("snapshot = %d, %v; want 9900", seq, err)
	}
	appendAccount(tb, facet, id, 10_000)
	tb.Logf("10,000 events, %d per append, and a snapshot at 9,900: %s", eventsPerAppend, time.Since(start).Round(time.Millisecond))
	return id
}

// TestLoadWithASnapshotEqualsLoadWithoutFor10000Events loads a
// 10,000-event account three ways: from its snapshot at 9,900 plus the
// 100 later events, by replaying all 10,000 events (the same table seen
// without snapshots), and as its STATE item. All three agree.
func TestLoadWithASnapshotEqualsLoadWithoutFor10000Events(t *testing.T) {
	ctx := context.Background()
	store, client := newStreamlessStore(t)
	t.Cleanup(func() { testenv.DeleteTable(t, client, store.Table()) })
	id := longAccount(t, store)
	ref := eventstore.Ref{Type: bankaccount.AggregateType, ID: id}
	snap, err := store.Snapshot(ctx, ref)
	if err != nil || snap.Seq != 9_900 {
		t.Fatalf("stored snapshot at %d, %v; want 9900", snap.Seq, err)
	}

	counted := &countingLoads{Store: store}
	withFacet, err := bankaccount.NewFacet(counted, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	with, err := withFacet.Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	tookWith, replayedWith := time.Since(start), counted.events.Swap(0)

	withoutFacet, err := bankaccount.NewFacet(withoutSnapshots{counted}, nil)
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	without, err := withoutFacet.Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	tookWithout, replayedWithout := time.Since(start), counted.events.Swap(0)
	t.Logf("load with snapshot: %d events in %s; without: %d events in %s", replayedWith, tookWith.Round(time.Millisecond),
		replayedWithout, tookWithout.Round(time.Millisecond))

	state, err := withFacet.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if replayedWith != 100 || replayedWithout != 10_000 {
		t.Errorf("replayed %d events with the snapshot and %d without, want 100 and 10000", replayedWith, replayedWithout)
	}
	if with.Seq != 10_000 || without.Seq != 10_000 || state.Seq != 10_000 {
		t.Errorf("versions: with %d, without %d, STATE %d; want 10000", with.Seq, without.Seq, state.Seq)
	}
	if with.Item != without.Item || with.Item != state.Item {
		t.Errorf("states differ:\nwith snapshot %+v\nwithout       %+v\nSTATE         %+v", with.Item, without.Item, state.Item)
	}
	if want := expectedAccount(id, 10_000); with.Item != want {
		t.Errorf("state %+v, want %+v (the events' own sum)", with.Item, want)
	}
}

// expectedAccount folds the events appendAccount writes, 1 to version,
// without the rules: what any load must return.
func expectedAccount(id string, version int64) bankaccount.Account {
	a := bankaccount.Initial()
	a.ID = id
	for i := int64(2); i <= version; i++ {
		switch e := transaction(int(i)); e.Type {
		case bankaccount.OwnerRenamed:
			a.OwnerFirst, a.OwnerLast = fmt.Sprintf("First%d", i), fmt.Sprintf("Last%d", i)
		default:
			var d bankaccount.TransactionAcceptedData
			if err := json.Unmarshal(e.Payload, &d); err != nil {
				panic(err)
			}
			a.Balance += d.Amount
		}
	}
	return a
}

// storedPair reads ref's #SNAPSHOT (seq 0 when none) and STATE.
func storedPair(t *testing.T, store *ddbstore.Store, ref eventstore.Ref) (snap, state eventstore.Stored) {
	t.Helper()
	ctx := context.Background()
	snap, err := store.Snapshot(ctx, ref)
	if err != nil && !errors.Is(err, eventstore.ErrAggregateNotFound) {
		t.Fatal(err)
	}
	if state, err = store.State(ctx, ref); err != nil {
		t.Fatal(err)
	}
	return snap, state
}

// TestConsumerSnapshotsEveryNEventsAndPoisonsALogTheRulesReject appends
// to accounts and orders through their facets (and one account past its
// rules, straight into the store), publishes every event on its topic as
// the relay does, and runs the consumer with N = 25 (orders: 2) after
// the fact, as a consumer that lags would. Each aggregate with at least N
// events gets one snapshot at its version, equal to its STATE; one
// below N gets none; the account whose log the rules reject goes to the
// poison topic and blocks nobody. Then, with the consumer live, more
// events move a snapshot forward.
func TestConsumerSnapshotsEveryNEventsAndPoisonsALogTheRulesReject(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	brokers := testenv.KafkaBrokers(t)
	topics := bus.Topics{Prefix: testenv.UniqueName(t, "ns") + "."}
	pub := newPublisher(t, brokers)
	accounts, err := bankaccount.NewFacet(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	orders, err := order.NewFacet(store, nil)
	if err != nil {
		t.Fatal(err)
	}

	versions := map[eventstore.Ref]int64{}
	var events []eventstore.Envelope
	for id, v := range map[string]int64{"a-small": 7, "a-mid": 57, "a-big": 250} {
		events = append(events, appendAccount(t, accounts, id, v)...)
		versions[eventstore.Ref{Type: bankaccount.AggregateType, ID: id}] = v
	}
	for id, evs := range map[string][]eventstore.NewEvent{
		"o-1": {eventstore.Event(order.OrderPlaced, order.OrderPlacedData{Customer: "c1", Total: 500}), eventstore.Event(order.PaymentProcessed, order.PaymentProcessedData{Amount: 500}),
			eventstore.Event(order.OrderShipped, order.OrderShippedData{TrackingNumber: "T1"}), eventstore.Event(order.OrderDelivered, struct{}{})},
		"o-2": {eventstore.Event(order.OrderPlaced, order.OrderPlacedData{Customer: "c2", Total: 70}), eventstore.Event(order.PaymentProcessed, order.PaymentProcessedData{Amount: 70})},
	} {
		res, err := orders.Append(ctx, id, eventstore.Change{Events: evs})
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, res.Events...)
		versions[eventstore.Ref{Type: order.AggregateType, ID: id}] = int64(len(evs))
	}
	// a-broken: 24 deposits, then a withdrawal the rules refuse
	// ("insufficient funds"), appended without the facet.
	broken := eventstore.Ref{Type: bankaccount.AggregateType, ID: "a-broken"}
	ch := eventstore.Change{Events: []eventstore.NewEvent{bankaccount.Opened(broken.ID)}}
	for i := 2; i < 25; i++ {
		ch.Events = append(ch.Events, bankaccount.Transacted("deposit", 10))
	}
	ch.Events = append(ch.Events, bankaccount.Transacted("too much", -5_000))
	req, err := eventstore.Prepare(broken, 0, ch, eventstore.Schema{Types: bankaccount.Processor().Types()})
	if err != nil {
		t.Fatal(err)
	}
	ar, err := store.Append(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	events = append(events, ar.Events...)
	publish(t, pub, topics, events)

	snapshotOf := func(typ string) commands.SnapshotFunc {
		t.Helper()
		d := map[string]commands.Domain{bankaccount.AggregateType: bankaccount.Domain(), order.AggregateType: order.Domain()}[typ]
		fn, err := d.NewSnapshot(store, nil)
		if err != nil {
			t.Fatal(err)
		}
		return fn
	}
	reg := prometheus.NewRegistry()
	cons, err := snapshots.New(snapshots.Config{
		Aggregates:  map[string]commands.SnapshotFunc{bankaccount.AggregateType: snapshotOf(bankaccount.AggregateType), order.AggregateType: snapshotOf(order.AggregateType)},
		Every:       25,
		EveryByType: map[string]int64{order.AggregateType: 2},
		Brokers:     brokers, Topics: topics, Publisher: pub, Registerer: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	if cons.Group() != topics.Prefix+"snapshots" || cons.PoisonTopic() != topics.Prefix+"poison.snapshots" {
		t.Errorf("group %s, poison topic %s", cons.Group(), cons.PoisonTopic())
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cons.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()

	poisoned := testenv.Consume(t, brokers, testenv.UniqueName(t, "poison-reader"), cons.PoisonTopic(), 1)
	if reason := poisoned[0].Metadata.Get(bus.ReasonMetadataKey); !strings.Contains(reason, broken.String()) || !strings.Contains(reason, "insufficient funds") {
		t.Errorf("poison reason %q, want a-broken's insufficient funds", reason)
	}

	waitFor(t, "every aggregate with at least N events snapshotted at its version", func() (bool, string) {
		var lagging []string
		for ref, v := range versions {
			snap, _ := storedPair(t, store, ref)
			every := int64(25)
			if ref.Type == order.AggregateType {
				every = 2
			}
			if want := v / every * every; want > 0 && snap.Seq != v {
				lagging = append(lagging, fmt.Sprintf("%s at %d (version %d)", ref, snap.Seq, v))
			}
		}
		return len(lagging) == 0, strings.Join(lagging, ", ")
	})
	for ref, v := range versions {
		snap, state := storedPair(t, store, ref)
		switch {
		case ref.ID == "a-small" && snap.Seq != 0:
			t.Errorf("%s (version %d, below N) has a snapshot at %d", ref, v, snap.Seq)
		case ref.ID != "a-small" && (snap.Seq != state.Seq || !bytes.Equal(snap.Data, state.Data)):
			t.Errorf("%s: snapshot %s at %d differs from STATE %s at %d", ref, snap.Data, snap.Seq, state.Data, state.Seq)
		}
	}
	if _, err := store.Snapshot(ctx, broken); !errors.Is(err, eventstore.ErrAggregateNotFound) {
		t.Errorf("a-broken has a snapshot (err %v)", err)
	}
	// 10 triggers of a-big, 2 of a-mid: a lagging consumer takes one
	// snapshot per aggregate at its version and skips the triggers it
	// covers (a rebalance may redeliver a few; they are skipped too). The
	// snapshots are stored before the last triggers are handled: wait for
	// those, then count.
	var written, skipped float64
	waitFor(t, "every bank-account trigger handled", func() (bool, string) {
		written, skipped = counterBy(t, reg, snapshots.MetricWritten, bankaccount.AggregateType), counterBy(t, reg, snapshots.MetricSkipped, bankaccount.AggregateType)
		return written >= 2 && skipped >= 10, fmt.Sprintf("%v written, %v skipped", written, skipped)
	})
	t.Logf("bank accounts: %v snapshots written, %v triggers skipped", written, skipped)
	if written > 4 {
		t.Errorf("bank accounts: %v snapshots written and %v triggers skipped; want about 2 and at least 10", written, skipped)
	}

	// Live: a-mid goes from 57 to 87, crossing 75.
	mid := eventstore.Ref{Type: bankaccount.AggregateType, ID: "a-mid"}
	publish(t, pub, topics, appendAccount(t, accounts, mid.ID, 87))
	waitFor(t, "a-mid's snapshot moves past 75", func() (bool, string) {
		snap, _ := storedPair(t, store, mid)
		return snap.Seq >= 75, fmt.Sprintf("at %d", snap.Seq)
	})
	if snap, state := storedPair(t, store, mid); snap.Seq != 87 || !bytes.Equal(snap.Data, state.Data) {
		t.Errorf("a-mid: snapshot %s at %d, STATE %s at %d; want equal at 87", snap.Data, snap.Seq, state.Data, state.Seq)
	}
}

// counterBy reads the series of counter name labelled aggregate_type=typ.
func counterBy(t *testing.T, reg *prometheus.Registry, name, typ string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == "aggregate_type" && l.GetValue() == typ {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
