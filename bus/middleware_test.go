package bus_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// runRouter runs handler on topic "in" behind bus.Middlewares over an
// in-memory pub/sub and returns the pub/sub and a stop function.
func runRouter(t *testing.T, handler message.NoPublishHandlerFunc) (*gochannel.GoChannel, <-chan *message.Message) {
	t.Helper()
	ps := gochannel.NewGoChannel(gochannel.Config{Persistent: true}, watermill.NopLogger{})
	mws, err := bus.Middlewares(bus.MiddlewareConfig{PoisonPublisher: ps, PoisonTopic: "poison.test", InitialInterval: time.Millisecond, MaxInterval: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	router.AddMiddleware(mws...)
	router.AddConsumerHandler("h", "in", ps, handler)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = router.Run(ctx) }()
	<-router.Running()
	poisoned, err := ps.Subscribe(ctx, "poison.test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = router.Close(); _ = ps.Close() })
	return ps, poisoned
}

func TestPermanentErrorsArePoisonedWithTheReasonAndNotRetried(t *testing.T) {
	var calls atomic.Int32
	ps, poisoned := runRouter(t, func(*message.Message) error {
		calls.Add(1)
		return &eventstore.ValidationError{Field: "type", Reason: "unknown command type \"Nope\""}
	})
	msg := message.NewMessage("m1", []byte(`{}`))
	middleware.SetCorrelationID("corr-1", msg)
	if err := ps.Publish("in", msg); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-poisoned:
		if p.UUID != "m1" || !strings.Contains(p.Metadata.Get(bus.ReasonMetadataKey), "unknown command type") {
			t.Fatalf("poisoned %s with reason %q", p.UUID, p.Metadata.Get(bus.ReasonMetadataKey))
		}
		if middleware.MessageCorrelationID(p) != "corr-1" {
			t.Errorf("correlation id lost: %q", middleware.MessageCorrelationID(p))
		}
		p.Ack()
	case <-time.After(integration.HangAfter()):
		t.Fatal("permanent error was not poisoned")
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("handler ran %d times for a permanent error, want 1", n)
	}
}

func TestTransientErrorsAreRetriedNotPoisoned(t *testing.T) {
	var calls atomic.Int32
	done := make(chan struct{})
	ps, poisoned := runRouter(t, func(*message.Message) error {
		if calls.Add(1) < 3 {
			return errors.New("dynamodb: connection refused")
		}
		close(done)
		return nil
	})
	if err := ps.Publish("in", message.NewMessage("m2", nil)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(integration.HangAfter()):
		t.Fatalf("handler called %d times, never succeeded", calls.Load())
	}
	select {
	case p := <-poisoned:
		t.Fatalf("transient failure was poisoned: %s", p.UUID)
	case <-time.After(200 * time.Millisecond):
	}
}

func TestPanicsArePoisonedWithTheStack(t *testing.T) {
	ps, poisoned := runRouter(t, func(*message.Message) error { panic("boom") })
	if err := ps.Publish("in", message.NewMessage("m3", nil)); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-poisoned:
		if reason := p.Metadata.Get(bus.ReasonMetadataKey); !strings.Contains(reason, "boom") || !strings.Contains(reason, "goroutine") {
			t.Fatalf("reason %q lacks the panic value or stack", reason)
		}
	case <-time.After(integration.HangAfter()):
		t.Fatal("panic was not poisoned")
	}
}

func TestTopicNames(t *testing.T) {
	for got, want := range map[string]string{
		bus.CommandsTopic("account"):    "commands.account",
		bus.EventsTopic("account"):      "events.account",
		bus.OutboundTopic("overdrawn"):  "outbound.overdrawn",
		bus.PoisonTopic("projection/x"): "poison.projection_x",
	} {
		if got != want {
			t.Errorf("topic %q, want %q", got, want)
		}
		if err := bus.ValidateTopic(got); err != nil {
			t.Errorf("ValidateTopic(%q) = %v", got, err)
		}
	}
	for _, bad := range []string{"", "..", "a b", "a#b", strings.Repeat("x", 250)} {
		if bus.ValidateTopic(bad) == nil {
			t.Errorf("ValidateTopic(%q) accepted", bad)
		}
	}
}

func TestMiddlewareConfigValidateNamesTheField(t *testing.T) {
	pub := gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
	for name, tc := range map[string]struct {
		cfg   bus.MiddlewareConfig
		field string
	}{
		"no publisher":          {bus.MiddlewareConfig{PoisonTopic: "poison"}, "PoisonPublisher"},
		"bad topic":             {bus.MiddlewareConfig{PoisonPublisher: pub, PoisonTopic: "a b"}, "PoisonTopic"},
		"negative retries":      {bus.MiddlewareConfig{PoisonPublisher: pub, PoisonTopic: "poison", MaxRetries: -1}, "MaxRetries"},
		"max below the initial": {bus.MiddlewareConfig{PoisonPublisher: pub, PoisonTopic: "poison", InitialInterval: time.Second, MaxInterval: time.Millisecond}, "MaxInterval"},
	} {
		var ve *eventstore.ValidationError
		if err := tc.cfg.Validate(); !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: Validate = %v, want an *eventstore.ValidationError on %s", name, err, tc.field)
		}
	}
}
