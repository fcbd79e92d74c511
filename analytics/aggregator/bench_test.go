package aggregator_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventpipe/eventpipe/analytics/aggregator"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
	migrations "github.com/eventpipe/eventpipe/migrations/dynamodb"
)

// rawDrain reads topic from the start as a new member of group, with the
// aggregation consumer's group configuration (kafka.GroupConsumer taking
// batches as the consumer does), until it has read n messages, and
// returns the time from joining to the last one.
func rawDrain(b *testing.B, w *world, group, topic string, n int) time.Duration {
	b.Helper()
	kcfg := childConfig(w.db, w.brokers, w.table, w.topics.Prefix, nil).Kafka
	kcfg.ConsumerGroup = group
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var (
		read atomic.Int64
		at   atomic.Pointer[time.Time]
	)
	count := func(ctx context.Context, claim *kafka.Claim) error {
		for {
			batch, open := claim.Batch(ctx, aggregator.DefaultBatchSize, aggregator.DefaultBatchWait)
			if total := read.Add(int64(len(batch))); len(batch) > 0 && total >= int64(n) && at.Load() == nil {
				now := time.Now()
				at.Store(&now)
				cancel()
			}
			if !open || ctx.Err() != nil {
				return nil
			}
		}
	}
	start := time.Now()
	cg, err := kafka.NewGroupConsumer(kafka.GroupConsumerConfig{Subscriber: kcfg, ReadAhead: aggregator.DefaultBatchSize})
	if err != nil {
		b.Fatal(err)
	}
	defer cg.Close()
	for ctx.Err() == nil {
		if err := cg.Consume(ctx, []string{topic}, count); err != nil && ctx.Err() == nil {
			b.Fatalf("raw drain: %v", err)
		}
	}
	done := at.Load()
	if done == nil {
		b.Fatalf("raw drain read %d of %d messages in 5 minutes", read.Load(), n)
	}
	return done.Sub(start)
}

// handled is how many messages the consumer has applied or recognised
// as copies in batches written in full
// (eventpipe_analytics_aggregator_events_total; its third outcome,
// redelivered, counts contributions, not messages).
func handled(b *testing.B, reg *prometheus.Registry) int {
	byOutcome := counterByLabel(b, reg, "eventpipe_analytics_aggregator_events_total", "outcome")
	return int(byOutcome["applied"] + byOutcome["duplicate"])
}

// writesByItem sums eventpipe_analytics_aggregator_writes_total by its
// item label.
func writesByItem(b *testing.B, reg *prometheus.Registry) map[string]float64 {
	return counterByLabel(b, reg, "eventpipe_analytics_aggregator_writes_total", "item")
}

// counterByLabel sums the counter name of reg by the values of label.
func counterByLabel(b *testing.B, reg *prometheus.Registry, name, label string) map[string]float64 {
	b.Helper()
	families, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// BenchmarkAggregatorVsRawDrain publishes a generated browsing workload
// of b.N×70 events (100 per session, over one day, 5% delivered late, 1%
// delivered twice) to a fresh analytics topic of 12 partitions, then
// reads it from the start two ways, each as a new consumer group, in two
// rounds: a raw drain (a kafka.GroupConsumer with the consumer's
// configuration that only counts the messages), and the aggregation
// consumer (aggregator.New + Run in process, default BatchSize and
// BatchWait, a fresh table each round), timed from Run until the daily
// aggregations count every event and every message is in a batch
// written in full. It reports events/s of both, their ratio
// aggregator/raw, and the DynamoDB writes per event from the consumer's
// eventpipe_analytics_aggregator_writes_total: a batch writes each
// aggregation item and each session it touches once, however many of
// its events they hold. Nothing about time is asserted.
func BenchmarkAggregatorVsRawDrain(b *testing.B) {
	w := newWorld(b)
	events := b.N * 70
	wl := generateWorkload("bench", workloadConfig{
		Events: events, Sessions: max(1, events/100), Users: max(1, events/200), Days: 1,
		LateShare: 0.05, DupShare: 0.01, Seed: 15, Now: time.Now(),
	})
	w.publish(wl.Delivered)
	topic := w.topics.Analytics(wl.Source)
	const rounds = 2
	var rawTime, aggTime time.Duration
	writes := map[string]float64{}
	b.ResetTimer()
	for round := range rounds {
		rawTime += rawDrain(b, w, fmt.Sprintf("%sraw-drain-%d", w.topics.Prefix, round), topic, len(wl.Delivered))
		b.StopTimer()
		rw := *w
		if round > 0 {
			rw.table = testenv.UniqueName(b, "analytics")
			if err := migrations.CreateAnalyticsTable(context.Background(), w.db, rw.table); err != nil {
				b.Fatalf("create table: %v", err)
			}
			b.Cleanup(func() { testenv.DeleteTable(b, w.db, rw.table) })
		}
		b.StartTimer()
		d, ws := aggregate(b, &rw, wl, fmt.Sprintf("%saggregator-%d", w.topics.Prefix, round))
		aggTime += d
		for k, v := range ws {
			writes[k] += v
		}
	}
	b.StopTimer()
	delivered := float64(rounds * len(wl.Delivered))
	aggRate, rawRate := delivered/aggTime.Seconds(), delivered/rawTime.Seconds()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(aggRate, "events/s")
	b.ReportMetric(rawRate, "raw_drain_events/s")
	b.ReportMetric(aggRate/rawRate, "aggregator/raw")
	b.ReportMetric(writes["aggregation"]/delivered, "aggregation_writes/event")
	b.ReportMetric(writes["session"]/delivered, "session_writes/event")
	b.ReportMetric((writes["aggregation"]+writes["session"])/delivered, "writes/event")
}

// aggregate runs the aggregation consumer as group on w's table until it
// has counted wl, and returns the time that took and its writes by item.
func aggregate(b *testing.B, w *world, wl workload, group string) (time.Duration, map[string]float64) {
	b.Helper()
	reg := prometheus.NewRegistry()
	cfg := childConfig(w.db, w.brokers, w.table, w.topics.Prefix, nil)
	cfg.BatchSize, cfg.Registerer, cfg.Kafka.ConsumerGroup = 0, reg, group // the default batch size
	c, err := aggregator.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- c.Run(ctx) }()
	want := int64(len(wl.Events))
	for {
		got := w.eventsCounted(wl.Source)
		if got == want && handled(b, reg) >= len(wl.Delivered) {
			break
		}
		if got > want || time.Since(start) > 5*time.Minute {
			cancel()
			<-done
			b.Fatalf("after %v the aggregations count %d events (want %d) and the consumer handled %d messages (want %d)",
				time.Since(start).Round(time.Second), got, want, handled(b, reg), len(wl.Delivered))
		}
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(start)
	cancel()
	if err := <-done; err != nil {
		b.Fatalf("Run: %v", err)
	}
	return elapsed, writesByItem(b, reg)
}
