package e2e_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/projections/readmodels"
	"github.com/eventpipe/eventpipe/tracing"
)

// TestATraceFollowsTheCommandItsEventsAndTheProjection records every span
// with the SDK while the whole pipeline runs on the real services (the
// write side's HTTP API and command handlers, DynamoDB Local, the relay,
// Kafka and the todos projection in Postgres). A POST /todo carrying a
// W3C traceparent header and a command sent over the bus inside a span
// each yield one trace from that start to the projection's apply: the
// HTTP server span (a child of the header's span) → the command span →
// the relay's publish span → the projection's consumer span; and the
// send span → the command handler's consumer span → the command span →
// the relay's publish span → the projection's consumer span. The events
// carry the command span's context through DynamoDB and its stream.
func TestATraceFollowsTheCommandItsEventsAndTheProjection(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev); _ = tp.Shutdown(context.Background()) })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ep := rigs.Endpoints(t)
	ep.HTTPAddr = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	db := withLeasesAndReadModels(t, &ep, "trace")
	svc := rigs.NewService(t, ep, testenv.UniqueName(t, "g"))
	srv, err := svc.NewHTTP()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := eventpipe.NewRelay(ctx, eventpipe.RelayConfig{Process: eventpipe.Process{Endpoints: ep}, DiscoveryInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer rel.Close()
	cons, err := eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{Process: eventpipe.Process{Endpoints: ep}, DB: db, Names: []string{readmodels.Todos{}.Name()}, Start: bus.StartEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ready := make(chan string, 1)
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{svc.RunCommandHandlers, rel.Run, cons.Run,
		func(ctx context.Context) error { return srv.Run(ctx, ready) }} {
		wg.Go(func() { _ = run(ctx) })
	}
	defer func() { cancel(); wg.Wait() }()
	base := "http://" + <-ready

	// Over HTTP, with a caller's trace context.
	const remoteTrace, remoteSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, err := http.NewRequest("POST", base+"/todo", strings.NewReader(`{"id": "traced-http", "title": "TODO", "message": "Make coffee"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+remoteTrace+"-"+remoteSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /todo: %d", resp.StatusCode)
	}

	// Over the bus, inside a span of the caller's.
	sender, err := eventpipe.NewSender(eventpipe.SenderConfig{Process: eventpipe.Process{Endpoints: ep}})
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	sendCtx, root := tracing.Tracer().Start(ctx, "caller")
	res, err := sender.SendAndWait(sendCtx, rigs.TodoCmd(t, todo.CreateTodo, "traced-bus", todo.TodoData{Title: "TODO", Message: "by bus"}, nil))
	root.End()
	if err != nil || res.Status != "accepted" {
		t.Fatalf("send: %+v %v", res, err)
	}

	for _, id := range []string{"traced-http", "traced-bus"} {
		rigs.WaitFor(t, "todo "+id+" in the read model", func() bool {
			var n int
			if err := db.QueryRow(ctx, `SELECT count(*) FROM todos WHERE todo_id = $1`, id).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n == 1
		})
	}
	// The consumer span ends right after the apply's transaction, the
	// relay's once Kafka acknowledged the batch (possibly later).
	var spans []sdktrace.ReadOnlySpan
	rigs.WaitFor(t, "two projection and two relay spans ended", func() bool {
		spans = rec.Ended()
		applied, published := 0, 0
		for _, s := range spans {
			switch {
			case strings.Contains(s.Name(), "projection.todos"):
				applied++
			case strings.HasPrefix(s.Name(), "publish "):
				published++
			}
		}
		return applied >= 2 && published >= 2
	})
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = s
	}
	// chain walks from the span named like last (in trace) up its parents.
	chain := func(traceID trace.TraceID, last string) []string {
		for _, s := range spans {
			if s.SpanContext().TraceID() != traceID || !strings.Contains(s.Name(), last) {
				continue
			}
			var names []string
			for cur := s; ; {
				names = append([]string{cur.Name()}, names...)
				parent, ok := byID[cur.Parent().SpanID()]
				if !ok {
					names = append([]string{"remote " + cur.Parent().SpanID().String()}, names...)
					break
				}
				cur = parent
			}
			return names
		}
		return nil
	}
	httpTrace, _ := trace.TraceIDFromHex(remoteTrace)
	got := chain(httpTrace, "projection.todos")
	t.Logf("HTTP trace: %v", got)
	publish := "publish " + ep.TopicPrefix + "events.todo"
	if len(got) != 5 || got[0] != "remote "+remoteSpan || got[1] != "POST /todo" || got[2] != "command "+todo.CreateTodo ||
		got[3] != publish || !strings.Contains(got[4], "projection.todos") {
		t.Errorf("HTTP trace %v; want the caller's span → POST /todo → command %s → %s → the todos projection", got, todo.CreateTodo, publish)
	}
	got = chain(root.SpanContext().TraceID(), "projection.todos")
	t.Logf("bus trace: %v", got)
	if len(got) != 7 || got[1] != "caller" || got[2] != "send "+todo.CreateTodo || !strings.Contains(got[3], "commands.todo") ||
		got[4] != "command "+todo.CreateTodo || got[5] != publish || !strings.Contains(got[6], "projection.todos") {
		t.Errorf("bus trace %v; want caller → send %s → the command handler → command %s → %s → the todos projection", got, todo.CreateTodo, todo.CreateTodo, publish)
	}
}
