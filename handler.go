package eventpipe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/components/metrics"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/eventstore"
)

// HandlerConfig configures Handler: a plain Watermill handler run as an
// eventpipe consumer.
type HandlerConfig struct {
	// Name is the consumer's name, unique in the catalogue. Required. Its
	// group is <prefix>handler.<name> and its poison topic
	// <prefix>poison.handler.<name>.
	Name string
	// Topics are the topics it reads, named in the default namespace
	// (bus.EventsTopic("todo"), bus.Topics{}.Outbound("…")): the topic
	// prefix of the deployment is put before each. Required.
	Topics []string
	// Handler handles one message. A nil error acks it. An error is
	// retried in the handler and then nacked (redelivered, in order)
	// while it is transient; a permanent one (eventstore.IsPermanent,
	// e.g. an *eventstore.ValidationError) sends the message to the poison
	// topic with the reason. Decode events with bus.EventFromMessage.
	// Required.
	Handler message.NoPublishHandlerFunc
	// Start is where the group starts when it never committed (default
	// bus.StartLatest: a handler may have side effects, so it acts on
	// nothing published before its first deployment; bus.StartEarliest
	// or bus.StartAt to see older records). bus.StartHistory is refused:
	// a handler reads topics, not the event store.
	Start bus.Start
	// Middlewares run inside eventpipe's own (poison, retries, tracing),
	// around Handler, in order.
	Middlewares []message.HandlerMiddleware
	// Open hands Handler each message with its sealed personal data
	// opened (docs/privacy.md): an event's personal fields, an outbound
	// record's payload, with the store's sealer. Handler gets a copy: the
	// message on its topic, and on the poison topic when it fails, stays
	// sealed. Without it Handler sees what the relay published.
	Open bool
}

// Validate reports the first missing or invalid field, an
// *eventstore.ValidationError. (A handler is a consumer, not a process:
// its Config has no Process; NewConsumers' ConsumersConfig has.)
func (c HandlerConfig) Validate() error {
	if err := eventstore.ValidateName("Name", c.Name); err != nil {
		return fmt.Errorf("eventpipe: handler: %w", err)
	}
	switch {
	case len(c.Topics) == 0:
		return fmt.Errorf("eventpipe: handler %s: %w", c.Name, invalid("Topics", "none"))
	case c.Handler == nil:
		return fmt.Errorf("eventpipe: handler %s: %w", c.Name, invalid("Handler", "is nil"))
	case c.Start.IsHistory():
		_, err := sideEffectStart(KindHandler, c.Name, c.Start)
		return err
	}
	for _, t := range c.Topics {
		if t == "" {
			return fmt.Errorf("eventpipe: handler %s: %w", c.Name, invalid("Topics", "has an empty topic name"))
		}
	}
	return nil
}

// Handler returns the Consumer of a plain Watermill handler: register it
// with Catalog.AddConsumer and run it with NewConsumers (or `eventpipe
// consume <name>` in a binary built on the catalogue). It runs on a
// Watermill Router in its own consumer group, behind bus.Middlewares
// (retries, poison topic, a trace span per message), with the router's
// Prometheus metrics labelled consumer=<name>, and operator.Status shows
// its row.
func Handler(cfg HandlerConfig) (Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Topics = append([]string(nil), cfg.Topics...)
	return handlerConsumer{cfg}, nil
}

type handlerConsumer struct{ cfg HandlerConfig }

func (h handlerConsumer) Name() string { return h.cfg.Name }

// HandlerGroup is the consumer group of the handler called name in the
// namespace t: <prefix>handler.<name>.
func HandlerGroup(t bus.Topics, name string) string { return t.Prefix + "handler." + name }

func (h handlerConsumer) Describe(t bus.Topics) ConsumerInfo {
	info := ConsumerInfo{Kind: KindHandler, Group: HandlerGroup(t, h.cfg.Name), PoisonTopic: t.Poison("handler." + h.cfg.Name),
		DefaultStart: h.cfg.Start.Or(bus.StartLatest)}
	for _, topic := range h.cfg.Topics {
		info.Topics = append(info.Topics, t.Prefix+topic)
	}
	return info
}

