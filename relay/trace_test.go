package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	st "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/relay"
	"github.com/eventpipe/eventpipe/testkit/integration"
	"github.com/eventpipe/eventpipe/tracing"
)

// A command span's context as an event stores it.
const (
	storedTrace       = "4bf92f3577b34da6a3ce929d0e0e4736"
	storedSpan        = "00f067aa0ba902b7"
	storedTraceParent = "00-" + storedTrace + "-" + storedSpan + "-01"
)

// TestTranslateCarriesTheStoredTraceParentAndOldItemsNone translates
// stream images of an event and an outbound item with a traceparent
// attribute, and of an event written before events stored one: the
// first two carry it in their message metadata and envelope, the old one
// reads as before, without.
func TestTranslateCarriesTheStoredTraceParentAndOldItemsNone(t *testing.T) {
	tr := relay.Translator{Topics: bus.Topics{Prefix: "t."}}
	traced := eventImage()
	traced["traceparent"] = sAttr(storedTraceParent)
	out, ok, err := tr.Translate(record(st.OperationTypeInsert, traced))
	if err != nil || !ok {
		t.Fatalf("traced event: %v %v", ok, err)
	}
	e, err := bus.EventFromMessage(out.Message)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Message.Metadata.Get(tracing.MetadataTraceParent); got != storedTraceParent || e.Metadata.TraceParent != storedTraceParent {
		t.Errorf("traced event: metadata traceparent %q, envelope %q; want %q", got, e.Metadata.TraceParent, storedTraceParent)
	}

	out, ok, err = tr.Translate(record(st.OperationTypeInsert, eventImage()))
	if err != nil || !ok {
		t.Fatalf("old event: %v %v", ok, err)
	}
	if e, err = bus.EventFromMessage(out.Message); err != nil {
		t.Fatal(err)
	}
	if _, has := out.Message.Metadata[tracing.MetadataTraceParent]; has || e.Metadata.TraceParent != "" {
		t.Errorf("old event: metadata %v, envelope metadata %+v; want no traceparent", out.Message.Metadata, e.Metadata)
	}

	outbound := map[string]st.AttributeValue{
		"pk": sAttr("AGGREGATE#tick#a"), "sk": sAttr("OUTBOUND#000000000001#000"), "outboundId": sAttr("01HZY5Q0000000000000000001"),
		"name": sAttr("tickAlert"), "aggregateType": sAttr("tick"), "aggregateId": sAttr("a"), "seq": nAttr("1"), "idx": nAttr("0"),
		"eventId": sAttr("01HZY5Q0000000000000000000"), "occurredAt": sAttr("2026-11-22T10:00:00Z"), "payload": sAttr(`{}`),
		"traceparent": sAttr(storedTraceParent),
	}
	out, ok, err = tr.Translate(record(st.OperationTypeInsert, outbound))
	if err != nil || !ok {
		t.Fatalf("outbound: %v %v", ok, err)
	}
	var rec eventstore.OutboundRecord
	if err := json.Unmarshal(out.Message.Payload, &rec); err != nil {
		t.Fatal(err)
	}
	if got := out.Message.Metadata.Get(tracing.MetadataTraceParent); got != storedTraceParent || rec.Metadata.TraceParent != storedTraceParent {
		t.Errorf("outbound: metadata traceparent %q, record %q; want %q", got, rec.Metadata.TraceParent, storedTraceParent)
	}
}

// TestRelayPublishesATracedEventInASpanOfItsOwn runs the relay on the
// real DynamoDB stream and Kafka with an SDK tracer provider recording
// spans. Of two events, one stored with a command span's traceparent and
// one without: the traced one is published in a producer span "publish
// <topic>", a child of the stored span, and its Kafka message carries
// that span's context; the untraced one gets no span and no traceparent.
func TestRelayPublishesATracedEventInASpanOfItsOwn(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev); _ = tp.Shutdown(context.Background()) })

	e := newEnv(t)
	for id, md := range map[string]eventstore.Metadata{"traced": {TraceParent: storedTraceParent}, "untraced": {}} {
		req, err := eventstore.Prepare(eventstore.Ref{Type: "tick", ID: id}, 0, eventstore.Change{CommandID: "cmd-" + id, Metadata: md,
			Events: []eventstore.NewEvent{eventstore.Event("Ticked", map[string]int{"n": 1})}}, eventstore.Schema{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.Append(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	runRelay(t, e.relayConfig(t, "w1"))
	topic := e.topics.Events("tick")
	msgs := testenv.Consume(t, e.ep.KafkaBrokers, testenv.UniqueName(t, "g"), topic, 2)

	// The span ends once Kafka acknowledged the batch, which may be just
	// after the message was consumed.
	var spans []sdktrace.ReadOnlySpan
	integration.Await(t, "a publish span to end", func() error {
		spans = spans[:0]
		for _, s := range rec.Ended() {
			if strings.HasPrefix(s.Name(), "publish ") {
				spans = append(spans, s)
			}
		}
		if len(spans) == 0 {
			return errors.New("no publish span ended")
		}
		return nil
	})
	if len(spans) != 1 {
		t.Fatalf("%d publish spans ended, want 1 (the traced event's)", len(spans))
	}
	span := spans[0]
	if span.Name() != "publish "+topic || span.SpanKind() != trace.SpanKindProducer {
		t.Errorf("span %q (%v), want %q, a producer span", span.Name(), span.SpanKind(), "publish "+topic)
	}
	if span.Parent().TraceID().String() != storedTrace || span.Parent().SpanID().String() != storedSpan || !span.Parent().IsRemote() {
		t.Errorf("the publish span's parent is %s/%s, want the stored %s/%s", span.Parent().TraceID(), span.Parent().SpanID(), storedTrace, storedSpan)
	}
	for _, m := range msgs {
		got := m.Metadata.Get(tracing.MetadataTraceParent)
		switch m.Metadata.Get(bus.MetadataPartitionKey) {
		case "traced":
			if want := tracing.TraceParent(trace.ContextWithSpanContext(context.Background(), span.SpanContext())); got != want {
				t.Errorf("traced message: traceparent %q, want the publish span's %q", got, want)
			}
		case "untraced":
			if got != "" {
				t.Errorf("untraced message: traceparent %q, want none", got)
			}
		}
	}
}
