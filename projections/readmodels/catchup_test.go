package readmodels_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
	store "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	"github.com/eventpipe/eventpipe/internal/testenv"
	"github.com/eventpipe/eventpipe/projections"
)

func history(s *store.Store) projections.HistoryPage {
	return func(ctx context.Context, eventType, cursor string) ([]eventstore.Envelope, string, error) {
		p, err := s.ListByType(ctx, store.TypeQuery{EventType: eventType, Cursor: cursor, Limit: 100})
		return p.Events, p.Next, err
	}
}

// TestNewProjectionCatchesUpFromTheStoreThenFollowsLive adds the accounts
// projection after 30 accounts' history exists only in the event store
// (nothing on its topics): it catches up from the store (GSI1 by event
// type), equals the replay, and then applies a new live event with no gap
// and nothing twice.
func TestNewProjectionCatchesUpFromTheStoreThenFollowsLive(t *testing.T) {
	w := newWorld(t)
	type account struct {
		events  []eventstore.Envelope
		balance int64
	}
	byID := map[string]account{}
	total := 0
	for i := range 30 {
		id := fmt.Sprintf("acc-%02d", i)
		evs, bal := w.openAccount(t, id, 12)
		byID[id] = account{evs, bal}
		total += len(evs)
	}
	brokers := testenv.KafkaBrokers(t)
	topics := bus.Topics{Prefix: testenv.UniqueName(t, "ns") + "."}
	pub, err := bus.NewPublisher(bus.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	applier := w.applier(t)
	runner, err := projections.NewRunner(projections.RunnerConfig{Applier: applier, Brokers: brokers, Topics: topics, Publisher: pub, History: history(w.store)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitSum := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			var n int64
			if err := w.db.QueryRow(context.Background(), `SELECT coalesce(sum(seq), 0) FROM projection_positions`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("positions add up to %d, want %d", n, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitSum(int64(total))
	for id, acc := range byID {
		if got, want := w.row(t, id), want(acc.events, acc.balance); got != want {
			t.Errorf("%s after catch-up: %+v, want %+v", id, got, want)
		}
	}

	// Live: a new transaction on acc-00 arrives through the topic.
	ref := eventstore.Ref{Type: bankaccount.AggregateType, ID: "acc-00"}
	req, err := eventstore.Prepare(ref, 13, eventstore.Change{Events: []eventstore.NewEvent{
		eventstore.Event(bankaccount.EventTransactionAccepted, bankaccount.Transaction{Desc: "live", Amount: 7}),
	}}, eventstore.Schema{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.store.Append(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := bus.EventMessage(res.Events[0])
	if err := pub.Publish(topics.Events(bankaccount.AggregateType), msg); err != nil {
		t.Fatal(err)
	}
	waitSum(int64(total + 1))
	acc := byID["acc-00"]
	if got, want := w.row(t, "acc-00"), want(append(acc.events, res.Events...), acc.balance+7); got != want {
		t.Fatalf("acc-00 after the live event: %+v, want %+v", got, want)
	}
}
