package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	wmkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus"
)

// KafkaVersion is the protocol version our sarama clients speak. 2.1 is
// the oldest that supports idempotent producers with more than one
// in-flight batch and is spoken by Apache Kafka 2.1+ and the stack's broker.
var KafkaVersion = sarama.V2_1_0_0

// Marshaler maps Watermill messages to Kafka records keyed by
// bus.MetadataPartitionKey (messages without one get no key and are spread
// round-robin).
var Marshaler = wmkafka.NewWithPartitioningMarshaler(func(_ string, msg *message.Message) (string, error) {
	return msg.Metadata.Get(bus.MetadataPartitionKey), nil
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
		return errors.New("kafka: PublisherConfig.Brokers is empty")
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
	// SessionTimeout is how long the group coordinator waits for a
	// heartbeat before it declares the member dead and hands its
	// partitions to the others (default 10s). The partitions of a
	// crashed member pause for about this long, plus a heartbeat interval
	// and a rejoin.
	SessionTimeout time.Duration
	// HeartbeatInterval is the pause between heartbeats (default 1s); a
	// member learns of a rebalance from its next heartbeat, so this adds
	// to every rebalance. At most a third of SessionTimeout.
	HeartbeatInterval time.Duration
	// RebalanceTimeout is how long a rebalance waits for every member to
	// rejoin, and how long the group waits for the leader's assignment
	// before it starts over (default 8s). A member still finishing a
	// message when the rebalance starts must rejoin within it. Below
	// SessionTimeout: see NewSubscriber.
	RebalanceTimeout time.Duration
	// CloseTimeout bounds how long Close waits for the subscriber to
	// leave its group cleanly (finish, commit offsets, LeaveGroup) before
	// it aborts the requests still in flight by closing the subscriber's
	// connections: a member waiting in a JoinGroup during a rebalance
	// would otherwise hold Close until the rebalance ends (default 3s).
	CloseTimeout time.Duration
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
	if c.SessionTimeout == 0 {
		c.SessionTimeout = 10 * time.Second
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = time.Second
	}
	if c.RebalanceTimeout == 0 {
		c.RebalanceTimeout = 8 * time.Second
	}
	if c.CloseTimeout == 0 {
		c.CloseTimeout = 3 * time.Second
	}
	if c.Logger == nil {
		c.Logger = watermill.NewSlogLogger(nil)
	}
}

// Validate reports the first invalid field.
func (c SubscriberConfig) Validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("kafka: SubscriberConfig.Brokers is empty")
	}
	if c.ConsumerGroup == "" {
		return errors.New("kafka: SubscriberConfig.ConsumerGroup is empty")
	}
	if c.SessionTimeout <= 0 || c.HeartbeatInterval <= 0 || c.RebalanceTimeout <= 0 || c.CloseTimeout <= 0 {
		return errors.New("kafka: SubscriberConfig: timeouts and the heartbeat interval must be positive")
	}
	if c.HeartbeatInterval*3 > c.SessionTimeout {
		return fmt.Errorf("kafka: SubscriberConfig.HeartbeatInterval %s is more than a third of SessionTimeout %s", c.HeartbeatInterval, c.SessionTimeout)
	}
	if c.RebalanceTimeout >= c.SessionTimeout {
		return fmt.Errorf("kafka: SubscriberConfig.RebalanceTimeout %s must be below SessionTimeout %s", c.RebalanceTimeout, c.SessionTimeout)
	}
	return nil
}

// Subscriber is a Watermill subscriber in a Kafka consumer group (see
// NewSubscriber): watermill-kafka's subscriber, one per Subscribe call,
// each stopped within a bound when its context ends or Close is called.
type Subscriber struct {
	cfg SubscriberConfig

	mu     sync.Mutex
	subs   []*subscription
	closed bool
}

// Subscribers returns a bus.SubscriberConstructor that builds a Kafka
// subscriber from cfg for each consumer group it is asked for (cfg's own
// ConsumerGroup is ignored). cfg is validated on each call.
func Subscribers(cfg SubscriberConfig) bus.SubscriberConstructor {
	return func(group string) (message.Subscriber, error) {
		c := cfg
		c.ConsumerGroup = group
		return NewSubscriber(c)
	}
}

// subscription is one Subscribe call: its own watermill-kafka subscriber,
// whose sarama clients dial through their own connection tracker.
type subscription struct {
	inner    *wmkafka.Subscriber
	conns    *ConnTracker
	stopping chan struct{} // closed when stop begins
	once     sync.Once
	err      error
}

