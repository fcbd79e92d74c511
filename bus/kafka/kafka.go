package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	wmkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/eventstore"
)

// KafkaVersion is the protocol version our sarama clients speak. 2.1 is
// the oldest that supports idempotent producers with more than one
// in-flight batch and is spoken by Apache Kafka 2.1+ and the stack's broker.
var KafkaVersion = sarama.V2_1_0_0

// Marshaler maps Watermill messages to Kafka records and back in
// watermill-kafka's format (the UUID and the metadata travel as headers).
// The record key is the message's bus.MetadataPartitionKey, so the
// Publisher puts every message of one key on one partition, in order. A
// message without a partition key (or with an empty one) gets no record
// key, and the Publisher puts it on a partition chosen at random: unkeyed
// messages spread over the topic's partitions, with no order among them.
var Marshaler wmkafka.MarshalerUnmarshaler = partitionKeyMarshaler{}

// partitionKeyMarshaler is Marshaler. watermill-kafka's
// NewWithPartitioningMarshaler sets the key even when it is empty, and
// sarama's hash partitioner hashes an empty key like any other (only a
// nil key gets a random partition), which put every unkeyed message on
// one partition.
type partitionKeyMarshaler struct {
	wmkafka.DefaultMarshaler
}

// Marshal returns msg as a record for topic, keyed by its partition key
// when it has one.
func (m partitionKeyMarshaler) Marshal(topic string, msg *message.Message) (*sarama.ProducerMessage, error) {
	rec, err := m.DefaultMarshaler.Marshal(topic, msg)
	if err != nil {
		return nil, err
	}
	if key := msg.Metadata.Get(bus.MetadataPartitionKey); key != "" {
		rec.Key = sarama.StringEncoder(key)
	}
	return rec, nil
}

// PublisherConfig configures a Kafka publisher.
type PublisherConfig struct {
	// Brokers are the seed brokers. Required.
	Brokers []string
	// ClientID names the client in broker logs (default "eventpipe").
	ClientID string
	// Security is how the producer connects: TLS and SASL (default: the
	// zero Security, plain text without authentication).
	Security Security
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
		return fmt.Errorf("kafka: PublisherConfig: %w", &eventstore.ValidationError{Field: "Brokers", Reason: "is empty"})
	}
	if err := c.Security.ValidateFor(c.Brokers); err != nil {
		return fmt.Errorf("kafka: PublisherConfig.Security: %w", err)
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
	// Security is how the subscriber's clients connect: TLS and SASL
	// (default: the zero Security, plain text without authentication).
	Security Security
	// InitialOffset is where the group starts on a partition it has never
	// committed an offset for: sarama.OffsetOldest (the default: a new
	// group reads everything already on the topic) or sarama.OffsetNewest
	// (only records written after the member's claim on the partition
	// starts). Zero means the default; any other value is rejected. A
	// partition with a committed offset always resumes from it.
	InitialOffset int64
	// NackResendSleep is the pause before a nacked message is redelivered
	// (default 100ms).
	NackResendSleep time.Duration
	// ReconnectRetrySleep is the pause between two failed attempts of a
	// subscription to start over with a new client after its consumer
	// group failed, e.g. while the brokers are unreachable (default 1s;
	// watermill-kafka's option of that name, whose first attempt comes
	// without a pause). A stop waits for a pause in progress, so keep it
	// below CloseTimeout. Must not be negative.
	ReconnectRetrySleep time.Duration
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
	// InstanceID, when set, makes each subscription a static member of
	// its group (KIP-345, Kafka 2.3 or later) named InstanceID + "." +
	// topic. A member restarted with the same id while the coordinator
	// still counts its predecessor (within SessionTimeout) takes back its
	// partitions at once, without a rebalance: give it to processes with a
	// stable identity (a StatefulSet's pod name, a systemd unit). A static
	// member does not leave its group when it stops, so its partitions
	// wait for SessionTimeout unless it comes back; and two running
	// processes with one InstanceID fence each other in turn, so each
	// needs its own. Letters, digits, '.', '_' and '-' only. Empty (the
	// default): dynamic membership.
	InstanceID string
	// Logger receives Watermill's logs (default: slog's default logger).
	Logger watermill.LoggerAdapter
}

// maxInstanceID is the longest group.instance.id Kafka accepts (that of
// a topic name).
const maxInstanceID = 249