func (h handlerConsumer) Build(ctx context.Context, r Resources) (Runnable, error) {
	info := h.Describe(r.Topics)
	start, err := sideEffectStart(info.Kind, h.cfg.Name, r.Start.Or(info.DefaultStart))
	if err != nil {
		return nil, err
	}
	newSub := r.NewSubscriber
	if newSub == nil {
		newSub = kafka.Subscribers(kafka.SubscriberConfig{Brokers: r.Endpoints.KafkaBrokers, Security: r.Endpoints.Kafka, InstanceID: r.Endpoints.KafkaInstanceID, ClientID: "eventpipe-handler",
			Logger: watermill.NewSlogLogger(r.Logger)})
	}
	if r.Publisher == nil {
		return nil, errors.New("eventpipe: handler " + h.cfg.Name + ": Resources.Publisher is nil")
	}
	handle := h.cfg.Handler
	if h.cfg.Open && r.Opener != nil {
		handle = openedHandler(r.Opener, r.upcasters(), h.cfg.Handler)
	}
	run := func(ctx context.Context) error {
		router, err := message.NewRouter(message.RouterConfig{}, watermill.NewSlogLogger(r.Logger))
		if err != nil {
			return err
		}
		mws, err := bus.Middlewares(bus.MiddlewareConfig{PoisonPublisher: r.Publisher, PoisonTopic: info.PoisonTopic, Logger: r.Logger})
		if err != nil {
			return err
		}
		router.AddMiddleware(mws...)
		router.AddMiddleware(h.cfg.Middlewares...)
		if reg := r.registerer("consumer", h.cfg.Name); reg != nil {
			metrics.NewPrometheusMetricsBuilder(reg, "eventpipe", "handler").AddPrometheusRouterMetrics(router)
		}
		var subs []message.Subscriber
		defer func() {
			for _, s := range subs {
				_ = s.Close()
			}
		}()
		for _, topic := range info.Topics {
			sub, err := newSub(info.Group)
			if err != nil {
				return fmt.Errorf("eventpipe: handler %s: subscriber for %s: %w", h.cfg.Name, topic, err)
			}
			subs = append(subs, sub)
			router.AddConsumerHandler(info.Group+":"+topic, topic, sub, handle)
		}
		if err := router.Run(ctx); err != nil {
			return fmt.Errorf("eventpipe: handler %s: router: %w", h.cfg.Name, err)
		}
		return nil
	}
	return r.startThenRun(info.Group, fixedTopics(info.Topics), start, run), nil
}

// openedHandler calls next with a copy of each message whose event or
// outbound record is opened by o (HandlerConfig.Open).
func openedHandler(o eventstore.Opener, u *eventstore.Upcasters, next message.NoPublishHandlerFunc) message.NoPublishHandlerFunc {
	return func(msg *message.Message) error {
		var body []byte
		if msg.Metadata.Get(bus.MetadataOutboundName) != "" {
			var rec eventstore.OutboundRecord
			if err := json.Unmarshal(msg.Payload, &rec); err != nil {
				return &eventstore.DecodeError{What: "outbound message " + msg.UUID, Reason: err.Error()}
			}
			opened, err := o.OpenOutbound(msg.Context(), rec)
			if err != nil {
				return fmt.Errorf("outbound message %s: %w", msg.UUID, err)
			}
			if body, err = json.Marshal(opened); err != nil {
				return err
			}
		} else {
			e, err := bus.OpenedEventFromMessage(msg, u, o)
			if err != nil {
				return err
			}
			if body, err = eventstore.Marshal(e); err != nil {
				return err
			}
		}
		c := msg.Copy()
		c.Payload = body
		c.SetContext(msg.Context())
		return next(c)
	}
}
