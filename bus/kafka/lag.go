package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventpipe/eventpipe/eventstore"
)

// LagMetricName is the gauge a LagMonitor exports: per topic and
// partition, the records on the topic not yet committed by the group
// (the group is a constant label, so monitors of several groups can share
// one registry).
const LagMetricName = "eventpipe_consumer_lag_messages"

// Cluster is a Kafka cluster to connect to: its seed brokers and how to
// connect to them.
type Cluster struct {
	// Brokers are the seed brokers. Required.
	Brokers []string
	// Security is how to connect: TLS and SASL (the zero Security is plain
	// text without authentication).
	Security Security
}

// LagConfig configures a LagMonitor.
type LagConfig struct {
	// Brokers are the seed brokers. Required.
	Brokers []string
	// Security is how the monitor's client connects: TLS and SASL
	// (default: the zero Security, plain text without authentication).
	Security Security
	// ConsumerGroup is the group whose committed offsets are measured.
	// Required.
	ConsumerGroup string
	// Topics are the topics measured; at least one is required. A topic
	// that does not exist yet is skipped, not an error.
	Topics []string
	// Interval is the pause between two measurements (default 5s).
	Interval time.Duration
	// Registerer receives the lag gauge (default: none, the gauge is kept
	// but not registered).
	Registerer prometheus.Registerer
	// Logger receives failed measurements (default: slog's default logger).
	Logger *slog.Logger
}

func (c *LagConfig) setDefaults() {
	if c.Interval == 0 {
		c.Interval = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first invalid field.
func (c LagConfig) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("kafka: LagConfig: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch {
	case len(c.Brokers) == 0:
		return bad("Brokers", "is empty")
	case c.ConsumerGroup == "":
		return bad("ConsumerGroup", "is empty")
	case len(c.Topics) == 0:
		return bad("Topics", "is empty")
	case slices.Contains(c.Topics, ""):
		return bad("Topics", "has an empty topic name")
	case c.Interval < 0:
		return bad("Interval", "is negative (%s)", c.Interval)
	}
	if err := c.Security.ValidateFor(c.Brokers); err != nil {
		return fmt.Errorf("kafka: LagConfig.Security: %w", err)
	}
	return nil
}

// PartitionLag is one partition's lag.
type PartitionLag struct {
	Topic     string
	Partition int32
	// Newest is the high watermark: the offset the next record will get.
	Newest int64
	// Committed is the group's committed offset, or -1 when the group has
	// committed none on this partition (the lag then counts from the
	// oldest offset still on the partition).
	Committed int64
	// Lag is the number of records not yet committed, never negative.
	Lag int64
}

// ConsumerLag measures once, with an OffsetReader of its own on cluster:
// for every partition of topics, the newest offset minus group's
// committed offset (or minus the oldest offset still available, when the
// group has committed nothing there). Topics that do not exist yet yield
// no rows. Rows are sorted by topic and partition. It is OffsetReader.Read
// for one group: lag is computed one way, whoever asks.
func ConsumerLag(ctx context.Context, cluster Cluster, group string, topics []string) ([]PartitionLag, error) {
	if err := (LagConfig{Brokers: cluster.Brokers, Security: cluster.Security, ConsumerGroup: group, Topics: topics}).Validate(); err != nil {
		return nil, err
	}
	r, err := NewOffsetReader(cluster)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.consumerLag(ctx, group, topics)
}

// consumerLag reads one group's lag on topics, as ConsumerLag.
func (r *OffsetReader) consumerLag(ctx context.Context, group string, topics []string) ([]PartitionLag, error) {
	o, err := r.Read(ctx, OffsetsRequest{Groups: []GroupTopics{{Group: group, Topics: topics}}})
	if err != nil {
		return nil, err
	}
	return o.Groups[0].Rows, o.Groups[0].Err
}

// LagMonitor measures a consumer group's lag every Interval and exports it
// as the gauge LagMetricName{topic,partition}.
type LagMonitor struct {
	cfg   LagConfig
	gauge *prometheus.GaugeVec

	mu   sync.Mutex
	last []PartitionLag
}

// NewLagMonitor validates cfg and registers the lag gauge with
// cfg.Registerer. It does not connect: Run does.
func NewLagMonitor(cfg LagConfig) (*LagMonitor, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	gauge := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name:        LagMetricName,
		Help:        "Records on the topic partition not yet committed by the consumer group.",
		ConstLabels: prometheus.Labels{"group": cfg.ConsumerGroup},
	}, []string{"topic", "partition"})
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(gauge); err != nil {
			return nil, fmt.Errorf("kafka: register %s for group %s: %w", LagMetricName, cfg.ConsumerGroup, err)
		}
	}
	return &LagMonitor{cfg: cfg, gauge: gauge}, nil
}

// Run measures at once and then every Interval until ctx ends, and returns
// nil then. A failed measurement (including failing to connect) is logged
// and retried at the next interval; the gauge keeps its last values
// meanwhile. The Kafka client is made on the first poll, reused, and closed
// when Run returns. Call Run once.
func (m *LagMonitor) Run(ctx context.Context) error {
	var reader *OffsetReader
	defer func() {
		if reader != nil {
			reader.Close()
		}
	}()
	ticker := time.NewTicker(m.cfg.Interval)
	defer ticker.Stop()
	for {
		var err error
		if reader == nil {
			reader, err = NewOffsetReader(Cluster{Brokers: m.cfg.Brokers, Security: m.cfg.Security})
		}
		if err == nil {
			err = m.poll(ctx, reader)
		}
		if err != nil && ctx.Err() == nil {
			m.cfg.Logger.WarnContext(ctx, "consumer lag measurement failed",
				"group", m.cfg.ConsumerGroup, "topics", m.cfg.Topics, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

func (m *LagMonitor) poll(ctx context.Context, reader *OffsetReader) error {
	rows, err := reader.consumerLag(ctx, m.cfg.ConsumerGroup, m.cfg.Topics)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[PartitionLag]bool{}
	for _, r := range rows {
		m.gauge.WithLabelValues(r.Topic, strconv.Itoa(int(r.Partition))).Set(float64(r.Lag))
		seen[PartitionLag{Topic: r.Topic, Partition: r.Partition}] = true
	}
	// Drop the series of partitions that are gone (a deleted topic).
	for _, r := range m.last {
		if !seen[PartitionLag{Topic: r.Topic, Partition: r.Partition}] {
			m.gauge.DeleteLabelValues(r.Topic, strconv.Itoa(int(r.Partition)))
		}
	}
	m.last = rows
	return nil
}

// Last returns a copy of the last successful measurement (nil before the
// first one).
func (m *LagMonitor) Last() []PartitionLag {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.last)
}

// TopicMessages counts the records each topic holds now (newest minus
// oldest offset, summed over its partitions), for example how many
// messages wait on a poison topic. A topic that does not exist counts 0.
// It connects to cluster with a client of its own.
func TopicMessages(ctx context.Context, cluster Cluster, topics []string) (map[string]int64, error) {
	if len(cluster.Brokers) == 0 {
		return nil, errors.New("kafka: TopicMessages: Cluster.Brokers is empty")
	}
	if err := cluster.Security.ValidateFor(cluster.Brokers); err != nil {
		return nil, fmt.Errorf("kafka: TopicMessages: Cluster.Security: %w", err)
	}
	r, err := NewOffsetReader(cluster)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	o, err := r.Read(ctx, OffsetsRequest{Count: topics})
	if err != nil {
		return nil, err
	}
	for _, t := range topics {
		if err := o.TopicErrs[t]; err != nil {
			return nil, err
		}
	}
	return o.Messages, nil
}