// validInstanceID reports whether id has only the characters Kafka
// accepts in a group instance id.
func validInstanceID(id string) bool {
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// SubscriptionInstanceID is the static member id of a subscription to
// topic (InstanceID + "." + topic), or "" when c has no InstanceID. It
// fails with an *eventstore.ValidationError when the id would be too long.
func (c SubscriberConfig) SubscriptionInstanceID(topic string) (string, error) {
	if c.InstanceID == "" {
		return "", nil
	}
	id := c.InstanceID + "." + topic
	if len(id) > maxInstanceID || !validInstanceID(id) {
		return "", &eventstore.ValidationError{Field: "InstanceID", Reason: fmt.Sprintf("%q with topic %q makes member id %q: at most %d letters, digits, '.', '_' or '-'", c.InstanceID, topic, id, maxInstanceID)}
	}
	return id, nil
}

func (c *SubscriberConfig) setDefaults() {
	if c.ClientID == "" {
		c.ClientID = "eventpipe"
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
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("kafka: SubscriberConfig: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if len(c.Brokers) == 0 {
		return bad("Brokers", "is empty")
	}
	if c.ConsumerGroup == "" {
		return bad("ConsumerGroup", "is empty")
	}
	if c.InitialOffset != sarama.OffsetOldest && c.InitialOffset != sarama.OffsetNewest {
		return bad("InitialOffset", "%d: must be sarama.OffsetOldest (%d) or sarama.OffsetNewest (%d)", c.InitialOffset, sarama.OffsetOldest, sarama.OffsetNewest)
	}
	if c.ReconnectRetrySleep < 0 {
		return bad("ReconnectRetrySleep", "%s is negative", c.ReconnectRetrySleep)
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"SessionTimeout", c.SessionTimeout}, {"HeartbeatInterval", c.HeartbeatInterval}, {"RebalanceTimeout", c.RebalanceTimeout}, {"CloseTimeout", c.CloseTimeout}} {
		if d.v <= 0 {
			return bad(d.field, "%s: timeouts and the heartbeat interval must be positive", d.v)
		}
	}
	if c.HeartbeatInterval*3 > c.SessionTimeout {
		return bad("HeartbeatInterval", "%s is more than a third of SessionTimeout %s", c.HeartbeatInterval, c.SessionTimeout)
	}
	if c.RebalanceTimeout >= c.SessionTimeout {
		return bad("RebalanceTimeout", "%s must be below SessionTimeout %s", c.RebalanceTimeout, c.SessionTimeout)
	}
	if c.InstanceID != "" && (len(c.InstanceID) >= maxInstanceID || !validInstanceID(c.InstanceID)) {
		return bad("InstanceID", "%q: at most %d letters, digits, '.', '_' or '-'", c.InstanceID, maxInstanceID-1)
	}
	if err := c.Security.ValidateFor(c.Brokers); err != nil {
		return fmt.Errorf("kafka: SubscriberConfig.Security: %w", err)
	}
	return nil
}

// Subscriber is a Watermill subscriber in a Kafka consumer group (see
// NewSubscriber): watermill-kafka's subscriber, one per Subscribe call,
// each stopped within a bound when its context ends or Close is called.
// It implements message.SubscribeInitializer. It is safe for concurrent
// use.
type Subscriber struct {
	cfg SubscriberConfig

	mu     sync.Mutex
	subs   []*subscription
	closed bool
}

var _ message.SubscribeInitializer = (*Subscriber)(nil)

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
	topic    string
	stopping chan struct{} // closed when stop begins
	once     sync.Once
	err      error
}

// NewSubscriber returns a Watermill subscriber in a consumer group. A
// partition the group has no committed offset for starts at InitialOffset:
// by default the oldest record, so a new consumer sees everything already
// on the topic. An acked message's offset is marked and committed by
// sarama about once a second; delivery is at least once, so handlers must
// be idempotent. Each partition hands out one message at a time, the next
// after the previous one was acked, so the messages of a partition key
// arrive in order.
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
// dev/kafkabroker does that). A JoinGroup or SyncGroup that is never
// answered fails after RebalanceTimeout + 5 s, and the subscriber rejoins
// as a new member.
//
// Stopping. When a Subscribe context ends or Close is called, the
// subscription stops consuming, commits what was acked, leaves the group
// and closes its channel; if that has not finished within CloseTimeout (a
// JoinGroup waiting for a rebalance to end), its connections are closed,
// which fails the requests in flight, and it gets CloseTimeout again to
// stop. A pause of ReconnectRetrySleep in progress is waited out.
func NewSubscriber(cfg SubscriberConfig) (*Subscriber, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sc, err := cfg.saramaConfig(&ConnTracker{}, cfg.InstanceID)
	if err == nil {
		err = sc.Validate()
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: kafka subscriber for group %s: %w", cfg.ConsumerGroup, err)
	}
	return &Subscriber{cfg: cfg}, nil
}

// SaramaConfig fills c's defaults, validates it and returns the sarama
// configuration of a consumer group member with c's timeouts: the
// GroupConsumer's, and that of a consumer built on sarama directly. With
// an InstanceID the member is static and named InstanceID itself: a
// process with several members in one group names each with
// SubscriptionInstanceID.
func (c SubscriberConfig) SaramaConfig() (*sarama.Config, error) {
	c.setDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	sc, err := c.saramaConfig(&ConnTracker{}, c.InstanceID)
	if err == nil {
		err = sc.Validate()
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: consumer group %s: %w", c.ConsumerGroup, err)
	}
	return sc, nil
}

