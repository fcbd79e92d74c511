package keyed

import (
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"

	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/eventstore"
)

// ErrClosed is returned by Subscribe after Close.
var ErrClosed = errors.New("keyed: subscriber closed")

// ConfigError reports an invalid Config field.
//
// Deprecated: ConfigError is an alias of *eventstore.ValidationError, the
// one config error type of the library, kept for compatibility; match
// *eventstore.ValidationError instead. A Security error is the
// *eventstore.ValidationError of Security.ValidateFor, wrapped.
type ConfigError = eventstore.ValidationError

// Config configures a Subscriber. The group timeouts are those of
// bus/kafka.SubscriberConfig (a zero value takes its default) and the
// sarama configuration is its SaramaConfig, so both subscribers join
// groups the same way.
type Config struct {
	// Brokers are the seed brokers. Required.
	Brokers []string
	// ConsumerGroup is the group whose committed offsets the subscriber
	// resumes from. Required.
	ConsumerGroup string
	// ClientID names the client in broker logs (default "eventpipe").
	ClientID string
	// Security is how the subscriber's clients connect: TLS and SASL
	// (default: the zero Security, plain text without authentication).
	Security kafka.Security
	// MaxInFlight bounds, per partition, the records read past the
	// partition's last commit: handed out and not yet acked, waiting
	// behind an earlier message of their key, or acked but not yet
	// committed (default 256). It is also the most a crash makes one
	// partition redeliver, as long as commits succeed.
	MaxInFlight int
	// InitialOffset is where the group starts on a partition it has never
	// committed an offset for: sarama.OffsetOldest (the default: a new
	// group reads everything already on the topic) or sarama.OffsetNewest
	// (only records written after the member's claim on the partition
	// starts). Zero means the default; any other value is rejected. A
	// partition with a committed offset always resumes from it.
	InitialOffset int64
	// NackResendSleep is the pause before a nacked message is handed out
	// again (default 100ms; zero means the default, negative is
	// rejected). Later messages of its key wait; other keys keep flowing.
	// A revoke ends the pause, and the message is left to the partition's
	// next owner.
	NackResendSleep time.Duration
	// ReconnectRetrySleep is the pause before a subscription whose consumer
	// group failed (Consume returned an error, e.g. the brokers are
	// unreachable) starts over with a new client, and again after each
	// failed attempt to (default 1s; zero means the default, negative is
	// rejected). Stopping the subscription ends the pause at once.
	ReconnectRetrySleep time.Duration
	// CommitInterval is the longest an acked message waits before its
	// offset is committed (default 200ms). A partition whose window is
	// half full of acked messages asks for a commit at once.
	CommitInterval time.Duration
	// RevokeTimeout bounds how long a revoked partition (rebalance, Close,
	// end of the Subscribe context) waits for the messages it handed out
	// to be acked before it abandons them: their contexts are cancelled
	// and they are redelivered to the partition's next owner (default
	// 3s). Below the rebalance timeout.
	RevokeTimeout time.Duration
	// SessionTimeout is kafka.SubscriberConfig.SessionTimeout.
	SessionTimeout time.Duration
	// HeartbeatInterval is kafka.SubscriberConfig.HeartbeatInterval.
	HeartbeatInterval time.Duration
	// RebalanceTimeout is kafka.SubscriberConfig.RebalanceTimeout.
	RebalanceTimeout time.Duration
	// CloseTimeout bounds how long stopping a subscription waits, after
	// RevokeTimeout, to leave the group cleanly before it aborts the
	// requests in flight by closing its connections (see
	// kafka.SubscriberConfig.CloseTimeout; default 3s).
	CloseTimeout time.Duration
	// InstanceID, when set, makes each subscription a static group member
	// named InstanceID + "." + topic: a member restarted with the same id
	// takes back its partitions without a rebalance. See
	// bus/kafka.SubscriberConfig.InstanceID for when to set it.
	InstanceID string
	// Logger receives the subscriber's logs (default: slog's default
	// logger).
	Logger watermill.LoggerAdapter
}

func (c *Config) setDefaults() {
	if c.ClientID == "" {
		c.ClientID = "eventpipe"
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 256
	}
	if c.InitialOffset == 0 {
		c.InitialOffset = sarama.OffsetOldest
	}
	if c.NackResendSleep == 0 {
		c.NackResendSleep = 100 * time.Millisecond
	}
	if c.ReconnectRetrySleep == 0 {
		c.ReconnectRetrySleep = time.Second
	}
	if c.CommitInterval == 0 {
		c.CommitInterval = 200 * time.Millisecond
	}
	if c.RevokeTimeout == 0 {
		c.RevokeTimeout = 3 * time.Second
	}
	if c.CloseTimeout == 0 {
		c.CloseTimeout = 3 * time.Second
	}
	if c.Logger == nil {
		c.Logger = watermill.NewSlogLogger(nil)
	}
}

// Validate reports the first invalid field as a wrapped
// *eventstore.ValidationError naming it (the group timeouts are checked as
// bus/kafka checks them).
func (c Config) Validate() error {
	if err := c.validate(); err != nil {
		return fmt.Errorf("keyed: Config: %w", err)
	}
	return nil
}

