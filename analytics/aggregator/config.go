package aggregator

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/eventstore"
)

// API is the part of *dynamodb.Client the consumer uses.
type API interface {
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// Defaults of Config.
const (
	DefaultGroup        = "analytics-aggregator"
	DefaultBatchSize    = 2000
	DefaultBatchWait    = 50 * time.Millisecond
	DefaultRecentEvents = 256
	DefaultSessionTTL   = 90 * 24 * time.Hour
	// MaxRecentEvents bounds Config.RecentEvents: 16 bytes each keeps a
	// session item far below DynamoDB's 400 KB.
	MaxRecentEvents = 4096
)

// Config configures a Consumer.
type Config struct {
	// Kafka is the consumer group membership: Brokers are required; its
	// ConsumerGroup defaults to Topics.Prefix + DefaultGroup. Its
	// timeouts are those of bus/kafka.SubscriberConfig.
	Kafka kafka.SubscriberConfig
	// Topics is the namespace whose Analytics topics are consumed: every
	// topic named Topics.Analytics(source), found as sources appear.
	Topics bus.Topics
	// Client reads and writes the analytics table. Required.
	Client API
	// Table is the analytics table (default analytics.DefaultTable).
	Table string
	// SessionTTL is how long a session is kept after its last event
	// (default 90 days): its item's ttl.
	SessionTTL time.Duration
	// BatchSize bounds the messages of one partition folded and written
	// together (default 2000); BatchWait is how long a batch waits to
	// fill once its first message is in (default 50 ms). A consumer that
	// is behind takes full batches, a live one what arrived within
	// BatchWait. Bigger batches mean fewer writes to the hot aggregation
	// items.
	BatchSize int
	BatchWait time.Duration
	// RecentEvents is how many event ids a session item remembers to
	// recognise a copy of an event delivered again at another offset
	// (the relay republishes a batch it could not checkpoint): default
	// 256, at most MaxRecentEvents. Redelivery at the same offset needs
	// no memory (see the package documentation).
	RecentEvents int
	// WriteConcurrency bounds the item writes in flight, across every
	// partition the consumer holds (default 16): each partition's batch
	// writes its items in parallel, and a table (DynamoDB Local above
	// all) that gets more concurrent writes to one partition key than it
	// can take times them out.
	WriteConcurrency int
	// DiscoveryInterval is how often new source topics are looked for
	// (default 5 s).
	DiscoveryInterval time.Duration
	// ConflictRetries bounds the attempts at one item's write: after a
	// conditional write found the item changed by another writer, or
	// failed (then after a back-off), the item is read again and the
	// write retried (default 20). Past it the whole batch is retried.
	ConflictRetries int
	// Poison, when set, receives every message that is not an analytics
	// event, on Topics.Poison(group); without it such messages are
	// logged and dropped. Either way they never block their partition.
	Poison message.Publisher
	// Registerer receives the consumer's metrics (default: none).
	Registerer prometheus.Registerer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Kafka.ConsumerGroup == "" {
		c.Kafka.ConsumerGroup = c.Topics.Prefix + DefaultGroup
	}
	if c.Table == "" {
		c.Table = analytics.DefaultTable
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.BatchWait == 0 {
		c.BatchWait = DefaultBatchWait
	}
	if c.RecentEvents == 0 {
		c.RecentEvents = DefaultRecentEvents
	}
	if c.WriteConcurrency == 0 {
		c.WriteConcurrency = 16
	}
	if c.DiscoveryInterval == 0 {
		c.DiscoveryInterval = 5 * time.Second
	}
	if c.ConflictRetries == 0 {
		c.ConflictRetries = 20
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first missing or out-of-range field.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("aggregator: Config: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch {
	case c.Client == nil:
		return bad("Client", "is nil")
	case c.BatchSize < 1:
		return bad("BatchSize", "%d must be positive", c.BatchSize)
	case c.BatchWait < 0:
		return bad("BatchWait", "%v must not be negative", c.BatchWait)
	case c.RecentEvents < 1 || c.RecentEvents > MaxRecentEvents:
		return bad("RecentEvents", "%d must be 1–%d", c.RecentEvents, MaxRecentEvents)
	case c.SessionTTL <= 0:
		return bad("SessionTTL", "%v must be positive", c.SessionTTL)
	case c.WriteConcurrency < 1:
		return bad("WriteConcurrency", "%d must be positive", c.WriteConcurrency)
	case c.DiscoveryInterval <= 0:
		return bad("DiscoveryInterval", "%v must be positive", c.DiscoveryInterval)
	case c.ConflictRetries < 1:
		return bad("ConflictRetries", "%d must be positive", c.ConflictRetries)
	}
	if err := c.groupConfig(nil).Validate(); err != nil {
		return fmt.Errorf("aggregator: Config.Kafka: %w", err)
	}
	if err := bus.ValidateTopic(c.poisonTopic()); err != nil {
		return bad("Kafka.ConsumerGroup", "makes an invalid poison topic: %v", err)
	}
	return nil
}

// groupConfig is the consumer group member of the consumer, logging to
// log: it fetches a batch of each partition ahead.
func (c Config) groupConfig(log *slog.Logger) kafka.GroupConsumerConfig {
	return kafka.GroupConsumerConfig{Subscriber: c.Kafka, ReadAhead: c.BatchSize, Logger: log}
}

// poisonTopic is where messages that are not analytics events go.
func (c Config) poisonTopic() string {
	return c.Topics.Poison(strings.TrimPrefix(c.Kafka.ConsumerGroup, c.Topics.Prefix))
}
