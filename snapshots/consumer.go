package snapshots

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/privacy"
)

// FailedError is a snapshot the consumer gave up on: the rules reject a
// stored event, the state does not decode or is too large, the aggregate
// is not in the store, or transient failures lasted Config.GiveUpAfter
// (then For says how long). It is permanent (eventstore.IsPermanent), so
// the triggering message goes to the poison topic with this error as the
// reason and its partition moves on.
type FailedError struct {
	Aggregate eventstore.Ref
	// Sequence is that of the event that triggered the snapshot.
	Sequence int64
	// For is how long transient failures were retried (0: the failure
	// was permanent from the start).
	For time.Duration
	Err error
}

func (e *FailedError) Error() string {
	if e.For > 0 {
		return fmt.Sprintf("snapshot of %s (event %d): gave up after %s: %v", e.Aggregate, e.Sequence, e.For.Round(time.Millisecond), e.Err)
	}
	return fmt.Sprintf("snapshot of %s (event %d): %v", e.Aggregate, e.Sequence, e.Err)
}

// Unwrap returns the snapshot's error.
func (e *FailedError) Unwrap() error { return e.Err }

// Permanent makes eventstore.IsPermanent true: the message is poisoned.
func (e *FailedError) Permanent() bool { return true }

// Consumer is the snapshot consumer (see the package documentation). It
// is safe for concurrent use; Run it once at a time.
type Consumer struct {
	cfg     Config
	metrics *metrics
	sem     chan struct{}
	taken   *lru.Cache[eventstore.Ref, int64] // latest snapshot sequence per aggregate
	types   []string                          // aggregate types, sorted

	mu      sync.Mutex
	failing map[string]time.Time // first transient failure per message id
}

// New validates cfg and returns a Consumer; Run starts it.
func New(cfg Config) (*Consumer, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.NewSubscriber == nil {
		cfg.NewSubscriber = kafka.Subscribers(kafka.SubscriberConfig{Brokers: cfg.Brokers, Security: cfg.KafkaSecurity, InstanceID: cfg.KafkaInstanceID, ClientID: "eventpipe-snapshots",
			Logger: watermill.NewSlogLogger(cfg.Logger)})
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	for typ := range cfg.Aggregates {
		// At 0 from the start: an alert on the increase of permanent
		// failures sees the first one, and a rate the first snapshots (a
		// series born at N has no increase).
		m.failures.WithLabelValues(typ, "permanent")
		m.failures.WithLabelValues(typ, "transient")
		m.written.WithLabelValues(typ)
		m.skipped.WithLabelValues(typ)
	}
	taken, err := lru.New[eventstore.Ref, int64](cfg.Remember)
	if err != nil {
		return nil, fmt.Errorf("snapshots: %w", err)
	}
	types := make([]string, 0, len(cfg.Aggregates))
	for t := range cfg.Aggregates {
		types = append(types, t)
	}
	sort.Strings(types)
	return &Consumer{cfg: cfg, metrics: m, sem: make(chan struct{}, cfg.Concurrency), taken: taken, types: types,
		failing: map[string]time.Time{}}, nil
}

// Group is the consumer group: <prefix>snapshots by default.
func (c *Consumer) Group() string { return c.cfg.Group }

// PoisonTopic is where triggers whose snapshot failed for good go:
// <prefix>poison.snapshots by default.
func (c *Consumer) PoisonTopic() string { return c.cfg.poisonTopic() }

// Topics returns the events topics consumed, one per aggregate type.
func (c *Consumer) Topics() []string {
	out := make([]string, len(c.types))
	for i, t := range c.types {
		out[i] = c.cfg.Topics.Events(t)
	}
	return out
}

// Run consumes the events topics on a Watermill Router until ctx ends
// (then it returns nil) or the router fails.
func (c *Consumer) Run(ctx context.Context) error {
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NewSlogLogger(c.cfg.Logger))
	if err != nil {
		return fmt.Errorf("snapshots: %w", err)
	}
	mws, err := bus.Middlewares(bus.MiddlewareConfig{PoisonPublisher: c.cfg.Publisher, PoisonTopic: c.PoisonTopic(), Logger: c.cfg.Logger})
	if err != nil {
		return fmt.Errorf("snapshots: %w", err)
	}
	router.AddMiddleware(mws...)
	topics := c.Topics()
	if c.cfg.Registerer != nil && len(c.cfg.Brokers) > 0 {
		lag, err := kafka.NewLagMonitor(kafka.LagConfig{Brokers: c.cfg.Brokers, Security: c.cfg.KafkaSecurity, ConsumerGroup: c.cfg.Group, Topics: topics,
			Registerer: c.cfg.Registerer, Logger: c.cfg.Logger})
		if err != nil {
			return fmt.Errorf("snapshots: %w", err)
		}
		lagCtx, stopLag := context.WithCancel(ctx)
		lagDone := make(chan struct{})
		go func() { defer close(lagDone); _ = lag.Run(lagCtx) }()
		defer func() { stopLag(); <-lagDone }()
	}
	var subs []message.Subscriber
	defer func() {
		for _, sub := range subs {
			_ = sub.Close()
		}
	}()
	for _, topic := range topics {
		sub, err := c.cfg.NewSubscriber(c.cfg.Group)
		if err != nil {
			return fmt.Errorf("snapshots: %s: subscriber for %s: %w", c.cfg.Group, topic, err)
		}
		subs = append(subs, sub)
		router.AddConsumerHandler(c.cfg.Group+":"+topic, topic, sub, c.Handle)
	}
	c.cfg.Logger.InfoContext(ctx, "snapshot consumer started", "group", c.cfg.Group, "topics", topics, "every", c.cfg.Every,
		"every_by_type", c.cfg.EveryByType)
	if err := router.Run(ctx); err != nil {
		return fmt.Errorf("snapshots: %s: router: %w", c.cfg.Group, err)
	}
	return nil
}