func (c Config) validate() error {
	if len(c.Brokers) == 0 {
		return &eventstore.ValidationError{Field: "Brokers", Reason: "empty"}
	}
	if c.ConsumerGroup == "" {
		return &eventstore.ValidationError{Field: "ConsumerGroup", Reason: "empty"}
	}
	if c.MaxInFlight < 1 {
		return &eventstore.ValidationError{Field: "MaxInFlight", Reason: fmt.Sprintf("%d: must be at least 1", c.MaxInFlight)}
	}
	if c.InitialOffset != sarama.OffsetOldest && c.InitialOffset != sarama.OffsetNewest {
		return &eventstore.ValidationError{Field: "InitialOffset", Reason: fmt.Sprintf("%d: must be sarama.OffsetOldest (%d) or sarama.OffsetNewest (%d)",
			c.InitialOffset, sarama.OffsetOldest, sarama.OffsetNewest)}
	}
	if c.NackResendSleep < 0 {
		return &eventstore.ValidationError{Field: "NackResendSleep", Reason: "negative"}
	}
	if c.ReconnectRetrySleep < 0 {
		return &eventstore.ValidationError{Field: "ReconnectRetrySleep", Reason: "negative"}
	}
	if c.CommitInterval <= 0 {
		return &eventstore.ValidationError{Field: "CommitInterval", Reason: "must be positive"}
	}
	if c.RevokeTimeout <= 0 {
		return &eventstore.ValidationError{Field: "RevokeTimeout", Reason: "must be positive"}
	}
	if c.CloseTimeout <= 0 {
		return &eventstore.ValidationError{Field: "CloseTimeout", Reason: "must be positive"}
	}
	if err := c.Security.ValidateFor(c.Brokers); err != nil {
		return fmt.Errorf("field Security: %w", err)
	}
	sc, err := c.groupConfig().SaramaConfig()
	if ve := new(eventstore.ValidationError); errors.As(err, &ve) {
		// the group fields are Config's own, under the same names
		return &eventstore.ValidationError{Field: ve.Field, Reason: ve.Reason}
	} else if err != nil {
		return &eventstore.ValidationError{Field: "SessionTimeout/HeartbeatInterval/RebalanceTimeout", Reason: err.Error()}
	}
	if rt := sc.Consumer.Group.Rebalance.Timeout; c.RevokeTimeout >= rt {
		return &eventstore.ValidationError{Field: "RevokeTimeout", Reason: fmt.Sprintf("%s must be below the rebalance timeout %s", c.RevokeTimeout, rt)}
	}
	return nil
}

// groupConfig is the bus/kafka subscriber configuration whose group
// settings this subscriber shares.
func (c Config) groupConfig() kafka.SubscriberConfig {
	return kafka.SubscriberConfig{
		Brokers:             c.Brokers,
		ConsumerGroup:       c.ConsumerGroup,
		ClientID:            c.ClientID,
		Security:            c.Security,
		InitialOffset:       c.InitialOffset,
		NackResendSleep:     c.NackResendSleep,
		ReconnectRetrySleep: c.ReconnectRetrySleep,
		SessionTimeout:      c.SessionTimeout,
		HeartbeatInterval:   c.HeartbeatInterval,
		RebalanceTimeout:    c.RebalanceTimeout,
		CloseTimeout:        c.CloseTimeout,
		InstanceID:          c.InstanceID,
		Logger:              c.Logger,
	}
}

// saramaConfig is the sarama configuration of one subscription, dialing
// through conns. Offsets are still auto-committed by sarama (and flushed
// when a session ends); the subscriber commits explicitly as well, to
// know what is committed.
func (c Config) saramaConfig(conns *kafka.ConnTracker, topic string) (*sarama.Config, error) {
	sc, err := c.groupConfig().SaramaConfig()
	if err != nil {
		return nil, err
	}
	if sc.Consumer.Group.InstanceId, err = c.groupConfig().SubscriptionInstanceID(topic); err != nil {
		return nil, err
	}
	sc.Consumer.Return.Errors = true
	sc.Consumer.Offsets.AutoCommit.Enable = true
	// Fetch no more than the window can take in a while.
	sc.ChannelBufferSize = min(sc.ChannelBufferSize, c.MaxInFlight)
	// Fetch 64 KiB per partition and request (sarama's default is 1 MiB;
	// it doubles the size for a record that does not fit): a consumer
	// joining a backlog gets its first records after one small response
	// instead of a megabyte per partition (measured: 0.2 s instead of
	// 0.6 s to the first applied batch over 12 partitions), and the
	// window takes no more than that at a time anyway.
	sc.Consumer.Fetch.Default = 64 << 10
	conns.Dialer.Timeout = sc.Net.DialTimeout
	conns.Dialer.KeepAlive = sc.Net.KeepAlive
	sc.Net.Proxy.Enable = true
	sc.Net.Proxy.Dialer = conns
	return sc, nil
}
