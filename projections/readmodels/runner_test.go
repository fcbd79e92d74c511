package readmodels_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/internal/testenv"
	"github.com/eventpipe/eventpipe/projections"
)

// TestRunnerBatchesAndPoisonsOnlyTheBadMessage publishes 24 accounts'
// events at once, with one event of a type the projection does not know
// among them. The runner applies them in fewer transactions than
// messages; the batch holding the bad event falls back to one by one, so
// every good event is applied once and only the bad message lands on the
// poison topic.
func TestRunnerBatchesAndPoisonsOnlyTheBadMessage(t *testing.T) {
	w := newWorld(t)
	var all []eventstore.Envelope
	for i := range 24 {
		evs, _ := w.openAccount(t, fmt.Sprintf("acc-%02d", i), 4)
		all = append(all, evs...)
	}
	bad := all[7]
	bad.EventID, bad.AggregateID, bad.Sequence, bad.EventType = "01BADBADBADBADBADBADBADBAD", "acc-bad", 1, "NOT_A_BANK_EVENT"

	brokers := testenv.KafkaBrokers(t)
	topics := bus.Topics{Prefix: testenv.UniqueName(t, "ns") + "."}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	var msgs []*message.Message
	for _, e := range append(all[:20:20], append([]eventstore.Envelope{bad}, all[20:]...)...) {
		m, err := bus.EventMessage(e)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	if err := pub.Publish(topics.Events(bankaccount.AggregateType), msgs...); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	runner, err := projections.NewRunner(projections.RunnerConfig{Applier: w.applier(t), Brokers: brokers, Topics: topics, Publisher: pub, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx) }()
	defer func() { cancel(); <-done }()

	poisoned := testenv.Consume(t, brokers, "poison-reader", runner.PoisonTopic(), 1)
	if got := poisoned[0].UUID; got != bad.EventID {
		t.Errorf("poisoned message %s, want the bad event %s", got, bad.EventID)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var n int64
		if err := w.db.QueryRow(ctx, `SELECT coalesce(sum(seq), 0) FROM projection_positions`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == int64(len(all)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("positions add up to %d, want %d", n, len(all))
		}
		time.Sleep(50 * time.Millisecond)
	}
	var twice, rows int
	if err := w.db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE apply_count <> version), count(*) FROM accounts`).Scan(&twice, &rows); err != nil {
		t.Fatal(err)
	}
	if twice != 0 || rows != 24 {
		t.Errorf("%d of %d rows applied other than once (want 0 of 24)", twice, rows)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var txs uint64
	var batched float64
	for _, f := range families {
		if f.GetName() == "eventpipe_projection_batch_messages" {
			txs, batched = f.Metric[0].Histogram.GetSampleCount(), f.Metric[0].Histogram.GetSampleSum()
		}
	}
	t.Logf("%d messages in %d transactions", int(batched), txs)
	if txs == 0 || txs >= uint64(len(msgs)) {
		t.Errorf("%d messages took %d transactions; want batches of more than one", len(msgs), txs)
	}
}