// NewSubscriber returns a Watermill subscriber in a consumer group. A group
// with no committed offset starts from the oldest record, so a new consumer
// sees everything already on the topic. An acked message's offset is marked
// and committed by sarama about once a second; delivery is at least once,
// so handlers must be idempotent.
//
// Crashes. A member that dies without leaving (kill -9) keeps its
// partitions until the coordinator misses its heartbeats for
// SessionTimeout; its partitions then pause for about SessionTimeout plus
// a heartbeat interval and a rejoin. A rebalance waits at most
// RebalanceTimeout for members that do not rejoin, and a group whose
// leader died between its JoinGroup answer and its SyncGroup starts over
// after RebalanceTimeout. So after the last of any series of crashes the
// group works again within about SessionTimeout + RebalanceTimeout (18 s
// with the defaults), usually within SessionTimeout. RebalanceTimeout is
// kept below SessionTimeout so that the coordinator gives up on a member
// that never sends its SyncGroup before the session of the members that
// did could run out (kfake, the local broker, does not suspend the
// session of a member waiting for an answer; its guard in
// internal/kafkabroker does that). A JoinGroup or SyncGroup that is never
// answered fails after RebalanceTimeout + 5 s, and the subscriber rejoins
// as a new member.
//
// Stopping. When a Subscribe context ends or Close is called, the
// subscription stops consuming and leaves the group; if that has not
// finished within CloseTimeout (a JoinGroup waiting for a rebalance to
// end), its connections are closed, which fails the requests in flight,
// and it gets CloseTimeout again to stop.
func NewSubscriber(cfg SubscriberConfig) (*Subscriber, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.saramaConfig(&ConnTracker{}).Validate(); err != nil {
		return nil, fmt.Errorf("kafka: kafka subscriber for group %s: %w", cfg.ConsumerGroup, err)
	}
	return &Subscriber{cfg: cfg}, nil
}

// SaramaConfig fills c's defaults, validates it and returns the sarama
// configuration of a consumer group member with c's timeouts, for a
// consumer that talks to sarama directly (one that needs batches of a
// partition or its offsets, as analytics/aggregator does).
func (c SubscriberConfig) SaramaConfig() (*sarama.Config, error) {
	c.setDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	sc := c.saramaConfig(&ConnTracker{})
	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("kafka: consumer group %s: %w", c.ConsumerGroup, err)
	}
	return sc, nil
}

// saramaConfig returns the sarama configuration of one subscription,
// dialing through conns.
func (c SubscriberConfig) saramaConfig(conns *ConnTracker) *sarama.Config {
	sc := wmkafka.DefaultSaramaSubscriberConfig()
	sc.Version = KafkaVersion
	sc.ClientID = c.ClientID
	sc.Consumer.Offsets.Initial = sarama.OffsetOldest
	sc.Consumer.Group.Session.Timeout = c.SessionTimeout
	sc.Consumer.Group.Heartbeat.Interval = c.HeartbeatInterval
	sc.Consumer.Group.Rebalance.Timeout = c.RebalanceTimeout
	// sarama uses one read timeout for every request, and a JoinGroup
	// legitimately waits up to the rebalance timeout; as Kafka's own
	// clients do, allow that plus 5 s. A JoinGroup or SyncGroup the
	// coordinator never answers then fails after this long instead of
	// sarama's default 30 s, and watermill-kafka rejoins with a new client.
	sc.Net.ReadTimeout = c.RebalanceTimeout + 5*time.Second
	// A SyncGroup answered REBALANCE_IN_PROGRESS (a member joined or
	// died while the group was completing a rebalance) makes sarama join
	// again after this backoff; the default 2 s adds to every such
	// rebalance. After Max retries Consume fails and watermill-kafka
	// starts a new client, which joins as a new member.
	sc.Consumer.Group.Rebalance.Retry.Backoff = 250 * time.Millisecond
	sc.Consumer.Group.Rebalance.Retry.Max = 20
	// The longest a fetch waits for new records: bounds the latency an
	// idle partition adds (the local broker does not answer a waiting
	// fetch early when records arrive).
	sc.Consumer.MaxWaitTime = 100 * time.Millisecond
	// Every connection of the subscription's clients goes through the
	// tracker, so that stopping can abort requests that would hold it.
	conns.Dialer = net.Dialer{Timeout: sc.Net.DialTimeout, KeepAlive: sc.Net.KeepAlive}
	sc.Net.Proxy.Enable = true
	sc.Net.Proxy.Dialer = conns
	return sc
}

