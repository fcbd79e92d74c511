package readmodels_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
	store "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

func history(s *store.Store) projections.HistoryPage {
	return func(ctx context.Context, eventType, after, cursor string) ([]eventstore.Envelope, string, error) {
		p, err := s.ListByType(ctx, store.TypeQuery{EventType: eventType, After: after, Cursor: cursor, Limit: 100})
		return p.Events, p.Next, err
	}
}

// TestNewProjectionCatchesUpFromTheStoreThenFollowsLive adds the accounts
// projection after 10,000 events exist only in the event store (nothing
// on its topics). While it catches up from the store (GSI1 by event type),
// commands keep arriving: their events are appended and published on the
// live topic. It ends equal to a from-scratch replay of the store, row by
// row, with every event applied once: no gap at the hand-over, no double
// effect.
func TestNewProjectionCatchesUpFromTheStoreThenFollowsLive(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	const accounts, perAccount, live = 200, 50, 100
	ctx := context.Background()
	w := newWorld(t)
	var ids []string
	versions := map[string]int64{}
	total := 0
	for i := range accounts {
		id := fmt.Sprintf("acc-%03d", i)
		evs, _ := w.openAccount(t, id, perAccount-1)
		ids = append(ids, id)
		versions[id] = int64(len(evs))
		total += len(evs)
	}
	if total != accounts*perAccount {
		t.Fatalf("stored %d events", total)
	}
	brokers := testenv.KafkaBrokers(t)
	topics := bus.Topics{Prefix: testenv.UniqueName(t, "ns") + "."}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	applier := w.applier(t)
	var caughtUp atomic.Int64
	hist := history(w.store)
	runner, err := projections.NewRunner(projections.RunnerConfig{Applier: applier, Brokers: brokers, Topics: topics, Publisher: pub,
		History: func(ctx context.Context, eventType, after, cursor string) ([]eventstore.Envelope, string, error) {
			evs, next, err := hist(ctx, eventType, after, cursor)
			caughtUp.Add(int64(len(evs)))
			return evs, next, err
		}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- runner.Run(runCtx) }()
	defer func() { cancel(); <-done }()

	// Live traffic during the catch-up: append and publish, as the relay
	// would.
	for i := range live {
		id := ids[(i*7)%len(ids)]
		e := w.appendTransaction(ctx, t, id, versions[id], int64(i+1))
		versions[id] = e.Sequence
		msg, err := bus.EventMessage(e)
		if err != nil {
			t.Fatal(err)
		}
		if err := pub.Publish(topics.Events(bankaccount.AggregateType), msg); err != nil {
			t.Fatal(err)
		}
	}
	positions := func() int64 {
		var n int64
		if err := w.db.QueryRow(ctx, `SELECT coalesce(sum(seq), 0) FROM projection_positions`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	integration.AwaitProgress(t, "positions", positions, int64(total+live))
	if n := positions(); n != int64(total+live) {
		t.Fatalf("positions add up to %d, want %d", n, total+live)
	}
	t.Logf("%d events read from the store's history, %d published live", caughtUp.Load(), live)
	if caughtUp.Load() < int64(total) {
		t.Errorf("the catch-up read %d events from the store, want at least %d", caughtUp.Load(), total)
	}

	w.assertEqualsScratchReplay(t, ids, "caught up")
}
