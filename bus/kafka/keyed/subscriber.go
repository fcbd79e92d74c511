package keyed

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/eventstore"
)

// Subscriber is a Watermill subscriber in a Kafka consumer group that
// hands out many messages of a partition at once while the messages of
// one key stay in order (see the package documentation). Each Subscribe
// call is its own group member. It implements
// message.SubscribeInitializer. It is safe for concurrent use.
type Subscriber struct {
	cfg Config

	mu     sync.Mutex
	subs   []*subscription
	closed bool
}

// New validates cfg (after filling its defaults) and returns a
// Subscriber. It does not connect: Subscribe does.
func New(cfg Config) (*Subscriber, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Subscriber{cfg: cfg}, nil
}

var _ message.SubscribeInitializer = (*Subscriber)(nil)

// Subscribers returns a bus.SubscriberConstructor that builds a keyed
// Subscriber from cfg for each consumer group it is asked for (cfg's own
// ConsumerGroup is ignored), as bus/kafka.Subscribers does; the package
// documentation says where it can take that one's place.
func Subscribers(cfg Config) bus.SubscriberConstructor {
	return func(group string) (message.Subscriber, error) {
		c := cfg
		c.ConsumerGroup = group
		return New(c)
	}
}

// Subscribe joins the group as a new member consuming topic and returns
// the channel its messages arrive on; a partition the group has no
// committed offset for starts at InitialOffset (by default the oldest
// record). The first connection is made before it returns (its failure is
// returned); later failures are logged and the member rejoins with a new
// client after ReconnectRetrySleep. When ctx ends the subscription stops
// on its own, as Close stops it (see Close): it commits, leaves the group,
// its channel is closed and the Subscriber forgets it, while its other
// subscriptions go on. Each message handed out has its own context,
// derived from ctx and carrying its partition and offset
// (MessagePartitionFromCtx), which is cancelled once that message is
// acked or nacked (a redelivery after a nack gets a new one), or when its
// partition is revoked without it being acked. It returns an error
// wrapping ErrClosed after Close.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	closedErr := fmt.Errorf("keyed: subscribe to %s in group %s: %w", topic, s.cfg.ConsumerGroup, ErrClosed)
	s.mu.Lock()
	closed := s.closed
	twice := s.cfg.InstanceID != "" && slices.ContainsFunc(s.subs, func(o *subscription) bool { return o.topic == topic })
	s.mu.Unlock()
	if closed {
		return nil, closedErr
	}
	if twice {
		return nil, fmt.Errorf("keyed: subscribe to %s in group %s: %w", topic, s.cfg.ConsumerGroup,
			&eventstore.ValidationError{Field: "InstanceID", Reason: "a static member already subscribes to " + topic + ": a second subscription would fence it"})
	}
	sub := &subscription{
		cfg: &s.cfg, topic: topic, ctx: ctx,
		out: make(chan *message.Message), stopping: make(chan struct{}), done: make(chan struct{}),
		conns:     &kafka.ConnTracker{},
		logFields: watermill.LogFields{"topic": topic, "consumer_group": s.cfg.ConsumerGroup},
	}
	client, group, err := sub.connect()
	if err != nil {
		return nil, fmt.Errorf("keyed: subscribe to %s in group %s: %w", topic, s.cfg.ConsumerGroup, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed { // Close ran while this call connected
		_ = group.Close()
		_ = client.Close()
		return nil, closedErr
	}
	sub.consumeCtx, sub.cancelConsume = context.WithCancel(ctx)
	s.subs = append(s.subs, sub)
	go sub.run(client, group)
	go func() {
		select {
		case <-ctx.Done():
			if err := sub.stop(); err != nil {
				s.cfg.Logger.Error("Subscription did not stop", err, sub.logFields)
			}
		case <-sub.stopping:
		}
		s.forget(sub)
	}()
	return sub.out, nil
}

// forget drops a stopped subscription from the ones Close stops.
func (s *Subscriber) forget(sub *subscription) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.Index(s.subs, sub); i >= 0 {
		s.subs = slices.Delete(s.subs, i, i+1)
	}
}

// SubscribeInitialize creates topic if it does not exist yet, with the
// broker's default partition count and replication factor; a topic that
// exists is success and left as it is (see
// bus/kafka.Subscriber.SubscribeInitialize, which it uses). It needs no
// Subscribe and works after Close.
func (s *Subscriber) SubscribeInitialize(topic string) error {
	ks, err := kafka.NewSubscriber(s.cfg.groupConfig())
	if err != nil {
		return fmt.Errorf("keyed: initialize topic %s: %w", topic, err)
	}
	if err := ks.SubscribeInitialize(topic); err != nil {
		return fmt.Errorf("keyed: %w", err)
	}
	return nil
}

