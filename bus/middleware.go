package bus

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/tracing"
)

// ReasonMetadataKey holds the reason a message was poisoned.
const ReasonMetadataKey = middleware.ReasonForPoisonedKey

// MiddlewareConfig configures the handler middleware chain.
type MiddlewareConfig struct {
	// PoisonPublisher publishes poisoned messages. Required.
	PoisonPublisher message.Publisher
	// PoisonTopic receives them (see PoisonTopic). Required.
	PoisonTopic string
	// MaxRetries is the number of in-handler retries of a transient error
	// before the message is nacked and redelivered (default 5). Transient
	// errors are never poisoned: a message that fails because a service is
	// down waits for it, in order.
	MaxRetries int
	// InitialInterval is the first retry pause (default 100ms); pauses
	// double up to MaxInterval (default 5s), with jitter.
	InitialInterval time.Duration
	MaxInterval     time.Duration
	// Logger receives one line per retry and per poisoned message
	// (default slog.Default()).
	Logger *slog.Logger
}

func (c *MiddlewareConfig) setDefaults() {
	if c.MaxRetries == 0 {
		c.MaxRetries = 5
	}
	if c.InitialInterval == 0 {
		c.InitialInterval = 100 * time.Millisecond
	}
	if c.MaxInterval == 0 {
		c.MaxInterval = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first invalid field.
func (c MiddlewareConfig) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("bus: MiddlewareConfig: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if c.PoisonPublisher == nil {
		return bad("PoisonPublisher", "is nil")
	}
	if err := ValidateTopic(c.PoisonTopic); err != nil {
		return bad("PoisonTopic", "%v", err)
	}
	switch {
	case c.MaxRetries < 0:
		return bad("MaxRetries", "%d is negative", c.MaxRetries)
	case c.InitialInterval < 0:
		return bad("InitialInterval", "%v is negative", c.InitialInterval)
	case c.MaxInterval < c.InitialInterval:
		return bad("MaxInterval", "%v is shorter than InitialInterval %v", c.MaxInterval, c.InitialInterval)
	}
	return nil
}

// Middlewares returns the handler middleware chain, outermost first, for
// router.AddMiddleware: a consumer span continuing the message's trace
// (package tracing), correlation-id propagation, the poison queue (only
// permanent errors), retry with exponential backoff (only transient
// errors), and a recoverer that turns a panic into a permanent error.
// Which errors are permanent is decided by eventstore.IsPermanent alone.
func Middlewares(cfg MiddlewareConfig) ([]message.HandlerMiddleware, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	poison, err := middleware.PoisonQueueWithFilter(cfg.PoisonPublisher, cfg.PoisonTopic, eventstore.IsPermanent)
	if err != nil {
		return nil, fmt.Errorf("bus: poison queue: %w", err)
	}
	retry := middleware.Retry{
		MaxRetries:          cfg.MaxRetries,
		InitialInterval:     cfg.InitialInterval,
		MaxInterval:         cfg.MaxInterval,
		Multiplier:          2,
		RandomizationFactor: 0.3,
		ShouldRetry:         func(p middleware.RetryParams) bool { return !eventstore.IsPermanent(p.Err) },
		OnRetryHook: func(n int, delay time.Duration) {
			cfg.Logger.Debug("retrying message", "attempt", n, "delay", delay)
		},
		Logger: watermill.NewSlogLogger(cfg.Logger),
	}
	logPoisoned := func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			out, err := h(msg)
			if eventstore.IsPermanent(err) {
				cfg.Logger.Warn("message poisoned", "message_id", msg.UUID, "poison_topic", cfg.PoisonTopic, "reason", err)
			}
			return out, err
		}
	}
	return []message.HandlerMiddleware{
		tracing.Middleware,
		middleware.CorrelationID,
		poison,
		logPoisoned,
		retry.Middleware,
		recoverPermanent,
	}, nil
}

// PanicError is a handler panic, recovered with its stack. It is
// permanent: the message is poisoned instead of crashing the process or
// blocking its partition.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("handler panic: %v\n%s", e.Value, e.Stack) }

// Permanent marks a panic as permanent for eventstore.IsPermanent.
func (e *PanicError) Permanent() bool { return true }

// recoverPermanent turns a handler panic into a *PanicError.
func recoverPermanent(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) (out []*message.Message, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = &PanicError{Value: r, Stack: debug.Stack()}
			}
		}()
		return h(msg)
	}
}
