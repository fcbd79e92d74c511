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
// Setup installs the propagator and, when an OTLP endpoint is configured,
// a tracer provider exporting over OTLP/HTTP. Without an endpoint nothing
// is exported (the exporter is off by default), and trace contexts that
// arrive are still passed on.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventpipe/eventpipe/eventstore"
)

// Metadata keys of the W3C trace context in a Watermill message.
const (
	MetadataTraceParent = "traceparent"
	MetadataTraceState  = "tracestate"
)

// InstrumentationName names eventpipe's tracer.
const InstrumentationName = "github.com/eventpipe/eventpipe"

// Environment variables Config reads in FromEnv: OpenTelemetry's own.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvServiceName    = "OTEL_SERVICE_NAME"
)

// DefaultServiceName is Config.ServiceName's default.
const DefaultServiceName = "eventpipe"

// Config configures Setup. The zero Config exports nothing and only
// installs the propagator.
type Config struct {
	// Endpoint is the OTLP/HTTP URL spans are POSTed to, such as
	// http://127.0.0.1:4318/v1/traces; a URL without a path (or with
	// just "/") gets /v1/traces. Empty: nothing is exported (the
	// default). The exporter's other settings (headers, timeout, TLS
	// files, compression) come from the OTEL_EXPORTER_OTLP_* variables.
	Endpoint string
	// ServiceName is the service.name resource attribute (default
	// DefaultServiceName).
	ServiceName string
}

// FromEnv returns the Config OpenTelemetry's environment variables give:
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is, else
// OTEL_EXPORTER_OTLP_ENDPOINT with /v1/traces appended to its path (the
// OTLP/HTTP rule for the base endpoint), and OTEL_SERVICE_NAME.
func FromEnv() Config {
	c := Config{Endpoint: os.Getenv(EnvTracesEndpoint), ServiceName: os.Getenv(EnvServiceName)}
	if c.Endpoint == "" {
		c.Endpoint = baseEndpoint(os.Getenv(EnvEndpoint))
	}
	return c
}

// tracesPath is the OTLP/HTTP path of trace exports.
const tracesPath = "/v1/traces"

// baseEndpoint is the traces URL of an OTEL_EXPORTER_OTLP_ENDPOINT value:
// its path followed by /v1/traces. A value that does not parse is
// returned as it is, for Validate to report.
func baseEndpoint(v string) string {
	u, err := url.Parse(v)
	if v == "" || err != nil {
		return v
	}
	u.Path = path.Join("/", u.Path, tracesPath)
	return u.String()
}

func (c *Config) setDefaults() {
	if c.ServiceName == "" {
		c.ServiceName = DefaultServiceName
	}
}

// ErrBadEndpoint reports an Endpoint that is not an http(s) URL with a
// host.
var ErrBadEndpoint = errors.New("tracing: the OTLP endpoint must be an http:// or https:// URL with a host")

// Validate reports an Endpoint that is not an http(s) URL with a host
// (wrapping ErrBadEndpoint and an *eventstore.ValidationError).
func (c Config) Validate() error {
	if c.Endpoint == "" {
		return nil
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: %w", ErrBadEndpoint, &eventstore.ValidationError{Field: "Endpoint", Reason: fmt.Sprintf("%q", c.Endpoint)})
	}
	return nil
}

// Setup installs the W3C trace-context propagator globally (for HTTP and
// other instrumentation; eventpipe's messages carry it regardless) and,
// with an Endpoint, an SDK tracer provider that batches spans to it over
// OTLP/HTTP. Without an Endpoint the global tracer provider is left as it
// is (OpenTelemetry's no-op one unless the program set another): no span
// is recorded, and a trace context that arrives still passes on. The
// returned shutdown flushes and stops the exporter (a no-op without one);
// call it before the program exits.
func Setup(ctx context.Context, cfg Config) (shutdown func(context.Context) error, err error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	otel.SetTextMapPropagator(propagator)
	if cfg.Endpoint == "" {
		return func(context.Context) error { return nil }, nil
	}
	u, _ := url.Parse(cfg.Endpoint) // Validate parsed it
	urlPath := u.Path
	if urlPath == "" || urlPath == "/" {
		urlPath = tracesPath
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(u.Host), otlptracehttp.WithURLPath(urlPath)}
	if u.Scheme == "http" {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter for %s: %w", cfg.Endpoint, err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(cfg.ServiceName))))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

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
