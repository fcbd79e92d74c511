// Package otlp exports eventpipe's traces over OTLP/HTTP: Setup installs
// the W3C propagator and, with an endpoint, a tracer provider batching
// spans to it. It is apart from package tracing so that the libraries
// that trace (the bus, commands, the relay) link only OpenTelemetry's
// API; a program links the exporter by calling Setup, as the eventpipe
// binary does.
package otlp

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/tracing"
)

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
var ErrBadEndpoint = errors.New("otlp: the endpoint must be an http:// or https:// URL with a host")

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
	otel.SetTextMapPropagator(tracing.Propagator())
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
		return nil, fmt.Errorf("otlp: exporter for %s: %w", cfg.Endpoint, err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(cfg.ServiceName))))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}
