package rigs

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
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
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/operator"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/readmodels"
)

// refusingTodos is the todos read model with a bug: it refuses,
// permanently, an update titled "poison".
type refusingTodos struct{ readmodels.Todos }

// refusedTitle is refusingTodos' permanent error.
type refusedTitle struct{ e eventstore.Envelope }

func (r refusedTitle) Error() string { return "refused " + r.e.String() + ": poison" }

func (r refusedTitle) Permanent() bool { return true }

func (p refusingTodos) Apply(ctx context.Context, b *pgx.Batch, e eventstore.Envelope) error {
	if e.EventType == todo.TodoUpdated {
		d, err := todo.TodoUpdatedEvent.Decode(e)
		if err != nil {
			return err
		}
		if d.Title == "poison" {
			return refusedTitle{e}
		}
	}
	return p.Todos.Apply(ctx, b, e)
}

// ParkingPipeline is a namespace with a catalogue of the todo domain and
// the refusing todos read model, migrated with eventpipe.Migrate into a
// schema of its own, and a publisher standing in for the relay.
type ParkingPipeline struct {
	EP      endpoints.Endpoints
	Schema  string // the Postgres schema EP.Postgres selects (search_path)
	Catalog *eventpipe.Catalog
	DB      *pgxpool.Pool
	Pub     message.Publisher
	Topics  bus.Topics
	Store   eventstore.Store
}

// NewParkingPipeline makes a ParkingPipeline on fresh tables, topics and
// schema, removed when t ends.
func NewParkingPipeline(t *testing.T) *ParkingPipeline {
	t.Helper()
	ctx := context.Background()
	ep := Endpoints(t)
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
	if _, err := eventpipe.Migrate(ctx, eventpipe.MigrateConfig{Process: eventpipe.Process{Catalog: catalog, Endpoints: ep, Logger: slog.New(slog.DiscardHandler)}}); err != nil {
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
	return &ParkingPipeline{EP: ep, Schema: schema, Catalog: catalog, DB: db, Pub: pub, Topics: bus.Topics{Prefix: ep.TopicPrefix}, Store: store}
}

// Todo appends todo id, created and then updated once per title, to the
// store and publishes its events onto the todo events topic, as the
// relay would.
func (p *ParkingPipeline) Todo(t *testing.T, id string, titles ...string) {
	t.Helper()
	ch := eventstore.Change{Events: []eventstore.NewEvent{todo.TodoCreatedEvent.New(todo.TodoCreatedData{TodoData: todo.TodoData{Title: id + "-created"}})}}
	for _, title := range titles {
		ch.Events = append(ch.Events, todo.TodoUpdatedEvent.New(todo.TodoData{Title: title}))
	}
	p.AppendAndPublish(t, id, 0, ch)
}

// AppendAndPublish appends ch to todo id at version and publishes the
// stored events onto the todo events topic, as the relay would.
func (p *ParkingPipeline) AppendAndPublish(t *testing.T, id string, version int64, ch eventstore.Change) {
	t.Helper()
	req, err := eventstore.Prepare(eventstore.Ref{Type: todo.AggregateType, ID: id}, version, ch, p.Catalog.Schema())
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Store.Append(context.Background(), req)
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
	if err := p.Pub.Publish(p.Topics.Events(todo.AggregateType), msgs...); err != nil {
		t.Fatal(err)
	}
}

// Consume runs the todos read model through eventpipe.NewConsumers, as
// `eventpipe consume todos` does (without catch-up: the events arrive
// on the topic, and catch-up from the store does not park), until t
// ends.
func (p *ParkingPipeline) Consume(t *testing.T, noParking bool) {
	t.Helper()
	cons, err := eventpipe.NewConsumers(context.Background(), eventpipe.ConsumersConfig{Process: eventpipe.Process{Catalog: p.Catalog, Endpoints: p.EP, Logger: slog.New(slog.DiscardHandler)},
		Names: []string{readmodels.Todos{}.Name()}, Start: bus.StartEarliest, NoParking: noParking})
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

// Rows returns the todos read model's title and version by todo id.
func (p *ParkingPipeline) Rows(t *testing.T) map[string]string {
	t.Helper()
	rows, err := p.DB.Query(context.Background(), `SELECT todo_id, title, version FROM todos`)
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

// TodosGroup returns the todos read model's group in Status.
func (p *ParkingPipeline) TodosGroup(t *testing.T) (operator.GroupStatus, operator.StatusReport) {
	t.Helper()
	r := operator.Status(context.Background(), operator.StatusConfig{Process: eventpipe.Process{Catalog: p.Catalog, Endpoints: p.EP}})
	i := slices.IndexFunc(r.Groups, func(g operator.GroupStatus) bool { return g.Projection == readmodels.Todos{}.Name() })
	if i < 0 {
		t.Fatalf("no todos group in %+v", r.Groups)
	}
	if g := r.Groups[i]; g.Group != projections.ConsumerGroup(p.Topics, "todos") {
		t.Fatalf("todos group %+v, want group %s", g, projections.ConsumerGroup(p.Topics, "todos"))
	}
	return r.Groups[i], r
}

// Update appends updates of todo id, whose version is version, and
// publishes them as the relay would.
func (p *ParkingPipeline) Update(t *testing.T, id string, version int64, titles ...string) {
	t.Helper()
	var ch eventstore.Change
	for _, title := range titles {
		ch.Events = append(ch.Events, todo.TodoUpdatedEvent.New(todo.TodoData{Title: title}))
	}
	p.AppendAndPublish(t, id, version, ch)
}