// Close stops every subscription still running and returns once they
// have stopped, or with an error naming the bound one missed. Stopping a
// subscription revokes its partitions: nothing more is handed out,
// messages in flight get up to RevokeTimeout to be acked, the contiguous
// acked offsets are committed and the member leaves its group. If that
// takes longer than RevokeTimeout plus CloseTimeout (a JoinGroup waiting
// for a rebalance), its connections are closed, failing the requests in
// flight, and it gets CloseTimeout more. Close is idempotent.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	s.closed = true
	subs := s.subs
	s.subs = nil
	s.mu.Unlock()
	errs := make(chan error, len(subs))
	for _, sub := range subs {
		go func() { errs <- sub.stop() }()
	}
	var all []error
	for range subs {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// subscription is one Subscribe call: one group member, one client at a
// time.
type subscription struct {
	cfg           *Config
	topic         string
	ctx           context.Context // the Subscribe context
	consumeCtx    context.Context // ends with ctx or stop
	cancelConsume context.CancelFunc
	out           chan *message.Message
	stopping      chan struct{} // closed when stop begins
	done          chan struct{} // closed when run has returned
	conns         *kafka.ConnTracker
	logFields     watermill.LogFields

	once sync.Once
	err  error
}

// connect makes a client and a consumer group on it.
func (sub *subscription) connect() (sarama.Client, sarama.ConsumerGroup, error) {
	sc, err := sub.cfg.saramaConfig(sub.conns, sub.topic)
	if err != nil {
		return nil, nil, err
	}
	client, err := sarama.NewClient(sub.cfg.Brokers, sc)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka client for %v with %s: %w", sub.cfg.Brokers, sub.cfg.Security, err)
	}
	group, err := sarama.NewConsumerGroupFromClient(sub.cfg.ConsumerGroup, client)
	if err != nil {
		_ = client.Close()
		return nil, nil, fmt.Errorf("consumer group %s: %w", sub.cfg.ConsumerGroup, err)
	}
	return client, group, nil
}

// run consumes with group until the subscription stops, starting over
// with a new client when the group fails; it closes the output channel
// when every partition has been revoked and the member has left.
func (sub *subscription) run(client sarama.Client, group sarama.ConsumerGroup) {
	defer close(sub.done)
	defer close(sub.out)
	for {
		var errs sync.WaitGroup
		errs.Go(func() {
			for err := range group.Errors() { // closed by group.Close
				sub.cfg.Logger.Error("Consumer group error", err, sub.logFields)
			}
		})
		sub.consume(group)
		if err := group.Close(); err != nil {
			sub.cfg.Logger.Info("Consumer group closed with an error", sub.logFields.Add(watermill.LogFields{"err": err.Error()}))
		}
		errs.Wait()
		_ = client.Close()
		for {
			if !sub.pause(sub.cfg.ReconnectRetrySleep) {
				return
			}
			var err error
			if client, group, err = sub.connect(); err == nil {
				break
			}
			sub.cfg.Logger.Error("Cannot reconnect the consumer group", err, sub.logFields)
		}
		sub.cfg.Logger.Info("Consumer group reconnected", sub.logFields)
	}
}

// consume runs group sessions until the subscription stops or Consume
// fails.
func (sub *subscription) consume(group sarama.ConsumerGroup) {
	for !closed(sub.stopping) && sub.consumeCtx.Err() == nil {
		h := &groupHandler{cfg: sub.cfg, ctx: sub.ctx, out: sub.out, stop: sub.stopping}
		if err := group.Consume(sub.consumeCtx, []string{sub.topic}, h); err != nil {
			if !closed(sub.stopping) && sub.consumeCtx.Err() == nil {
				sub.cfg.Logger.Error("Consumer group failed; rejoining with a new client", err, sub.logFields)
			}
			return
		}
	}
}

// pause waits d unless the subscription stops first (false).
func (sub *subscription) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return !closed(sub.stopping) && sub.consumeCtx.Err() == nil
	case <-sub.stopping:
		return false
	case <-sub.consumeCtx.Done():
		return false
	}
}

// stop stops the subscription within RevokeTimeout plus twice
// CloseTimeout (see Subscriber.Close); only the first call does the work,
// later ones return its result.
func (sub *subscription) stop() error {
	sub.once.Do(func() {
		close(sub.stopping)
		sub.cancelConsume()
		timer := time.NewTimer(sub.cfg.RevokeTimeout + sub.cfg.CloseTimeout)
		defer timer.Stop()
		select {
		case <-sub.done:
			return
		case <-timer.C:
		}
		n := sub.conns.CloseAll()
		sub.cfg.Logger.Info("Subscription still stopping; aborted its Kafka requests in flight", sub.logFields.Add(watermill.LogFields{
			"after": (sub.cfg.RevokeTimeout + sub.cfg.CloseTimeout).String(), "connections": n}))
		timer.Reset(sub.cfg.CloseTimeout)
		select {
		case <-sub.done:
		case <-timer.C:
			sub.conns.CloseAll()
			sub.err = fmt.Errorf("keyed: subscriber of group %s on %s did not stop within %s of aborting its requests", sub.cfg.ConsumerGroup, sub.topic, sub.cfg.CloseTimeout)
		}
	})
	return sub.err
}
