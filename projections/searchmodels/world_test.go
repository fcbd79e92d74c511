package searchmodels_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/dev/testservers"
	"github.com/eventpipe/eventpipe/domains/order"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	store "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	migrate "github.com/eventpipe/eventpipe/migrations/dynamodb"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/elastic"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
)

func TestMain(m *testing.M) {
	testservers.RunChildIfRequested()
	runConsumeChildIfRequested()
	runVersionChildIfRequested()
	os.Exit(m.Run())
}

// world is a fresh events table and a unique alias prefix in the stack's
// Elasticsearch; the indices it made are deleted at the end.
type world struct {
	t      testing.TB
	store  *store.Store
	es     *esclient.Client
	prefix string
}

func newWorld(t testing.TB) *world {
	t.Helper()
	ctx := context.Background()
	ddb := testenv.DynamoDB(t)
	table := testenv.UniqueName(t, "events")
	if err := migrate.CreateEventsTable(ctx, ddb, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, ddb, table) })
	s, err := store.New(store.Config{Client: ddb, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, store: s, es: testenv.Elasticsearch(t), prefix: strings.ToLower(testenv.UniqueName(t, "t")) + "."}
	t.Cleanup(func() {
		_, _ = esapi.IndicesDeleteRequest{Index: []string{w.prefix + "*"}}.Do(context.Background(), w.es)
	})
	return w
}

// alias is the alias of projection p in this world.
func (w *world) alias(p elastic.Projection) string { return elastic.Alias(w.prefix, p.Name()) }

// applier returns an Applier of p behind its alias, creating the index.
func (w *world) applier(p elastic.Projection) *elastic.Applier {
	w.t.Helper()
	if err := elastic.EnsureIndex(context.Background(), w.es, p, w.alias(p)); err != nil {
		w.t.Fatal(err)
	}
	a, err := elastic.NewApplier(elastic.ApplierConfig{Client: w.es, Store: w.store, Projection: p, Index: w.alias(p)})
	if err != nil {
		w.t.Fatal(err)
	}
	return a
}

// append stores events for the aggregate and returns them as stored.
func (w *world) append(ref eventstore.Ref, expected int64, events ...eventstore.NewEvent) []eventstore.Envelope {
	w.t.Helper()
	req, err := eventstore.Prepare(ref, expected, eventstore.Change{Events: events}, eventstore.Schema{})
	if err != nil {
		w.t.Fatal(err)
	}
	res, err := w.store.Append(context.Background(), req)
	if err != nil {
		w.t.Fatal(err)
	}
	return res.Events
}

// todoHistory stores a random life for todo id: created, updated 0–5
// times, deleted one time in four.
func (w *world) todoHistory(id string, rng *rand.Rand) []eventstore.Envelope {
	ref := eventstore.Ref{Type: todo.AggregateType, ID: id}
	words := []string{"milk", "bread", "report", "garden", "invoice", "piano", "tax", "car"}
	data := func() todo.TodoData {
		return todo.TodoData{Title: words[rng.IntN(len(words))] + " " + id, Message: "buy " + words[rng.IntN(len(words))], Completed: rng.IntN(2) == 0}
	}
	evs := []eventstore.NewEvent{eventstore.Event(todo.TodoCreated, data())}
	for range rng.IntN(6) {
		evs = append(evs, eventstore.Event(todo.TodoUpdated, data()))
	}
	if rng.IntN(4) == 0 {
		evs = append(evs, eventstore.Event(todo.TodoDeleted, struct{}{}))
	}
	return w.append(ref, 0, evs...)
}

// orderHistory stores an order of total placed, paid, shipped and
// delivered up to step (1–4), or paid and refunded (step 5).
func (w *world) orderHistory(id, customer string, total int64, step int) []eventstore.Envelope {
	ref := eventstore.Ref{Type: order.AggregateType, ID: id}
	evs := []eventstore.NewEvent{eventstore.Event(order.OrderPlaced, order.OrderPlacedData{Customer: customer, Total: total})}
	if step >= 2 {
		evs = append(evs, eventstore.Event(order.PaymentProcessed, order.PaymentProcessedData{Amount: total}))
	}
	switch {
	case step == 5:
		evs = append(evs, eventstore.Event(order.OrderRefunded, order.OrderRefundedData{Amount: total}))
	case step >= 3:
		evs = append(evs, eventstore.Event(order.OrderShipped, order.OrderShippedData{TrackingNumber: "T-" + id}))
		if step == 4 {
			evs = append(evs, eventstore.Event(order.OrderDelivered, struct{}{}))
		}
	}
	return w.append(ref, 0, evs...)
}

// stored is a document with its version.
type stored = testenv.SearchDocument

// documents reads every document of index (after a refresh) by id.
func (w *world) documents(index string) map[string]stored {
	w.t.Helper()
	return testenv.SearchDocuments(w.t, w.es, index)
}

// scratch applies events in order to a fresh index of p and returns its
// documents: what a from-scratch replay gives.
func (w *world) scratch(p elastic.Projection, events []eventstore.Envelope) map[string]stored {
	w.t.Helper()
	ctx := context.Background()
	sw := &world{t: w.t, store: w.store, es: w.es, prefix: w.prefix + "scratch."}
	a := sw.applier(p)
	sorted := append([]eventstore.Envelope(nil), events...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].EventID < sorted[j].EventID })
	if _, err := a.Apply(ctx, sorted); err != nil {
		w.t.Fatal(err)
	}
	return sw.documents(sw.alias(p))
}

// assertSame fails unless got equals want document by document.
func assertSame(t testing.TB, label string, got, want map[string]stored) {
	t.Helper()
	if maps.Equal(got, want) {
		return
	}
	n := 0
	for id, w := range want {
		if g, ok := got[id]; !ok || g != w {
			t.Errorf("%s: document %s = %+v, want %+v", label, id, g, w)
			if n++; n > 5 {
				break
			}
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("%s: unexpected document %s", label, id)
		}
	}
	t.Fatalf("%s: %d documents, want %d", label, len(got), len(want))
}

// lastSequences is the highest sequence per aggregate id in events.
func lastSequences(events []eventstore.Envelope) map[string]int64 {
	out := map[string]int64{}
	for _, e := range events {
		out[e.AggregateID] = max(out[e.AggregateID], e.Sequence)
	}
	return out
}

// catchUpHistory pages w's store by type for CatchUp and Replay.
func (w *world) history() projections.HistoryPage {
	return func(ctx context.Context, eventType, after, cursor string) ([]eventstore.Envelope, string, error) {
		p, err := w.store.ListByType(ctx, store.TypeQuery{EventType: eventType, After: after, Cursor: cursor, Limit: 1000})
		return p.Events, p.Next, err
	}
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%04d", prefix, i)
	}
	return out
}
