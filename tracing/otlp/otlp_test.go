package otlp_test

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
	"go.opentelemetry.io/otel/trace/noop"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/eventpipe/eventpipe/tracing"
	"github.com/eventpipe/eventpipe/tracing/otlp"
)

func TestConfigValidate(t *testing.T) {
	for _, ok := range []string{"", "http://127.0.0.1:4318", "https://collector.example:4318/v1/traces"} {
		if err := (otlp.Config{Endpoint: ok}).Validate(); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"127.0.0.1:4318", "grpc://127.0.0.1:4317", "http://", "::"} {
		if err := (otlp.Config{Endpoint: bad}).Validate(); !errors.Is(err, otlp.ErrBadEndpoint) {
			t.Errorf("%q: %v, want ErrBadEndpoint", bad, err)
		}
	}
	if _, err := otlp.Setup(context.Background(), otlp.Config{Endpoint: "localhost:4318"}); !errors.Is(err, otlp.ErrBadEndpoint) {
		t.Errorf("Setup with a bad endpoint: %v", err)
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
	shutdown, err := otlp.Setup(context.Background(), otlp.Config{Endpoint: srv.URL, ServiceName: "eventpipe-test"})
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
			t.Setenv(otlp.EnvTracesEndpoint, c.traces)
			t.Setenv(otlp.EnvEndpoint, c.base)
			t.Setenv(otlp.EnvServiceName, "svc")
			cfg := otlp.FromEnv()
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
	shutdown, err := otlp.Setup(context.Background(), otlp.Config{})
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
