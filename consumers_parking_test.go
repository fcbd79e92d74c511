package eventpipe_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/internal/endpoints"
	pgmigrate "github.com/eventpipe/eventpipe/migrations/postgres"
	"github.com/eventpipe/eventpipe/parking"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/readmodels"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// migratedPostgres creates a Postgres schema for t with eventpipe's own
// migrations (parked_events among them) and returns the URL that selects
// it; the schema is dropped when t ends.
func migratedPostgres(t *testing.T) string {
	t.Helper()
	schema, url := testenv.PostgresSchema(t, "rm")
	if _, err := pgmigrate.Migrate(context.Background(), pgmigrate.Config{URL: testenv.Endpoints().Postgres, Schema: schema}); err != nil {
		t.Fatal(err)
	}
	return url
}

// refusingTodos is the todos read model with a bug: it refuses,
// permanently, an update titled "poison".
type refusingTodos struct{ readmodels.Todos }

// refusedTitle is refusingTodos' permanent error.
type refusedTitle struct{ e eventstore.Envelope }

func (r refusedTitle) Error() string   { return "refused " + r.e.String() + ": poison" }
func (r refusedTitle) Permanent() bool { return true }

func (p refusingTodos) Apply(ctx context.Context, b *pgx.Batch, e eventstore.Envelope) error {
	if e.EventType == todo.TodoUpdated {
		var d todo.TodoData
		if err := e.DecodePayload(&d); err != nil {
			return err
		}
		if d.Title == "poison" {
			return refusedTitle{e}
		}
	}
	return p.Todos.Apply(ctx, b, e)
}

// parkingPipeline is a namespace with a catalogue of the todo domain and
// the refusing todos read model, migrated with eventpipe.Migrate into a
// schema of its own, and a publisher standing in for the relay.
type parkingPipeline struct {
	ep      endpoints.Endpoints
	schema  string // the Postgres schema ep.Postgres selects (search_path)
	catalog *eventpipe.Catalog
	db      *pgxpool.Pool
	pub     message.Publisher
	topics  bus.Topics
	store   eventstore.Store
}

