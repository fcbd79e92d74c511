package aggregator_test

import (
	"context"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/analytics"

	"github.com/eventpipe/eventpipe/analytics/aggregator"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// runConsumer runs an aggregation consumer in this process until the
// test ends.
func runConsumer(t *testing.T, w *world) *aggregator.Consumer {
	t.Helper()
	c, err := aggregator.New(childConfig(w.db, w.brokers, w.table, w.topics.Prefix, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return c
}

// waitCounted waits until the source's daily aggregations count want
// events, failing when the count goes past want or stops moving for
// integration.HangAfter (DynamoDB Local under the load of a whole test
// run can be slow).
func waitCounted(t *testing.T, w *world, source string, want int64) {
	t.Helper()
	integration.AwaitProgress(t, "events counted of "+source, func() int64 { return w.eventsCounted(source) }, want)
	if got := w.eventsCounted(source); got != want {
		t.Fatalf("%d events counted, want %d", got, want)
	}
}

// TestAggregatorCountsLateAndDuplicatedDeliveriesExactly runs the
// consumer in process on a small workload with late and copied
// deliveries, two sources on two topics.
func TestAggregatorCountsLateAndDuplicatedDeliveriesExactly(t *testing.T) {
	w := newWorld(t)
	cfg := workloadConfig{Events: 3000, Sessions: 40, Users: 15, Days: 2, LateShare: 0.1, DupShare: 0.05, Seed: 1, Now: time.Now()}
	a := generateWorkload("site-a", cfg)
	cfg.Seed = 2
	b := generateWorkload("site-b", cfg)
	w.publish(append(append([]analytics.Event(nil), a.Delivered...), b.Delivered...))
	runConsumer(t, w)
	waitCounted(t, w, a.Source, int64(len(a.Events)))
	waitCounted(t, w, b.Source, int64(len(b.Events)))
	// The daily counts are written alongside the hourly ones and before
	// the sessions; a batch is done once its offsets are committed.
	group := w.topics.Prefix + aggregator.DefaultGroup
	testenv.WaitCommitted(t, w.brokers, group, w.topics.Analytics(a.Source), int64(len(a.Delivered)))
	testenv.WaitCommitted(t, w.brokers, group, w.topics.Analytics(b.Source), int64(len(b.Delivered)))
	assertExact(t, w, a)
	assertExact(t, w, b)
}
