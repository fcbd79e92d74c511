package projections

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/components/metrics"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/eventstore"
)

// RunnerConfig configures a Runner.
type RunnerConfig struct {
	// Applier applies what arrives: an *Applier (Postgres) or any other
	// Sink, such as an Elasticsearch read model's. Required.
	Applier Sink
	// NewSubscriber returns the subscriber of each event topic, in the
	// projection's consumer group (default: Kafka subscribers on Brokers).
	NewSubscriber bus.SubscriberConstructor
	// Brokers are the Kafka seed brokers: required without NewSubscriber;
	// with a Registerer they also feed the Kafka offset lag metric.
	Brokers []string
	// Topics names the event topics (and the poison topic).
	Topics bus.Topics
	// Publisher publishes poisoned messages. Required.
	Publisher message.Publisher
	// History, when set, lets a projection that has applied nothing yet
	// catch up from the event store before it consumes the live topics
	// (see CatchUp). Without it a new projection relies on the topics
	// still holding every event.
	History HistoryPage
	// BatchSize is the most messages applied in one transaction (default
	// 100). Messages that arrive while a transaction runs go into the
	// next one, so batches grow with the load and a lone message waits
	// for nobody. (The Kafka subscriber holds one unacked message per
	// partition, so a batch holds at most one message per partition the
	// runner is assigned.)
	BatchSize int
	// Registerer receives the router's metrics (default: none).
	Registerer prometheus.Registerer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Validate reports the first missing field.
func (c RunnerConfig) Validate() error {
	switch {
	case c.Applier == nil:
		return errors.New("projections: RunnerConfig.Applier is nil")
	case c.NewSubscriber == nil && len(c.Brokers) == 0:
		return errors.New("projections: RunnerConfig needs NewSubscriber or Brokers")
	case c.Publisher == nil:
		return errors.New("projections: RunnerConfig.Publisher is nil")
	case c.BatchSize < 0:
		return fmt.Errorf("projections: RunnerConfig.BatchSize is %d, want ≥ 0", c.BatchSize)
	}
	return nil
}

// Runner consumes a projection's event topics on a Watermill Router, in
// its own consumer group ("projection.<name>" in the topic namespace), and
// applies the events through the Applier, many messages (of different
// partitions) per transaction. A message is acked only after its
// transaction committed; a redelivery is skipped by the positions. When a
// batch fails, its messages are applied one by one, so that an
// undecodable message or a permanent apply error sends only its own
// message to poison.projection.<name>; transient errors are retried in
// order.
type Runner struct {
	cfg     RunnerConfig
	age     prometheus.Gauge
	applied prometheus.Counter
	batches prometheus.Histogram
	queue   chan pending
}

// pending is a delivered event waiting for its transaction.
type pending struct {
	e    eventstore.Envelope
	done chan error
}

// NewRunner validates cfg and returns a Runner.
func NewRunner(cfg RunnerConfig) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 100
	}
	if cfg.NewSubscriber == nil {
		cfg.NewSubscriber = kafka.Subscribers(kafka.SubscriberConfig{Brokers: cfg.Brokers, ClientID: "eventpipe-consume",
			Logger: watermill.NewSlogLogger(cfg.Logger)})
	}
	r := &Runner{cfg: cfg, queue: make(chan pending, cfg.BatchSize),
		batches: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "eventpipe_projection_batch_messages",
			Help:    "Messages applied per transaction.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 8),
		}),
		age: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eventpipe_projection_last_event_age_seconds",
			Help: "Now minus the occurred-at of the last event applied (the projection's lag behind the write side).",
		}),
		applied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventpipe_projection_events_applied_total",
			Help: "Events applied (duplicates skipped by the positions not counted).",
		}),
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(r.age); err != nil {
			return nil, fmt.Errorf("projections: register metrics: %w", err)
		}
		if err := cfg.Registerer.Register(r.applied); err != nil {
			return nil, fmt.Errorf("projections: register metrics: %w", err)
		}
		if err := cfg.Registerer.Register(r.batches); err != nil {
			return nil, fmt.Errorf("projections: register metrics: %w", err)
		}
	}
	return r, nil
}

// ConsumerGroup is the projection's consumer group:
// <prefix>projection.<name>, so namespaces sharing a cluster keep apart.
func (r *Runner) ConsumerGroup() string {
	return ConsumerGroup(r.cfg.Topics, r.cfg.Applier.Name())
}

// PoisonTopic is where the projection parks events that can never apply:
// <prefix>poison.projection.<name>.
func (r *Runner) PoisonTopic() string {
	return PoisonTopic(r.cfg.Topics, r.cfg.Applier.Name())
}

// ConsumerGroup is the consumer group of the projection called name in
// the namespace t: <prefix>projection.<name>.
func ConsumerGroup(t bus.Topics, name string) string { return t.Prefix + "projection." + name }

// PoisonTopic is the poison topic of the projection called name in the
// namespace t: <prefix>poison.projection.<name>.
func PoisonTopic(t bus.Topics, name string) string { return t.Poison("projection." + name) }