// saramaConfig returns the sarama configuration of one subscription,
// dialing through conns (sarama runs TLS over the connections it dials),
// a static member named instanceID when that is set.
func (c SubscriberConfig) saramaConfig(conns *ConnTracker, instanceID string) (*sarama.Config, error) {
	sc := wmkafka.DefaultSaramaSubscriberConfig()
	if err := c.Security.ApplySarama(sc); err != nil {
		return nil, err
	}
	sc.Version = KafkaVersion
	if instanceID != "" {
		if !sc.Version.IsAtLeast(sarama.V2_3_0_0) {
			sc.Version = sarama.V2_3_0_0 // the first to speak static membership
		}
		sc.Consumer.Group.InstanceId = instanceID
	}
	sc.ClientID = c.ClientID
	sc.Consumer.Offsets.Initial = c.InitialOffset
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
	return sc, nil
}

// Subscribe consumes topic as a member of the group until ctx ends or
// Close is called, and returns the channel its messages arrive on. When
// ctx ends the subscription stops on its own, as Close stops it (see
// NewSubscriber): it leaves the group, its channel is closed and the
// Subscriber forgets it; the Subscriber's other subscriptions go on. A
// message's context derives from ctx and is cancelled once the message is
// acked or when the subscription stops (a nacked message is redelivered
// with the same context). Subscribe fails after Close.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	conns := &ConnTracker{}
	instanceID, err := s.cfg.SubscriptionInstanceID(topic)
	if err != nil {
		return nil, fmt.Errorf("kafka: subscribe to %s in group %s: %w", topic, s.cfg.ConsumerGroup, err)
	}
	sc, err := s.cfg.saramaConfig(conns, instanceID)
	if err != nil {
		return nil, fmt.Errorf("kafka: kafka subscriber for group %s: %w", s.cfg.ConsumerGroup, err)
	}
	inner, err := wmkafka.NewSubscriber(wmkafka.SubscriberConfig{
		Brokers:               s.cfg.Brokers,
		Unmarshaler:           Marshaler,
		OverwriteSaramaConfig: sc,
		ConsumerGroup:         s.cfg.ConsumerGroup,
		NackResendSleep:       s.cfg.NackResendSleep,
		ReconnectRetrySleep:   s.cfg.ReconnectRetrySleep,
	}, s.cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("kafka: kafka subscriber for group %s: %w", s.cfg.ConsumerGroup, err)
	}
	sub := &subscription{inner: inner, conns: conns, topic: topic, stopping: make(chan struct{})}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("kafka: subscribe to %s in group %s: subscriber closed", topic, s.cfg.ConsumerGroup)
	}
	if instanceID != "" && slices.ContainsFunc(s.subs, func(o *subscription) bool { return o.topic == topic }) {
		s.mu.Unlock()
		return nil, fmt.Errorf("kafka: subscribe to %s in group %s: %w", topic, s.cfg.ConsumerGroup,
			&eventstore.ValidationError{Field: "InstanceID", Reason: fmt.Sprintf("static member %q already subscribes to %s: a second subscription would fence it", instanceID, topic)})
	}
	s.subs = append(s.subs, sub)
	s.mu.Unlock()
	out, err := inner.Subscribe(ctx, topic)
	if err != nil {
		_ = sub.stop(s.cfg)
		s.forget(sub)
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
		s.forget(sub)
	}()
	return out, nil
}

// forget drops a stopped subscription from the ones Close stops.
func (s *Subscriber) forget(sub *subscription) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.Index(s.subs, sub); i >= 0 {
		s.subs = slices.Delete(s.subs, i, i+1)
	}
}

// Close stops every subscription still running (see NewSubscriber) and
// returns when they have stopped, or with an error naming the bound they
// missed. Later calls return nil at once.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	s.closed = true
	subs := s.subs
	s.subs = nil
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

// SubscribeInitialize creates topic, if it does not exist yet, with the
// broker's default partition count and replication factor (CreateTopics
// with -1 for both, KIP-464: Kafka 2.4 or later, and the stack's broker);
// a topic that exists, whatever its settings, is success and left as it
// is. Watermill's components call it before Subscribe on subscribers that
// implement message.SubscribeInitializer. It needs no Subscribe and works
// after Close.
func (s *Subscriber) SubscribeInitialize(topic string) error {
	sc := sarama.NewConfig()
	if err := s.cfg.Security.ApplySarama(sc); err != nil {
		return fmt.Errorf("kafka: initialize topic %s: %w", topic, err)
	}
	sc.Version = KafkaVersion
	sc.ClientID = s.cfg.ClientID
	admin, err := sarama.NewClusterAdmin(s.cfg.Brokers, sc)
	if err != nil {
		return fmt.Errorf("kafka: initialize topic %s: %w", topic, s.cfg.Security.wrapConnErr("cluster admin", s.cfg.Brokers, err))
	}
	defer admin.Close()
	err = admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: -1, ReplicationFactor: -1}, false)
	if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		return fmt.Errorf("kafka: initialize topic %s: %w", topic, err)
	}
	return nil
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
