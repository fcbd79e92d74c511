package operator_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/operator"
)

// BenchmarkStatus measures what one status reading costs with 5 and with
// 100 consumer groups: in a namespace of its own, 100 handlers read one
// topic of 60 records, each group with committed offsets of its own (and
// a poison topic), and each iteration reads Status once on a catalogue of
// the first 5 handlers and once on all 100, in alternating order, each
// reading with its own Kafka client as `eventpipe status` and every
// sample of the status page do. It reports the median of each and their
// ratio (100/5; the goal is ≤ 1.5: one pass over Kafka whatever the number
// of groups). For reference it also times, a few times, the Kafka part as
// Status read it before the one pass, one client per group
// (kafka.ConsumerLag) and one for the poison topics (kafka.TopicMessages),
// for 5 and 100 groups. Nothing about time is asserted.
func BenchmarkStatus(b *testing.B) {
	const groups, few, records = 100, 5, 60
	f := newStatusFixture(b)
	f.publish(b, f.topics.Prefix+"bench", records)
	fewCatalog := eventpipe.NewCatalog()
	for i := range groups {
		name := fmt.Sprintf("h%03d", i)
		// Group i has committed the first i%records records of each
		// partition it can.
		f.addHandler(b, name, []string{"bench"}, func(end int64) int64 { return min(end, int64(i%records)) })
		if i < few {
			cons, _ := f.catalog.Consumer(name)
			if err := fewCatalog.AddConsumer(cons); err != nil {
				b.Fatal(err)
			}
		}
	}
	ctx := context.Background()
	read := func(cat *eventpipe.Catalog, n int) time.Duration {
		start := time.Now()
		r := operator.Status(ctx, operator.StatusConfig{Process: eventpipe.Process{Catalog: cat, Endpoints: f.ep}})
		took := time.Since(start)
		if len(r.Groups) != n {
			b.Fatalf("%d groups read, want %d", len(r.Groups), n)
		}
		for _, err := range r.Errors {
			if strings.Contains(err.Error(), "kafka") || strings.HasPrefix(err.Error(), "group ") {
				b.Fatalf("status with %d groups: %v", n, err)
			}
		}
		return took
	}
	read(f.catalog, groups) // connections, caches: not timed

	var t5, t100 []time.Duration
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			t5 = append(t5, read(fewCatalog, few))
			t100 = append(t100, read(f.catalog, groups))
		} else {
			t100 = append(t100, read(f.catalog, groups))
			t5 = append(t5, read(fewCatalog, few))
		}
	}
	b.StopTimer()

	// The Kafka part as Status read it before: a client per group.
	cluster := kafka.Cluster{Brokers: f.ep.KafkaBrokers}
	perGroup := func(n int) time.Duration {
		start := time.Now()
		var poison []string
		for _, name := range f.catalog.ConsumerNames()[:n] {
			cons, _ := f.catalog.Consumer(name)
			info := cons.Describe(f.topics)
			if _, err := kafka.ConsumerLag(ctx, cluster, info.Group, info.Topics); err != nil {
				b.Fatal(err)
			}
			poison = append(poison, info.PoisonTopic)
		}
		if _, err := kafka.TopicMessages(ctx, cluster, poison); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var old5, old100 []time.Duration
	for range min(b.N, 3) {
		old5 = append(old5, perGroup(few))
		old100 = append(old100, perGroup(groups))
	}

	median := func(d []time.Duration) float64 {
		d = slices.Clone(d)
		slices.Sort(d)
		return float64(d[len(d)/2]) / float64(time.Millisecond)
	}
	b.ReportMetric(0, "ns/op")
	m5, m100 := median(t5), median(t100)
	b.ReportMetric(m5, "groups5_ms")
	b.ReportMetric(m100, "groups100_ms")
	b.ReportMetric(m100/m5, "groups100_vs_5_ratio")
	b.ReportMetric(median(old5), "per_group_clients5_kafka_ms")
	b.ReportMetric(median(old100), "per_group_clients100_kafka_ms")
}