// Run catches a new projection up from the store (when History is set)
// and then consumes until ctx ends.
func (r *Runner) Run(ctx context.Context) error {
	if r.cfg.History != nil {
		has, err := r.cfg.Applier.HasPositions(ctx)
		if err != nil {
			return err
		}
		if !has {
			name := r.cfg.Applier.Name()
			r.cfg.Logger.InfoContext(ctx, "new projection: catching up from the event store", "projection", name)
			n, err := CatchUp(ctx, r.cfg.Applier, r.cfg.History, nil)
			if err != nil {
				return err
			}
			r.cfg.Logger.InfoContext(ctx, "caught up; switching to the live topics", "projection", name, "events", n)
		}
	}
	logger := watermill.NewSlogLogger(r.cfg.Logger)
	router, err := message.NewRouter(message.RouterConfig{}, logger)
	if err != nil {
		return err
	}
	group := r.ConsumerGroup()
	mws, err := bus.Middlewares(bus.MiddlewareConfig{PoisonPublisher: r.cfg.Publisher, PoisonTopic: r.PoisonTopic(), Logger: r.cfg.Logger})
	if err != nil {
		return err
	}
	router.AddMiddleware(mws...)
	if r.cfg.Registerer != nil {
		metrics.NewPrometheusMetricsBuilder(r.cfg.Registerer, "eventpipe", "projection").AddPrometheusRouterMetrics(router)
	}
	var topics []string
	for _, aggType := range r.cfg.Applier.AggregateTypes() {
		topics = append(topics, r.cfg.Topics.Events(aggType))
	}
	if r.cfg.Registerer != nil && len(r.cfg.Brokers) > 0 {
		// Kafka offset lag of the projection's group, beside the last
		// applied event's age.
		lag, err := kafka.NewLagMonitor(kafka.LagConfig{Brokers: r.cfg.Brokers, ConsumerGroup: group, Topics: topics, Registerer: r.cfg.Registerer, Logger: r.cfg.Logger})
		if err != nil {
			return err
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
	for _, aggType := range r.cfg.Applier.AggregateTypes() {
		topic := r.cfg.Topics.Events(aggType)
		sub, err := r.cfg.NewSubscriber(group)
		if err != nil {
			return fmt.Errorf("projections: %s: subscriber for %s: %w", group, topic, err)
		}
		subs = append(subs, sub)
		router.AddConsumerHandler(group+":"+topic, topic, sub, r.handle)
	}
	// The batcher outlives the router: handlers still waiting for their
	// transaction when ctx ends get their answer.
	batchCtx, stopBatcher := context.WithCancel(context.WithoutCancel(ctx))
	batcherDone := make(chan struct{})
	go func() { defer close(batcherDone); r.batch(batchCtx) }()
	defer func() { stopBatcher(); <-batcherDone }()
	if err := router.Run(ctx); err != nil {
		return fmt.Errorf("projections: %s: router: %w", group, err)
	}
	return nil
}

// handle hands the message's event to the batcher and returns the result
// of the transaction it was applied in.
func (r *Runner) handle(msg *message.Message) error {
	e, err := bus.EventFromMessage(msg)
	if err != nil {
		return err
	}
	p := pending{e: e, done: make(chan error, 1)}
	select {
	case r.queue <- p:
	case <-msg.Context().Done():
		return msg.Context().Err()
	}
	return <-p.done
}

// batch applies what the handlers queue: it takes every event already
// waiting (up to BatchSize) and applies them in one transaction, until
// ctx ends.
func (r *Runner) batch(ctx context.Context) {
	for {
		var batch []pending
		select {
		case p := <-r.queue:
			batch = append(batch, p)
		case <-ctx.Done():
			return
		}
	more:
		for len(batch) < r.cfg.BatchSize {
			select {
			case p := <-r.queue:
				batch = append(batch, p)
			default:
				break more
			}
		}
		r.applyBatch(ctx, batch)
	}
}

// applyBatch applies batch in one transaction and answers every handler;
// when that fails it applies each event alone so each gets its own error.
func (r *Runner) applyBatch(ctx context.Context, batch []pending) {
	events := make([]eventstore.Envelope, len(batch))
	for i, p := range batch {
		events[i] = p.e
	}
	out, err := r.cfg.Applier.Apply(ctx, events)
	if err == nil || len(batch) == 1 {
		r.observe(out, events)
		r.batches.Observe(float64(len(batch)))
		for _, p := range batch {
			p.done <- err
		}
		return
	}
	r.cfg.Logger.WarnContext(ctx, "a batch failed; applying its events one by one", "projection", r.cfg.Applier.Name(), "events", len(batch), "err", err)
	for _, p := range batch {
		out, err := r.cfg.Applier.Apply(ctx, []eventstore.Envelope{p.e})
		r.observe(out, []eventstore.Envelope{p.e})
		r.batches.Observe(1)
		p.done <- err
	}
}

// observe updates the metrics after a committed transaction.
func (r *Runner) observe(out Outcome, events []eventstore.Envelope) {
	if n := out.Applied + out.Repaired; n > 0 {
		r.applied.Add(float64(n))
		latest := events[0].OccurredAt
		for _, e := range events[1:] {
			if e.OccurredAt.After(latest) {
				latest = e.OccurredAt
			}
		}
		r.age.Set(max(0, time.Since(latest).Seconds()))
	}
}
