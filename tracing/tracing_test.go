package tracing_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

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

func TestConfigValidate(t *testing.T) {
	for _, ok := range []string{"", "http://127.0.0.1:4318", "https://collector.example:4318/v1/traces"} {
		if err := (tracing.Config{Endpoint: ok}).Validate(); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"127.0.0.1:4318", "grpc://127.0.0.1:4317", "http://", "::"} {
		if err := (tracing.Config{Endpoint: bad}).Validate(); !errors.Is(err, tracing.ErrBadEndpoint) {
			t.Errorf("%q: %v, want ErrBadEndpoint", bad, err)
		}
	}
	if _, err := tracing.Setup(context.Background(), tracing.Config{Endpoint: "localhost:4318"}); !errors.Is(err, tracing.ErrBadEndpoint) {
		t.Errorf("Setup with a bad endpoint: %v", err)
	}
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

// TestSetupExportsOverOTLPHTTP points the exporter at a local server
// (a URL without a path) and checks that a span arrives there on
// shutdown, POSTed as OTLP protobuf to /v1/traces.
func TestSetupExportsOverOTLPHTTP(t *testing.T) {
	prev := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	got := make(chan *collectortrace.ExportTraceServiceRequest, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			t.Errorf("%s %s: %d bytes that are not an OTLP export request", r.Method, r.URL.Path, len(body))
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		select {
		case got <- &req:
		default:
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		_, _ = w.Write(b)
	}))
	defer srv.Close()
	shutdown, err := tracing.Setup(context.Background(), tracing.Config{Endpoint: srv.URL, ServiceName: "eventpipe-test"})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tracing.Tracer().Start(context.Background(), "exported")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case req := <-got:
		rs := req.GetResourceSpans()
		if len(rs) == 0 || len(rs[0].GetScopeSpans()) == 0 || len(rs[0].GetScopeSpans()[0].GetSpans()) == 0 {
			t.Fatalf("the export holds no span: %v", req)
		}
		if name := rs[0].GetScopeSpans()[0].GetSpans()[0].GetName(); name != "exported" {
			t.Errorf("exported span %q, want %q", name, "exported")
		}
		service := ""
		for _, a := range rs[0].GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		if service != "eventpipe-test" {
			t.Errorf("service.name %q", service)
		}
	case <-ctx.Done():
		t.Fatal("no export reached the OTLP endpoint")
	}
}

// TestFromEnvFollowsTheOTLPVariables checks the precedence of the
// OpenTelemetry variables and the OTLP/HTTP path rule: the traces
// endpoint is taken as it is, the base endpoint gets /v1/traces after
// its path.
func TestFromEnvFollowsTheOTLPVariables(t *testing.T) {
	for _, c := range []struct {
		name, traces, base, want string
	}{
		{name: "neither"},
		{name: "base", base: "http://127.0.0.1:4318", want: "http://127.0.0.1:4318/v1/traces"},
		{name: "base with a path", base: "https://collector.example:4318/otlp/", want: "https://collector.example:4318/otlp/v1/traces"},
		{name: "traces", traces: "http://127.0.0.1:4318/custom", want: "http://127.0.0.1:4318/custom"},
		{name: "traces wins", traces: "http://127.0.0.1:4318/v1/traces", base: "http://127.0.0.1:9999", want: "http://127.0.0.1:4318/v1/traces"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(tracing.EnvTracesEndpoint, c.traces)
			t.Setenv(tracing.EnvEndpoint, c.base)
			t.Setenv(tracing.EnvServiceName, "svc")
			cfg := tracing.FromEnv()
			if cfg.Endpoint != c.want || cfg.ServiceName != "svc" {
				t.Errorf("FromEnv() = %+v, want endpoint %q and service svc", cfg, c.want)
			}
			if err := cfg.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestWithoutAnExporterTheTracePassesThrough runs a consumer that
// publishes, with tracing set up without an endpoint and OpenTelemetry's
// no-op tracer provider: nothing is recorded, yet the trace context of
// the incoming message reaches the outgoing one unchanged.
func TestWithoutAnExporterTheTracePassesThrough(t *testing.T) {
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(noop.NewTracerProvider())
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	shutdown, err := tracing.Setup(context.Background(), tracing.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(context.Background())
	const incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	in := message.NewMessage(watermill.NewUUID(), nil)
	in.Metadata.Set(tracing.MetadataTraceParent, incoming)
	out := message.NewMessage(watermill.NewUUID(), nil)
	h := tracing.Middleware(func(m *message.Message) ([]*message.Message, error) {
		_, span := tracing.StartProducer(m.Context(), out, "publish", "topic")
		span.End()
		return nil, nil
	})
	if _, err := h(in); err != nil {
		t.Fatal(err)
	}
	if got := out.Metadata.Get(tracing.MetadataTraceParent); got != incoming {
		t.Errorf("outgoing traceparent %q, want the incoming %q", got, incoming)
	}
}
