package tracing_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/eventpipe/eventpipe/tracing"
)

// recorder installs an SDK tracer provider recording every span for the
// test's duration.
func recorder(t *testing.T) *tracetest.SpanRecorder {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	return rec
}

// TestMessagesCarryTheTraceAndTheMiddlewareContinuesIt injects a span's
// context into a message, and runs a handler behind the middleware: its
// span is a child of the injected one, the handler sees it in the
// message's context, and a handler error is recorded on it.
func TestMessagesCarryTheTraceAndTheMiddlewareContinuesIt(t *testing.T) {
	rec := recorder(t)
	ctx, parent := tracing.Tracer().Start(context.Background(), "producer")
	msg := message.NewMessage(watermill.NewUUID(), nil)
	tracing.Inject(ctx, msg)
	parent.End()
	if msg.Metadata.Get(tracing.MetadataTraceParent) == "" {
		t.Fatal("no traceparent in the metadata")
	}
	if got := tracing.TraceParent(ctx); got != msg.Metadata.Get(tracing.MetadataTraceParent) {
		t.Errorf("TraceParent %q, metadata %q", got, msg.Metadata.Get(tracing.MetadataTraceParent))
	}
	failure := errors.New("refused")
	var seen string
	h := tracing.Middleware(func(m *message.Message) ([]*message.Message, error) {
		seen = tracing.TraceParent(m.Context())
		return nil, failure
	})
	if _, err := h(msg); !errors.Is(err, failure) {
		t.Fatalf("the middleware returned %v, want the handler's error", err)
	}
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans ended, want 2", len(spans))
	}
	consumer := spans[1]
	if consumer.Parent().SpanID() != parent.SpanContext().SpanID() || consumer.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("the consumer span's parent is %s, want the producer %s", consumer.Parent().SpanID(), parent.SpanContext().SpanID())
	}
	if consumer.Status().Code != codes.Error || len(consumer.Events()) == 0 {
		t.Errorf("the handler's error is not on the span: %+v", consumer.Status())
	}
	if want := tracing.TraceParent(tracing.WithTraceParent(context.Background(), seen)); seen == "" || want != seen {
		t.Errorf("the handler saw traceparent %q (round trip %q)", seen, want)
	}
	if tracing.TraceParent(context.Background()) != "" || tracing.TraceParent(tracing.WithTraceParent(context.Background(), "garbage")) != "" {
		t.Error("a context without a (valid) trace should have no traceparent")
	}
}
