// Package tracing carries OpenTelemetry traces through eventpipe: a trace
// started at an HTTP request or a `send` follows the command over the
// bus, the command handler's append, the events through the store, its
// stream and the relay, and every consumer's handling of them.
//
// The W3C trace context travels in Watermill message metadata
// (MetadataTraceParent, MetadataTraceState) and, across DynamoDB, in each
// stored event's metadata (eventstore.Metadata.TraceParent), so the relay
// can continue the trace of the command that appended the event.
//
// Spans go to the global OpenTelemetry tracer provider: package
// tracing/otlp installs one exporting over OTLP/HTTP (the eventpipe
// binary does, when an endpoint is configured). Without one nothing is
// recorded, and trace contexts that arrive are still passed on. This
// package imports only OpenTelemetry's API, so the libraries that trace
// do not link the exporter.
package tracing

import (
	"context"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Metadata keys of the W3C trace context in a Watermill message.
const (
	MetadataTraceParent = "traceparent"
	MetadataTraceState  = "tracestate"
)

// InstrumentationName names eventpipe's tracer.
const InstrumentationName = "github.com/eventpipe/eventpipe"

// Tracer is eventpipe's tracer from the global provider.
func Tracer() trace.Tracer { return otel.Tracer(InstrumentationName) }

// metadataCarrier adapts Watermill metadata to the propagator.
type metadataCarrier message.Metadata

func (c metadataCarrier) Get(key string) string { return message.Metadata(c).Get(key) }
func (c metadataCarrier) Set(key, value string) { message.Metadata(c).Set(key, value) }
func (c metadataCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// propagator is what eventpipe's messages carry, whatever the global
// propagator is: the W3C trace context and baggage.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Propagator is the propagator eventpipe uses on its messages and its
// HTTP API: the W3C trace context and baggage.
func Propagator() propagation.TextMapPropagator { return propagator }

// Inject writes ctx's trace context into msg's metadata (W3C trace
// context, whatever the global propagator).
func Inject(ctx context.Context, msg *message.Message) {
	propagator.Inject(ctx, metadataCarrier(msg.Metadata))
}

// Extract returns ctx with the trace context of msg's metadata, if any.
func Extract(ctx context.Context, msg *message.Message) context.Context {
	return propagator.Extract(ctx, metadataCarrier(msg.Metadata))
}

// TraceParent returns ctx's trace context as a W3C traceparent header
// value ("" when ctx carries none): what an event stores of the trace
// that appended it.
func TraceParent(ctx context.Context) string {
	m := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, m)
	return m[MetadataTraceParent]
}

// WithTraceParent returns ctx carrying the remote trace context of a
// stored traceparent value (ctx unchanged when it is empty or invalid).
func WithTraceParent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{MetadataTraceParent: traceparent})
}

// Middleware is a Watermill handler middleware: it continues the trace of
// each message's metadata with a consumer span named after the handler,
// puts the span in the message's context for the handler, and records the
// handler's error on it.
func Middleware(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		ctx := Extract(msg.Context(), msg)
		name := message.HandlerNameFromCtx(msg.Context())
		if name == "" {
			name = "handle"
		}
		ctx, span := Tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(attribute.String("messaging.system", "kafka"),
				attribute.String("messaging.destination.name", message.SubscribeTopicFromCtx(msg.Context())),
				attribute.String("messaging.message.id", msg.UUID)))
		defer span.End()
		msg.SetContext(ctx)
		out, err := h(msg)
		RecordFailure(span, err)
		return out, err
	}
}

// StartProducer starts a producer span called name as a child of ctx's
// span, for publishing msg on topic, and writes the new span's context
// into msg's metadata (replacing any there), so the consumers' spans are
// its children. The caller ends the span once the publish is
// acknowledged (or failed: RecordFailure).
func StartProducer(ctx context.Context, msg *message.Message, name, topic string) (context.Context, trace.Span) {
	ctx, span := Tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.destination.name", topic),
			attribute.String("messaging.message.id", msg.UUID)))
	delete(msg.Metadata, MetadataTraceState) // the new context's, if any, replaces it
	Inject(ctx, msg)
	return ctx, span
}

// RecordFailure records err on span and marks the span failed; a nil err
// does nothing.
func RecordFailure(span trace.Span, err error) {
	if err == nil {
		return
	}
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}