// Subscribe consumes topic as a member of the group until ctx ends or
// Close is called; the returned channel is closed then.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	conns := &ConnTracker{}
	inner, err := wmkafka.NewSubscriber(wmkafka.SubscriberConfig{
		Brokers:               s.cfg.Brokers,
		Unmarshaler:           Marshaler,
		OverwriteSaramaConfig: s.cfg.saramaConfig(conns),
		ConsumerGroup:         s.cfg.ConsumerGroup,
		NackResendSleep:       s.cfg.NackResendSleep,
		ReconnectRetrySleep:   time.Second,
	}, s.cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("kafka: kafka subscriber for group %s: %w", s.cfg.ConsumerGroup, err)
	}
	sub := &subscription{inner: inner, conns: conns, stopping: make(chan struct{})}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("kafka: subscribe to %s in group %s: subscriber closed", topic, s.cfg.ConsumerGroup)
	}
	s.subs = append(s.subs, sub)
	s.mu.Unlock()
	out, err := inner.Subscribe(ctx, topic)
	if err != nil {
		_ = sub.stop(s.cfg)
		return nil, fmt.Errorf("kafka: subscribe to %s in group %s: %w", topic, s.cfg.ConsumerGroup, err)
	}
	go func() {
		select {
		case <-ctx.Done():
			if err := sub.stop(s.cfg); err != nil {
				s.cfg.Logger.Error("Subscription did not stop", err, watermill.LogFields{"topic": topic, "consumer_group": s.cfg.ConsumerGroup})
			}
		case <-sub.stopping:
		}
	}()
	return out, nil
}

// Close stops every subscription (see NewSubscriber) and returns when
// they have stopped, or with an error naming the bound they missed.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	s.closed = true
	subs := s.subs
	s.mu.Unlock()
	errs := make(chan error, len(subs))
	for _, sub := range subs {
		go func() { errs <- sub.stop(s.cfg) }()
	}
	var all []error
	for range subs {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// stop closes the subscription within twice cfg.CloseTimeout; only the
// first call does the work, later ones return its result.
func (sub *subscription) stop(cfg SubscriberConfig) error {
	sub.once.Do(func() {
		close(sub.stopping)
		done := make(chan error, 1)
		go func() { done <- sub.inner.Close() }()
		timer := time.NewTimer(cfg.CloseTimeout)
		defer timer.Stop()
		select {
		case sub.err = <-done:
			return
		case <-timer.C:
		}
		n := sub.conns.CloseAll()
		cfg.Logger.Info("Subscription still stopping; aborted its Kafka requests in flight", watermill.LogFields{
			"consumer_group": cfg.ConsumerGroup, "after": cfg.CloseTimeout.String(), "connections": n})
		timer.Reset(cfg.CloseTimeout)
		select {
		case sub.err = <-done:
		case <-timer.C:
			sub.conns.CloseAll()
			sub.err = fmt.Errorf("kafka: subscriber of group %s did not stop within %s of aborting its requests", cfg.ConsumerGroup, cfg.CloseTimeout)
		}
	})
	return sub.err
}

// ConnTracker dials a subscription's connections (set it as sarama's
// Net.Proxy.Dialer) and can close every one that is open, which fails the
// requests in flight: a JoinGroup waiting for a rebalance would otherwise
// hold a stop until the rebalance ends. The keyed subscriber uses it too.
type ConnTracker struct {
	// Dialer dials each connection.
	Dialer net.Dialer
	mu     sync.Mutex
	open   map[*trackedConn]struct{}
}

// Dial implements sarama's proxy.Dialer.
func (t *ConnTracker) Dial(network, addr string) (net.Conn, error) {
	c, err := t.Dialer.Dial(network, addr)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, t: t}
	t.mu.Lock()
	if t.open == nil {
		t.open = map[*trackedConn]struct{}{}
	}
	t.open[tc] = struct{}{}
	t.mu.Unlock()
	return tc, nil
}

// CloseAll closes every open connection and returns how many there were.
func (t *ConnTracker) CloseAll() int {
	t.mu.Lock()
	conns := make([]*trackedConn, 0, len(t.open))
	for c := range t.open {
		conns = append(conns, c)
	}
	t.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	return len(conns)
}

type trackedConn struct {
	net.Conn
	t *ConnTracker
}

func (c *trackedConn) Close() error {
	c.t.mu.Lock()
	delete(c.t.open, c)
	c.t.mu.Unlock()
	return c.Conn.Close()
}
