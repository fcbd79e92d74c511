package relay

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/eventpipe/eventpipe/tracing"
)

// publishSpans are the relay's spans of one batch's messages.
type publishSpans []trace.Span

// startPublishSpans starts a producer span "publish <topic>" for every
// message in out that carries a trace context (an event appended by a
// traced command: bus.EventMessage copies the stored traceparent into its
// metadata), as a child of that context, and puts the span's context in
// the message's metadata instead, so each consumer's span is a child of
// the relay's. A message without one gets no span: the relay continues
// traces, it starts none.
func startPublishSpans(ctx context.Context, out map[string][]Outgoing) publishSpans {
	var spans publishSpans
	for topic, msgs := range out {
		for _, o := range msgs {
			parent := tracing.Extract(ctx, o.Message)
			if !trace.SpanContextFromContext(parent).IsValid() {
				continue
			}
			_, span := tracing.StartProducer(parent, o.Message, "publish "+topic, topic)
			spans = append(spans, span)
		}
	}
	return spans
}

// failed records a failed publish attempt on every span.
func (s publishSpans) failed(err error) {
	for _, span := range s {
		span.RecordError(err)
	}
}

// end ends every span, marking it failed when err is not nil (the batch
// was given up).
func (s publishSpans) end(err error) {
	for _, span := range s {
		tracing.RecordFailure(span, err)
		span.End()
	}
}