// Handle is the Watermill handler of one event message: it snapshots the
// event's aggregate when the event's sequence is a multiple of N and no
// snapshot this consumer took covers it yet. A message that is not an
// event, or whose snapshot can never be taken, returns a permanent error
// (the poison middleware parks it); a transient failure returns the
// error for the retry middleware, until GiveUpAfter turns it into a
// *FailedError. Events of aggregate types the consumer does not snapshot
// are acked, and so are those of an aggregate whose data subject was
// forgotten (package privacy): counted as skipped.
func (c *Consumer) Handle(msg *message.Message) error {
	e, err := bus.EventFromMessage(msg)
	if err != nil {
		c.metrics.failures.WithLabelValues(msg.Metadata.Get(bus.MetadataAggregateType), "permanent").Inc()
		return err
	}
	snapshot, ok := c.cfg.Aggregates[e.AggregateType]
	if !ok || e.Sequence < 1 || e.Sequence%c.cfg.every(e.AggregateType) != 0 {
		return nil
	}
	ref := e.Aggregate()
	if seq, ok := c.taken.Get(ref); ok && seq >= e.Sequence {
		c.metrics.skipped.WithLabelValues(ref.Type).Inc()
		return nil
	}
	ctx := msg.Context()
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	start := time.Now()
	seq, err := snapshot(ctx, ref.ID)
	<-c.sem
	if errors.Is(err, privacy.ErrForgotten) {
		// Its subject was forgotten: nothing of it can be stored again.
		c.metrics.skipped.WithLabelValues(ref.Type).Inc()
		c.cfg.Logger.DebugContext(ctx, "snapshot skipped: the aggregate's subject was forgotten", "aggregate", ref.String(), "trigger", e.Sequence)
		return nil
	}
	if err != nil {
		return c.failed(ctx, msg.UUID, ref, e.Sequence, err)
	}
	c.forget(msg.UUID)
	c.remember(ref, seq)
	c.metrics.written.WithLabelValues(ref.Type).Inc()
	c.metrics.seconds.WithLabelValues(ref.Type).Observe(time.Since(start).Seconds())
	c.cfg.Logger.DebugContext(ctx, "snapshot taken", "aggregate", ref.String(), "trigger", e.Sequence, "seq", seq,
		"took", time.Since(start))
	return nil
}

// failed classifies a failed snapshot: permanent (and transient ones
// retried for GiveUpAfter) become a *FailedError, others are returned
// for retry.
func (c *Consumer) failed(ctx context.Context, msgID string, ref eventstore.Ref, trigger int64, err error) error {
	if ctx.Err() != nil {
		return err // shutting down: redelivered later
	}
	if permanent(err) {
		c.forget(msgID)
		c.metrics.failures.WithLabelValues(ref.Type, "permanent").Inc()
		return &FailedError{Aggregate: ref, Sequence: trigger, Err: err}
	}
	c.metrics.failures.WithLabelValues(ref.Type, "transient").Inc()
	if since := c.failingFor(msgID); since >= c.cfg.GiveUpAfter {
		c.forget(msgID)
		return &FailedError{Aggregate: ref, Sequence: trigger, For: since, Err: err}
	}
	c.cfg.Logger.WarnContext(ctx, "snapshot failed; retrying", "aggregate", ref.String(), "trigger", trigger, "err", err)
	return fmt.Errorf("snapshot of %s (event %d): %w", ref, trigger, err)
}

// permanent reports whether snapshotting again can never succeed: the
// store's permanent errors, a stored event the rules reject, an aggregate
// the store does not hold.
func permanent(err error) bool {
	var rej *eventstore.RuleRejection
	return eventstore.IsPermanent(err) || errors.As(err, &rej) || errors.Is(err, eventstore.ErrAggregateNotFound)
}

// remember records that ref has a snapshot at seq (or later).
func (c *Consumer) remember(ref eventstore.Ref, seq int64) {
	if prev, ok := c.taken.Get(ref); !ok || prev < seq {
		c.taken.Add(ref, seq)
	}
}

// failingFor returns how long msgID has been failing, starting the clock
// at its first failure. Clocks older than twice GiveUpAfter (messages
// that went to another member) are dropped.
func (c *Consumer) failingFor(msgID string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	first, ok := c.failing[msgID]
	if !ok {
		for id, t := range c.failing {
			if now.Sub(t) > 2*c.cfg.GiveUpAfter {
				delete(c.failing, id)
			}
		}
		c.failing[msgID] = now
		return 0
	}
	return now.Sub(first)
}

// forget stops msgID's failure clock.
func (c *Consumer) forget(msgID string) {
	c.mu.Lock()
	delete(c.failing, msgID)
	c.mu.Unlock()
}