func newParkingPipeline(t *testing.T) *parkingPipeline {
	t.Helper()
	ctx := context.Background()
	ep := testEndpoints(t)
	schema, url := testenv.PostgresSchema(t, "rm")
	ep.Postgres = url
	ddb := testenv.DynamoDB(t)
	ep.LeasesTable, ep.AnalyticsTable = testenv.UniqueName(t, "leases"), testenv.UniqueName(t, "analytics")
	t.Cleanup(func() { testenv.DeleteTable(t, ddb, ep.LeasesTable); testenv.DeleteTable(t, ddb, ep.AnalyticsTable) })
	catalog := eventpipe.NewCatalog()
	if err := catalog.AddDomain(todo.Domain()); err != nil {
		t.Fatal(err)
	}
	if err := catalog.AddReadModel(refusingTodos{}); err != nil {
		t.Fatal(err)
	}
	if _, err := eventpipe.Migrate(ctx, eventpipe.MigrateConfig{Catalog: catalog, Endpoints: ep, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	store, err := eventpipe.OpenStore(ctx, ep, catalog, nil)
	if err != nil {
		t.Fatal(err)
	}
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: ep.KafkaBrokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return &parkingPipeline{ep: ep, schema: schema, catalog: catalog, db: db, pub: pub, topics: bus.Topics{Prefix: ep.TopicPrefix}, store: store}
}

// todo appends todo id, created and then updated once per title, to the
// store and publishes its events onto the todo events topic, as the
// relay would.
func (p *parkingPipeline) todo(t *testing.T, id string, titles ...string) {
	t.Helper()
	ch := eventstore.Change{Events: []eventstore.NewEvent{eventstore.Event(todo.TodoCreated, todo.TodoData{Title: id + "-created"})}}
	for _, title := range titles {
		ch.Events = append(ch.Events, eventstore.Event(todo.TodoUpdated, todo.TodoData{Title: title}))
	}
	p.appendAndPublish(t, id, 0, ch)
}

// appendAndPublish appends ch to todo id at version and publishes the
// stored events onto the todo events topic, as the relay would.
func (p *parkingPipeline) appendAndPublish(t *testing.T, id string, version int64, ch eventstore.Change) {
	t.Helper()
	req, err := eventstore.Prepare(eventstore.Ref{Type: todo.AggregateType, ID: id}, version, ch, p.catalog.Schema())
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.store.Append(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*message.Message
	for _, e := range res.Events {
		m, err := bus.EventMessage(e)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	if err := p.pub.Publish(p.topics.Events(todo.AggregateType), msgs...); err != nil {
		t.Fatal(err)
	}
}

// consume runs the todos read model through eventpipe.NewConsumers, as
// `eventpipe consume todos` does (without catch-up: the events arrive
// on the topic, and catch-up from the store does not park), until t
// ends.
func (p *parkingPipeline) consume(t *testing.T, noParking bool) {
	t.Helper()
	cons, err := eventpipe.NewConsumers(context.Background(), eventpipe.ConsumersConfig{Catalog: p.catalog, Endpoints: p.ep,
		Names: []string{readmodels.Todos{}.Name()}, Start: bus.StartEarliest, NoParking: noParking, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cons.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("consumers: %v", err)
		}
		if err := cons.Close(); err != nil {
			t.Errorf("close consumers: %v", err)
		}
	})
}

// rows returns the todos read model's title and version by todo id.
func (p *parkingPipeline) rows(t *testing.T) map[string]string {
	t.Helper()
	rows, err := p.db.Query(context.Background(), `SELECT todo_id, title, version FROM todos`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for rows.Next() {
		var id, title string
		var version int64
		if err := rows.Scan(&id, &title, &version); err != nil {
			t.Fatal(err)
		}
		out[id] = fmt.Sprintf("%s@%d", title, version)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// todosGroup returns the todos read model's group in Status.
func (p *parkingPipeline) todosGroup(t *testing.T) (eventpipe.GroupStatus, eventpipe.StatusReport) {
	t.Helper()
	r := eventpipe.Status(context.Background(), eventpipe.StatusConfig{Catalog: p.catalog, Endpoints: p.ep})
	i := slices.IndexFunc(r.Groups, func(g eventpipe.GroupStatus) bool { return g.Projection == readmodels.Todos{}.Name() })
	if i < 0 {
		t.Fatalf("no todos group in %+v", r.Groups)
	}
	if g := r.Groups[i]; g.Group != projections.ConsumerGroup(p.topics, "todos") {
		t.Fatalf("todos group %+v, want group %s", g, projections.ConsumerGroup(p.topics, "todos"))
	}
	return r.Groups[i], r
}

// waitUntil polls cond until it holds; it fails t, with the state cond
// last reported, when cond does not hold within integration.HangAfter.
func waitUntil(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	integration.Await(t, what, func() error {
		if ok, state := cond(); !ok {
			return errors.New(state)
		}
		return nil
	})
}

// TestConsumersParkAPermanentlyFailingAggregateAndStatusCountsIt runs,
// through eventpipe.NewConsumers with its defaults, a todos read model
// that refuses an update titled "poison": todo A is refused at sequence
// 3 and parked there with 4 and 5 behind it, todo C at 2, while todo B is
// applied to its end. ParkedList shows the four parked events with their
// reasons, nothing went to the poison topic, and Status counts 4 parked
// events of 2 aggregates for the todos read model.
func TestConsumersParkAPermanentlyFailingAggregateAndStatusCountsIt(t *testing.T) {
	p := newParkingPipeline(t)
	p.todo(t, "a", "a2", "poison", "a4", "a5")
	p.todo(t, "b", "b2", "b3")
	p.todo(t, "c", "poison")
	p.consume(t, false)

	list := func() []parking.Event {
		t.Helper()
		evs, err := eventpipe.ParkedList(context.Background(), eventpipe.ParkedListConfig{Catalog: p.catalog, Endpoints: p.ep, Projection: "todos"})
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	var parked []string
	waitUntil(t, "b applied to its end, a and c parked", func() (bool, string) {
		parked = parked[:0]
		for _, ev := range list() {
			parked = append(parked, fmt.Sprintf("%s#%d", ev.Envelope.AggregateID, ev.Envelope.Sequence))
		}
		rows := p.rows(t)
		return rows["b"] == "b3@3" && len(parked) == 4, fmt.Sprintf("rows %v, parked %v", rows, parked)
	})
	if want := []string{"a#3", "a#4", "a#5", "c#2"}; !slices.Equal(parked, want) {
		t.Fatalf("parked %v, want %v", parked, want)
	}
	evs := list()
	for i, want := range []string{"poison", parking.BehindReason(3), parking.BehindReason(3), "poison"} {
		if !strings.Contains(evs[i].Reason, want) || evs[i].Consumer != "todos" {
			t.Errorf("parked event %d: consumer %s, reason %q, want todos and %q", i, evs[i].Consumer, evs[i].Reason, want)
		}
	}
	if rows := p.rows(t); rows["a"] != "a2@2" || rows["c"] != "c-created@1" {
		t.Fatalf("rows %v, want a at a2@2 and c at c-created@1 (nothing applied past a parked event)", rows)
	}

	g, r := p.todosGroup(t)
	if want := (parking.Counts{Events: 4, Aggregates: 2}); g.Parked != want || g.Poisoned != 0 || r.ParkedErr != nil {
		t.Fatalf("todos group %+v (parked error %v), want %+v parked and nothing poisoned", g, r.ParkedErr, want)
	}
	if len(r.Errors) != 0 {
		t.Fatalf("status errors %v", r.Errors)
	}
	for _, other := range r.Groups {
		if other.Projection == "" && other.Parked != (parking.Counts{}) {
			t.Fatalf("group %+v of no projection has parked events", other)
		}
	}
}

// TestConsumersWithNoParkingPoisonInsteadOfParking runs the same
// refusing read model with ConsumersConfig.NoParking: todo A's refused
// update goes to the poison topic, and so does its later update (its gap
// repair reads the refused event back and fails again), while todo B is
// applied; nothing is parked, and Status says so.
func TestConsumersWithNoParkingPoisonInsteadOfParking(t *testing.T) {
	p := newParkingPipeline(t)
	p.todo(t, "a", "a2", "poison", "a4")
	p.todo(t, "b", "b2")
	p.consume(t, true)

	waitUntil(t, "b applied, a's refused event and the one after it poisoned", func() (bool, string) {
		g, _ := p.todosGroup(t)
		rows := p.rows(t)
		return rows["b"] == "b2@2" && g.Poisoned == 2, fmt.Sprintf("rows %v, group %+v", rows, g)
	})
	if rows := p.rows(t); rows["a"] != "a2@2" {
		t.Fatalf("rows %v, want a at a2@2", rows)
	}
	g, r := p.todosGroup(t)
	if evs, err := eventpipe.ParkedList(context.Background(), eventpipe.ParkedListConfig{Catalog: p.catalog, Endpoints: p.ep}); err != nil || len(evs) != 0 {
		t.Fatalf("ParkedList = %+v, %v; want nothing parked", evs, err)
	}
	if g.Parked != (parking.Counts{}) || r.ParkedErr != nil {
		t.Fatalf("todos group %+v (parked error %v), want nothing parked", g, r.ParkedErr)
	}
}
