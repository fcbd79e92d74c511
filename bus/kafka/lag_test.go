package kafka_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

func TestLagConfigValidateRejectsMissingFields(t *testing.T) {
	valid := kafka.LagConfig{Brokers: []string{"127.0.0.1:9092"}, ConsumerGroup: "g", Topics: []string{"t"}}
	if err := valid.Validate(); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	for name, tc := range map[string]struct {
		field string
		edit  func(*kafka.LagConfig)
	}{
		"no brokers":        {"Brokers", func(c *kafka.LagConfig) { c.Brokers = nil }},
		"no group":          {"ConsumerGroup", func(c *kafka.LagConfig) { c.ConsumerGroup = "" }},
		"no topics":         {"Topics", func(c *kafka.LagConfig) { c.Topics = nil }},
		"empty topic":       {"Topics", func(c *kafka.LagConfig) { c.Topics = []string{"t", ""} }},
		"negative interval": {"Interval", func(c *kafka.LagConfig) { c.Interval = -time.Second }},
	} {
		cfg := valid
		tc.edit(&cfg)
		var ve *eventstore.ValidationError
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, cfg)
		} else if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: Validate = %v, want an *eventstore.ValidationError on %s", name, err, tc.field)
		}
		if _, err := kafka.NewLagMonitor(cfg); err == nil {
			t.Errorf("%s: NewLagMonitor accepted %+v", name, cfg)
		}
	}
	if _, err := kafka.ConsumerLag(context.Background(), kafka.Cluster{Brokers: valid.Brokers}, "", valid.Topics); err == nil {
		t.Error("ConsumerLag without a group was accepted")
	}
}

// publishKeyed publishes n messages to topic spread over 7 partition keys.
func publishKeyed(t *testing.T, brokers []string, topic string, n int) {
	t.Helper()
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	msgs := make([]*message.Message, n)
	for i := range msgs {
		msgs[i] = message.NewMessage(watermill.NewULID(), []byte(strconv.Itoa(i)))
		msgs[i].Metadata.Set(bus.MetadataPartitionKey, fmt.Sprintf("key-%d", i%7))
	}
	if err := pub.Publish(topic, msgs...); err != nil {
		t.Fatalf("publish: %v", err)
	}
}

func totalLag(rows []kafka.PartitionLag) int64 {
	var sum int64
	for _, r := range rows {
		sum += r.Lag
	}
	return sum
}

// TestConsumerLagCountsUncommittedRecords: a group that has committed
// nothing lags by every record on the topic; after it consumes and commits
// 20 of 50 the lag is 30, and each partition's row matches the group's
// committed offsets.
func TestConsumerLagCountsUncommittedRecords(t *testing.T) {
	const n, consumed = 50, 20
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.UniqueName(t, "lag")
	group := topic + "-group"
	publishKeyed(t, brokers, topic, n)
	ctx := context.Background()

	rows, err := kafka.ConsumerLag(ctx, kafka.Cluster{Brokers: brokers}, group, []string{topic})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("no partitions measured")
	}
	var newest int64
	for i, r := range rows {
		if r.Topic != topic || r.Committed != -1 || r.Lag != r.Newest {
			t.Errorf("fresh group, row %+v: want topic %s, Committed -1, Lag == Newest", r, topic)
		}
		if i > 0 && rows[i-1].Partition >= r.Partition {
			t.Errorf("rows not sorted by partition: %+v", rows)
		}
		newest += r.Newest
	}
	if got := totalLag(rows); got != n || newest != n {
		t.Fatalf("fresh group: total lag %d, newest offsets add up to %d, want %d: %+v", got, newest, n, rows)
	}

	testenv.Consume(t, brokers, group, topic, consumed)
	committed := testenv.WaitCommitted(t, brokers, group, topic, consumed)

	rows, err = kafka.ConsumerLag(ctx, kafka.Cluster{Brokers: brokers}, group, []string{topic})
	if err != nil {
		t.Fatal(err)
	}
	if got := totalLag(rows); got != n-consumed {
		t.Fatalf("after consuming %d: total lag %d, want %d: %+v", consumed, got, n-consumed, rows)
	}
	for _, r := range rows {
		want, ok := committed[r.Partition]
		if !ok {
			want = -1
		}
		if r.Committed != want {
			t.Errorf("partition %d: Committed %d, the group committed %d", r.Partition, r.Committed, want)
		}
		if ok && r.Lag != r.Newest-want {
			t.Errorf("partition %d: Lag %d, want Newest-Committed = %d", r.Partition, r.Lag, r.Newest-want)
		}
	}
}

// TestConsumerLagWithoutCommitCountsFromOldest: on partitions whose first
// records were deleted, a group with no commit lags by the records still
// there (newest - oldest), not by the high watermark.
func TestConsumerLagWithoutCommitCountsFromOldest(t *testing.T) {
	const n, deleted = 50, 3
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.UniqueName(t, "lag")
	publishKeyed(t, brokers, topic, n)
	ctx := context.Background()

	rows, err := kafka.ConsumerLag(ctx, kafka.Cluster{Brokers: brokers}, topic+"-group", []string{topic})
	if err != nil {
		t.Fatal(err)
	}
	before := map[int32]int64{}
	for _, r := range rows {
		if r.Newest >= deleted {
			before[r.Partition] = deleted
		}
	}
	if len(before) == 0 {
		t.Fatalf("no partition has %d records: %+v", deleted, rows)
	}
	cfg := sarama.NewConfig()
	cfg.Version = kafka.KafkaVersion
	admin, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.DeleteRecords(topic, before); err != nil {
		t.Fatalf("delete records: %v", err)
	}

	rows, err = kafka.ConsumerLag(ctx, kafka.Cluster{Brokers: brokers}, topic+"-group", []string{topic})
	if err != nil {
		t.Fatal(err)
	}
	want := int64(n - deleted*len(before))
	if got := totalLag(rows); got != want {
		t.Fatalf("after deleting %d records on %d partitions: total lag %d, want %d: %+v", deleted, len(before), got, want, rows)
	}
	for _, r := range rows {
		if _, ok := before[r.Partition]; ok && r.Lag != r.Newest-deleted {
			t.Errorf("partition %d: Lag %d, want Newest-%d = %d", r.Partition, r.Lag, deleted, r.Newest-deleted)
		}
	}
}

