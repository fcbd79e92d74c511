package snapshots

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
)

// Defaults of Config.
const (
	// DefaultGroup is the consumer group, after the topic prefix, and the
	// name its poison topic is derived from.
	DefaultGroup = "snapshots"
	// DefaultEvery is N: a snapshot every 100 events per aggregate.
	DefaultEvery = 100
	// DefaultConcurrency bounds the snapshots taken at once.
	DefaultConcurrency = 8
	// DefaultRemember is how many aggregates' latest snapshot sequence
	// the consumer keeps in memory.
	DefaultRemember = 100_000
	// DefaultGiveUpAfter is how long a trigger's transient failures are
	// retried before it is poisoned.
	DefaultGiveUpAfter = 2 * time.Minute
)

// Config configures a Consumer.
type Config struct {
	// Aggregates maps each aggregate type to snapshot to the function
	// that snapshots one of its aggregates (commands.Domain.NewSnapshot
	// builds it). Required: at least one; every key is a valid aggregate
	// type and every value non-nil.
	Aggregates map[string]commands.SnapshotFunc
	// Every is N: an event whose sequence is a multiple of it triggers a
	// snapshot of its aggregate (default DefaultEvery).
	Every int64
	// EveryByType overrides Every for some aggregate types of Aggregates.
	EveryByType map[string]int64
	// NewSubscriber returns the subscriber of each events topic, in the
	// consumer group (default: Kafka subscribers on Brokers).
	NewSubscriber bus.SubscriberConstructor
	// Brokers are the Kafka seed brokers: required without NewSubscriber;
	// with a Registerer they also feed the Kafka offset lag metric.
	Brokers []string
	// KafkaSecurity is the TLS and SASL of its Kafka clients.
	KafkaSecurity kafka.Security
	// KafkaInstanceID makes its Kafka subscribers static group members
	// (see bus/kafka.SubscriberConfig.InstanceID); empty: dynamic.
	KafkaInstanceID string
	// Topics names the events topics, the group and the poison topic.
	Topics bus.Topics
	// Group is the consumer group (default Topics.Prefix + DefaultGroup).
	// Its poison topic is Topics.Poison of the group without the prefix.
	Group string
	// Publisher publishes poisoned messages. Required.
	Publisher message.Publisher
	// Concurrency bounds the snapshots taken at once across partitions
	// (default DefaultConcurrency).
	Concurrency int
	// Remember is how many aggregates' latest snapshot sequence are kept
	// (least recently used first out) to skip the triggers a snapshot
	// already covers (default DefaultRemember).
	Remember int
	// GiveUpAfter bounds how long one trigger's transient failures (the
	// store unreachable, throttled) are retried with back-off before its
	// message is poisoned as a *FailedError, so that no aggregate blocks
	// its partition forever (default DefaultGiveUpAfter). A snapshot is
	// only a cache: the aggregate's next trigger tries again.
	GiveUpAfter time.Duration
	// Registerer receives the consumer's metrics (default: none).
	Registerer prometheus.Registerer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Every == 0 {
		c.Every = DefaultEvery
	}
	if c.Group == "" {
		c.Group = c.Topics.Prefix + DefaultGroup
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Remember == 0 {
		c.Remember = DefaultRemember
	}
	if c.GiveUpAfter == 0 {
		c.GiveUpAfter = DefaultGiveUpAfter
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first missing or out-of-range field.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("snapshots: Config: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch {
	case len(c.Aggregates) == 0:
		return bad("Aggregates", "is empty")
	case c.NewSubscriber == nil && len(c.Brokers) == 0:
		return bad("Brokers", "is empty and NewSubscriber is nil: set one")
	case c.Publisher == nil:
		return bad("Publisher", "is nil")
	case c.Every < 1:
		return bad("Every", "is %d, want ≥ 1", c.Every)
	case c.Concurrency < 1:
		return bad("Concurrency", "is %d, want ≥ 1", c.Concurrency)
	case c.Remember < 1:
		return bad("Remember", "is %d, want ≥ 1", c.Remember)
	case c.GiveUpAfter <= 0:
		return bad("GiveUpAfter", "is %v, want > 0", c.GiveUpAfter)
	case c.Group == "":
		return bad("Group", "is empty")
	}
	for t, fn := range c.Aggregates {
		if err := eventstore.ValidateName("aggregate_type", t); err != nil {
			return bad("Aggregates", "%v", err)
		}
		if fn == nil {
			return bad(fmt.Sprintf("Aggregates[%q]", t), "is nil")
		}
	}
	for t, n := range c.EveryByType {
		if _, ok := c.Aggregates[t]; !ok {
			return bad(fmt.Sprintf("EveryByType[%q]", t), "not an aggregate type of Aggregates")
		}
		if n < 1 {
			return bad(fmt.Sprintf("EveryByType[%q]", t), "is %d, want ≥ 1", n)
		}
	}
	if err := bus.ValidateTopic(c.poisonTopic()); err != nil {
		return bad("Group", "makes an invalid poison topic: %v", err)
	}
	return nil
}

// poisonTopic is where triggers whose snapshot failed for good go.
func (c Config) poisonTopic() string {
	return c.Topics.Poison(strings.TrimPrefix(c.Group, c.Topics.Prefix))
}

// every is N for aggregateType.
func (c Config) every(aggregateType string) int64 {
	if n, ok := c.EveryByType[aggregateType]; ok {
		return n
	}
	return c.Every
}
