package bus

import (
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
)

// MetadataPartitionKey is the message metadata field whose value becomes
// the Kafka record key, and so picks the partition. Everything published
// for one aggregate carries the aggregate id here, which keeps its messages
// in order on one partition.
const MetadataPartitionKey = "partition_key"

// KafkaVersion is the protocol version our sarama clients speak. 2.1 is
// the oldest that supports idempotent producers with more than one
// in-flight batch and is spoken by Apache Kafka 2.1+ and the stack's broker.
var KafkaVersion = sarama.V2_1_0_0

// Marshaler maps Watermill messages to Kafka records keyed by
// MetadataPartitionKey (messages without one get no key and are spread
// round-robin).
var Marshaler = kafka.NewWithPartitioningMarshaler(func(_ string, msg *message.Message) (string, error) {
	return msg.Metadata.Get(MetadataPartitionKey), nil
})

// PublisherConfig configures a Kafka publisher.
type PublisherConfig struct {
	// Brokers are the seed brokers. Required.
	Brokers []string
	// ClientID names the client in broker logs (default "eventpipe").
	ClientID string
	// Logger receives Watermill's logs (default: slog's default logger).
	Logger watermill.LoggerAdapter
}

func (c *PublisherConfig) setDefaults() {
	if c.ClientID == "" {
		c.ClientID = "eventpipe"
	}
	if c.Logger == nil {
		c.Logger = watermill.NewSlogLogger(nil)
	}
}

// Validate reports the first invalid field.
func (c PublisherConfig) Validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("bus: PublisherConfig.Brokers is empty")
	}
	return nil
}

// SubscriberConfig configures a Kafka subscriber.
type SubscriberConfig struct {
	// Brokers are the seed brokers. Required.
	Brokers []string
	// ConsumerGroup is the group whose committed offsets this subscriber
	// resumes from. Required: every eventpipe consumer is a group member.
	ConsumerGroup string
	// ClientID names the client in broker logs (default "eventpipe").
	ClientID string
	// NackResendSleep is the pause before a nacked message is redelivered
	// (default 100ms).
	NackResendSleep time.Duration
	// Logger receives Watermill's logs (default: slog's default logger).
	Logger watermill.LoggerAdapter
}

func (c *SubscriberConfig) setDefaults() {
	if c.ClientID == "" {
		c.ClientID = "eventpipe"
	}
	if c.NackResendSleep == 0 {
		c.NackResendSleep = 100 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = watermill.NewSlogLogger(nil)
	}
}

// Validate reports the first invalid field.
func (c SubscriberConfig) Validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("bus: SubscriberConfig.Brokers is empty")
	}
	if c.ConsumerGroup == "" {
		return errors.New("bus: SubscriberConfig.ConsumerGroup is empty")
	}
	return nil
}

// NewSubscriber returns a Watermill subscriber in a consumer group. A group
// with no committed offset starts from the oldest record, so a new consumer
// sees everything already on the topic. An acked message's offset is marked
// and committed by sarama about once a second; delivery is at least once,
// so handlers must be idempotent.
func NewSubscriber(cfg SubscriberConfig) (*kafka.Subscriber, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sc := kafka.DefaultSaramaSubscriberConfig()
	sc.Version = KafkaVersion
	sc.ClientID = cfg.ClientID
	sc.Consumer.Offsets.Initial = sarama.OffsetOldest
	// A member that dies without leaving (kill -9) holds up a rebalance
	// until the rebalance timeout; it must also stay below the client's
	// 30 s read timeout, or a joining member's JoinGroup times out and
	// the group never settles. 10 s bounds the pause after a crash.
	sc.Consumer.Group.Rebalance.Timeout = 10 * time.Second
	sc.Consumer.Group.Session.Timeout = 10 * time.Second
	sc.Consumer.Group.Heartbeat.Interval = 3 * time.Second
	// The longest a fetch waits for new records: bounds the latency an
	// idle partition adds (the local broker does not answer a waiting
	// fetch early when records arrive).
	sc.Consumer.MaxWaitTime = 100 * time.Millisecond
	sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{
		Brokers:               cfg.Brokers,
		Unmarshaler:           Marshaler,
		OverwriteSaramaConfig: sc,
		ConsumerGroup:         cfg.ConsumerGroup,
		NackResendSleep:       cfg.NackResendSleep,
		ReconnectRetrySleep:   time.Second,
	}, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("bus: kafka subscriber for group %s: %w", cfg.ConsumerGroup, err)
	}
	return sub, nil
}
