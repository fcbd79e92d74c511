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

// TestSetupExportsOverOTLPHTTP points the exporter at a local server and
// checks that a span arrives there, as OTLP protobuf on /v1/traces.
func TestSetupExportsOverOTLPHTTP(t *testing.T) {
	prev := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	got := make(chan *collectortrace.ExportTraceServiceRequest, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
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