// TestConsumerLagSkipsMissingTopics: a topic that does not exist yields no
// rows and no error, and measuring does not create it.
func TestConsumerLagSkipsMissingTopics(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	missing := testenv.UniqueName(t, "lag-missing")
	present := testenv.UniqueName(t, "lag")
	publishKeyed(t, brokers, present, 10)
	ctx := context.Background()

	for range 2 { // the second pass sees whether the first created the topic
		rows, err := kafka.ConsumerLag(ctx, kafka.Cluster{Brokers: brokers}, "g-"+missing, []string{missing})
		if err != nil || len(rows) != 0 {
			t.Fatalf("missing topic: rows %+v, err %v; want none, nil", rows, err)
		}
	}
	rows, err := kafka.ConsumerLag(ctx, kafka.Cluster{Brokers: brokers}, "g-"+missing, []string{missing, present})
	if err != nil {
		t.Fatal(err)
	}
	if got := totalLag(rows); got != 10 {
		t.Fatalf("missing + present topic: total lag %d, want 10: %+v", got, rows)
	}
	for _, r := range rows {
		if r.Topic != present {
			t.Errorf("row for %s, want only %s", r.Topic, present)
		}
	}
}

// gaugeSum gathers reg and returns the sum of the lag gauge's series for
// topic and how many there were, checking their labels.
func gaugeSum(t *testing.T, reg *prometheus.Registry, group, topic string) (float64, int) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var sum float64
	var series int
	for _, f := range families {
		if f.GetName() != kafka.LagMetricName {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["group"] != group || labels["topic"] != topic || labels["partition"] == "" {
				t.Errorf("series with labels %v", labels)
			}
			sum += m.GetGauge().GetValue()
			series++
		}
	}
	return sum, series
}

// waitLag polls m until its last measurement adds up to want.
func waitLag(t *testing.T, m *kafka.LagMonitor, want int64) []kafka.PartitionLag {
	t.Helper()
	var last []kafka.PartitionLag
	integration.Await(t, fmt.Sprintf("a total lag of %d", want), func() error {
		if last = m.Last(); len(last) == 0 || totalLag(last) != want {
			return fmt.Errorf("monitor's last measurement %+v", last)
		}
		return nil
	})
	return last
}

// TestLagMonitorExportsGauge runs a monitor on a registry: the gauge
// follows the measured lag, before and after the group commits.
func TestLagMonitorExportsGauge(t *testing.T) {
	const n, consumed = 50, 20
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.UniqueName(t, "lag")
	group := topic + "-group"
	publishKeyed(t, brokers, topic, n)

	reg := prometheus.NewRegistry()
	m, err := kafka.NewLagMonitor(kafka.LagConfig{
		Brokers:       brokers,
		ConsumerGroup: group,
		Topics:        []string{topic},
		Interval:      100 * time.Millisecond,
		Registerer:    reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v after cancel, want nil", err)
			}
		case <-time.After(integration.HangAfter()):
			t.Errorf("Run did not return within %v of cancel (%s)", integration.HangAfter(), integration.EnvHangAfter)
		}
	}()

	for _, step := range []struct {
		consume int
		want    int64
	}{{0, n}, {consumed, n - consumed}} {
		if step.consume > 0 {
			testenv.Consume(t, brokers, group, topic, step.consume)
		}
		last := waitLag(t, m, step.want)
		sum, series := gaugeSum(t, reg, group, topic)
		if sum != float64(step.want) || series != len(last) {
			t.Fatalf("gauge: %v over %d series, want %d over %d (last %+v)", sum, series, step.want, len(last), last)
		}
	}

	// A second monitor of another group may share the registry.
	other, err := kafka.NewLagMonitor(kafka.LagConfig{Brokers: brokers, ConsumerGroup: group + "-other", Topics: []string{topic}, Registerer: reg})
	if err != nil {
		t.Fatalf("second group's monitor on the same registry: %v", err)
	}
	_ = other
}

// TestLagMonitorRunSurvivesUnreachableBroker: failed polls are logged as
// warnings and retried, and Run still returns nil when ctx ends.
func TestLagMonitorRunSurvivesUnreachableBroker(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &buf}, nil))
	m, err := kafka.NewLagMonitor(kafka.LagConfig{
		Brokers:       []string{"127.0.0.1:1"},
		ConsumerGroup: "g",
		Topics:        []string{"t"},
		Interval:      50 * time.Millisecond,
		Logger:        logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := m.Run(ctx); err != nil {
		t.Fatalf("Run: %v, want nil", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := bytes.Count(buf.Bytes(), []byte("level=WARN")); got < 2 {
		t.Fatalf("%d warnings logged, want a failed poll retried at least once:\n%s", got, buf.String())
	}
	if m.Last() != nil {
		t.Errorf("Last() = %+v after only failed polls, want nil", m.Last())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
