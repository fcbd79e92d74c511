package projections

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/components/metrics"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/eventstore"
)

// RunnerConfig configures a Runner.
type RunnerConfig struct {
	// Applier applies what arrives. Required.
	Applier *Applier
	// Brokers are the Kafka seed brokers. Required.
	Brokers []string
	// Topics names the event topics (and the poison topic).
	Topics bus.Topics
	// Publisher publishes poisoned messages. Required.
	Publisher message.Publisher
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
	case len(c.Brokers) == 0:
		return errors.New("projections: RunnerConfig.Brokers is empty")
	case c.Publisher == nil:
		return errors.New("projections: RunnerConfig.Publisher is nil")
	}
	return nil
}

// Runner consumes a projection's event topics on a Watermill Router, in
// its own consumer group ("projection.<name>" in the topic namespace), and
// applies each event through the Applier. A message is acked only after
// its transaction committed; a redelivery is skipped by the positions. An
// undecodable message or a permanent apply error goes to
// poison.projection.<name>; transient errors are retried in order.
type Runner struct {
	cfg RunnerConfig
}

// NewRunner validates cfg and returns a Runner.
func NewRunner(cfg RunnerConfig) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Runner{cfg: cfg}, nil
}

// ConsumerGroup is the projection's consumer group.
func (r *Runner) ConsumerGroup() string {
	return r.cfg.Topics.Prefix + "projection." + r.cfg.Applier.cfg.Projection.Name()
}

// Run consumes until ctx ends.
func (r *Runner) Run(ctx context.Context) error {
	logger := watermill.NewSlogLogger(r.cfg.Logger)
	router, err := message.NewRouter(message.RouterConfig{}, logger)
	if err != nil {
		return err
	}
	group := r.ConsumerGroup()
	mws, err := bus.Middlewares(bus.MiddlewareConfig{PoisonPublisher: r.cfg.Publisher, PoisonTopic: r.cfg.Topics.Poison(group), Logger: r.cfg.Logger})
	if err != nil {
		return err
	}
	router.AddMiddleware(mws...)
	if r.cfg.Registerer != nil {
		metrics.NewPrometheusMetricsBuilder(r.cfg.Registerer, "eventpipe", "projection").AddPrometheusRouterMetrics(router)
	}
	var subs []message.Subscriber
	defer func() {
		for _, sub := range subs {
			_ = sub.Close()
		}
	}()
	for _, aggType := range r.cfg.Applier.cfg.Projection.AggregateTypes() {
		topic := r.cfg.Topics.Events(aggType)
		sub, err := bus.NewSubscriber(bus.SubscriberConfig{Brokers: r.cfg.Brokers, ConsumerGroup: group, ClientID: "eventpipe-consume", Logger: logger})
		if err != nil {
			return err
		}
		subs = append(subs, sub)
		router.AddConsumerHandler(group+":"+topic, topic, sub, r.handle)
	}
	if err := router.Run(ctx); err != nil {
		return fmt.Errorf("projections: %s: router: %w", group, err)
	}
	return nil
}

func (r *Runner) handle(msg *message.Message) error {
	e, err := bus.EventFromMessage(msg)
	if err != nil {
		return err
	}
	_, err = r.cfg.Applier.Apply(msg.Context(), []eventstore.Envelope{e})
	return err
}
