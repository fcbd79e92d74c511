package eventpipe_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/httpapi"
	"github.com/eventpipe/eventpipe/internal/dynamoclient"
	migrate "github.com/eventpipe/eventpipe/migrations/dynamodb"
	"github.com/eventpipe/eventpipe/projections/searchmodels"
	"github.com/eventpipe/eventpipe/relay"
	"github.com/eventpipe/eventpipe/sagas/transfersaga"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// counterDomain is a tiny domain whose one event changed shape: version 1
// of "Counted" carried {"n": …}, version 2 carries {"count": …}. The
// handler of "Count" decides against the counter's STATE.
type counter struct {
	Total int `json:"total"`
}

func counterDomain(payloadField string) commands.Domain {
	counted := eventstore.DefineEvent[map[string]int]("Counted")
	processor := eventstore.NewProcessor(func() counter { return counter{} },
		eventstore.OnEvent(counted, func(s counter, p map[string]int, _ *eventstore.Outbox) (counter, error) {
			s.Total += p[payloadField]
			return s, nil
		}),
	)
	return commands.FacetDomain("counter", processor,
		commands.OnCommand(commands.DefineCommand[map[string]int]("Count"), func(_ eventstore.State[counter], _ commands.Command, p map[string]int) ([]eventstore.NewEvent, error) {
			return []eventstore.NewEvent{counted.New(map[string]int{payloadField: p["by"]})}, nil
		}),
	)
}

func catalogWith(t *testing.T, d commands.Domain) *eventpipe.Catalog {
	t.Helper()
	c := eventpipe.NewCatalog()
	if err := c.AddDomain(d); err != nil {
		t.Fatal(err)
	}
	return c
}

func count(t *testing.T, reg *commands.Registry, id string, by int) commands.Result {
	t.Helper()
	cmd, err := commands.NewJSON("Count", "counter", id, map[string]int{"by": by})
	if err != nil {
		t.Fatal(err)
	}
	h, ok := reg.Lookup("Count")
	if !ok {
		t.Fatal("no handler for Count")
	}
	res, err := h.Handle(context.Background(), cmd)
	if err != nil || res.Status != commands.StatusAccepted {
		t.Fatalf("Count by %d: %+v, %v", by, res, err)
	}
	return res
}

// TestAnUpcasterRegisteredOnceIsAppliedByTheStoreTheFacetAndTheRelay
// stores version-1 events with the old code, then registers the v1→v2
// upcaster once, on the new code's catalogue, and reads through
// everything built from that catalogue: the store loads version 2, the
// facet's handler writes new events at version 2 and its recalculation
// folds the upcast payloads, and the relay publishes version 2.
func TestAnUpcasterRegisteredOnceIsAppliedByTheStoreTheFacetAndTheRelay(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := testenv.DynamoDB(t)
	ep := testenv.Endpoints()
	ep.EventsTable, ep.LeasesTable = testenv.UniqueName(t, "events"), testenv.UniqueName(t, "leases")
	if err := migrate.CreateEventsTable(ctx, db, ep.EventsTable); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, db, ep.EventsTable) })
	if err := migrate.CreateLeasesTable(ctx, db, ep.LeasesTable); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, db, ep.LeasesTable) })
	ref := eventstore.Ref{Type: "counter", ID: "c1"}

	// The old code: "Counted" v1 is {"n": …}.
	oldCatalog := catalogWith(t, counterDomain("n"))
	oldStore, err := eventpipe.OpenStore(ctx, ep, oldCatalog, nil)
	if err != nil {
		t.Fatal(err)
	}
	oldHandlers, err := oldCatalog.Handlers(oldStore)
	if err != nil {
		t.Fatal(err)
	}
	count(t, oldHandlers, ref.ID, 2)
	count(t, oldHandlers, ref.ID, 3)

	// The new code: one upcaster, registered once.
	catalog := catalogWith(t, counterDomain("count"))
	if err := catalog.Upcasters().Register("Counted", 1, func(p json.RawMessage) (json.RawMessage, error) {
		var v1 map[string]int
		if err := json.Unmarshal(p, &v1); err != nil {
			return nil, err
		}
		return json.Marshal(map[string]int{"count": v1["n"]})
	}); err != nil {
		t.Fatal(err)
	}

	// The store.
	store, err := eventpipe.OpenStore(ctx, ep, catalog, nil)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := store.Load(ctx, ref, 0)
	if err != nil || len(evs) != 2 {
		t.Fatalf("load: %d events, %v", len(evs), err)
	}
	for i, want := range []string{`{"count":2}`, `{"count":3}`} {
		if evs[i].SchemaVersion != 2 || string(evs[i].Payload) != want {
			t.Errorf("store: event %d is v%d %s, want v2 %s", i+1, evs[i].SchemaVersion, evs[i].Payload, want)
		}
	}

	// The facet: its handler appends at the current version, and a
	// recalculation folds every event, upcast, through the new rule.
	handlers, err := catalog.Handlers(store)
	if err != nil {
		t.Fatal(err)
	}
	count(t, handlers, ref.ID, 4)
	evs, err = store.Load(ctx, ref, 2)
	if err != nil || len(evs) != 1 || evs[0].SchemaVersion != 2 || string(evs[0].Payload) != `{"count":4}` {
		t.Fatalf("facet: new event %+v, %v; want v2 {\"count\":4}", evs, err)
	}
	facet, err := eventstore.NewFacet(eventstore.FacetConfig[counter]{Store: store, AggregateType: "counter",
		Processor: eventstore.Processor[counter]{Initial: func() counter { return counter{} }, Rules: map[string]eventstore.Rule[counter]{
			"Counted": eventstore.On(func(s counter, p map[string]int, _ *eventstore.Outbox) (counter, error) {
				s.Total += p["count"]
				return s, nil
			}),
		}}, Upcasters: catalog.Upcasters()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := facet.Recalculate(ctx, ref.ID, eventstore.Change{})
	if err != nil || res.State.Item.Total != 9 {
		t.Fatalf("facet: recalculated total %+v, %v; want 9 (2+3 upcast, 4)", res.State.Item, err)
	}

	// The relay.
	goch := gochannel.NewGoChannel(gochannel.Config{Persistent: true}, watermill.NopLogger{})
	defer goch.Close()
	topics := bus.Topics{Prefix: testenv.UniqueName(t, "ns") + "."}
	published, err := goch.Subscribe(ctx, topics.Events("counter"))
	if err != nil {
		t.Fatal(err)
	}
	streams, err := dynamoclient.NewStreams(ctx, dynamoclient.Config{Endpoint: ep.DynamoDB})
	if err != nil {
		t.Fatal(err)
	}
	rl, err := relay.New(relay.Config{Streams: streams, DynamoDB: db, EventsTable: ep.EventsTable, LeaseTable: ep.LeasesTable,
		Publisher: goch, Topics: topics, Upcasters: catalog.Upcasters(), WorkerID: "w1", DiscoveryInterval: 250 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- rl.Run(ctx) }()
	defer func() { cancel(); <-done }()
	payloads := make([]string, 3) // by sequence: the stream may interleave transactions
	for got := 0; got < 3; got++ {
		select {
		case msg := <-published:
			msg.Ack()
			e, err := bus.EventFromMessage(msg)
			if err != nil {
				t.Fatal(err)
			}
			if e.SchemaVersion != 2 {
				t.Errorf("relay: published %s at v%d, want v2", e, e.SchemaVersion)
			}
			if e.Sequence < 1 || e.Sequence > 3 || payloads[e.Sequence-1] != "" {
				t.Fatalf("relay: unexpected %s", e)
			}
			payloads[e.Sequence-1] = string(e.Payload)
		case <-time.After(integration.HangAfter()):
			t.Fatalf("relay: %d of 3 events published, then none for %v (%s)", got, integration.HangAfter(), integration.EnvHangAfter)
		}
	}
	if want := []string{`{"count":2}`, `{"count":3}`, `{"count":4}`}; !slices.Equal(payloads, want) {
		t.Errorf("relay: published %v, want %v", payloads, want)
	}
}

// TestCatalogRefusesDuplicatesAndKnowsTheBuiltins: the built-in catalogue
// maps every command type to its aggregate type without any I/O, and a
// second registration of an aggregate, command or read-model name fails.
func TestCatalogRefusesDuplicatesAndKnowsTheBuiltins(t *testing.T) {
	c := eventpipe.Builtin()
	for cmd, agg := range map[string]string{"CreateTodo": "todo", "OpenAccount": "bankaccount", "CloseAccount": "bankaccount", "PlaceOrder": "order", "RequestTransfer": "transfer", "CompleteTransfer": "transfer"} {
		if got, ok := c.AggregateTypeOf(cmd); !ok || got != agg {
			t.Errorf("AggregateTypeOf(%s) = %q, %v; want %s", cmd, got, ok, agg)
		}
	}
	if got := c.ReadModelNames(); !slices.Equal(got, []string{"accounts", "order-rollups", "orders", "todos"}) {
		t.Errorf("read models %v", got)
	}
	if err := c.AddDomain(counterDomain("n")); err != nil {
		t.Fatalf("a new domain: %v", err)
	}
	todos, _ := c.ReadModel("todos")
	for name, err := range map[string]error{
		"aggregate type": c.AddDomain(counterDomain("n")),
		"command type":   c.AddDomain(commands.Domain{AggregateType: "other", EventTypes: eventstore.NewEventTypes("X"), CommandTypes: []string{"Count"}, NewHandlers: counterDomain("n").NewHandlers}),
		"read model":     c.AddReadModel(todos),
		"invalid domain": c.AddDomain(commands.Domain{AggregateType: "a#b"}),
	} {
		if err == nil {
			t.Errorf("%s registered twice (or invalid) without an error", name)
		} else if !strings.Contains(err.Error(), "twice") && !strings.Contains(err.Error(), "already") && name != "invalid domain" {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestCatalogNewCommandAddressesTheDomainAndRefusesUnknownTypes: a command
// built from the catalogue goes to the aggregate type whose domain takes
// it; an unknown type or an unusable id is refused before anything is
// sent.
func TestCatalogNewCommandAddressesTheDomainAndRefusesUnknownTypes(t *testing.T) {
	c := eventpipe.Builtin()
	cmd, err := c.NewCommand("RecordTransaction", "acc-1", json.RawMessage(`{"desc":"coffee","amount":-3}`))
	if err != nil || cmd.AggregateType != "bankaccount" || cmd.AggregateID != "acc-1" || cmd.ID == "" {
		t.Fatalf("NewCommand: %+v, %v", cmd, err)
	}
	if _, err := c.NewCommand("Frobnicate", "acc-1", json.RawMessage(`{}`)); !errors.Is(err, commands.ErrUnknownCommand) {
		t.Errorf("unknown type: %v, want ErrUnknownCommand", err)
	}
	var ve *eventstore.ValidationError
	if _, err := c.NewCommand("OpenAccount", "a#b", json.RawMessage(`{}`)); !errors.As(err, &ve) || ve.Field != "aggregate_id" {
		t.Errorf("reserved character in the id: %v, want a ValidationError on aggregate_id", err)
	}
}

// namedProjection is a Postgres projection with only a name and a type.
type namedProjection struct{ name string }

func (p namedProjection) Name() string             { return p.name }
func (p namedProjection) AggregateTypes() []string { return []string{"todo"} }
func (p namedProjection) Apply(context.Context, *pgx.Batch, eventstore.Envelope) error {
	return nil
}

// TestCatalogRefusesANameTakenByAnotherKindOfConsumer: consumer names are
// unique across kinds: a read model named like the analytics aggregator,
// the snapshotter or a saga's consumer, a search model named like a read
// model, a handler named like a saga — each is refused with a
// *NameTakenError naming both kinds, and the catalogue keeps the first.
func TestCatalogRefusesANameTakenByAnotherKindOfConsumer(t *testing.T) {
	c := eventpipe.Builtin()
	handler := func(name string) eventpipe.Consumer {
		h, err := eventpipe.Handler(eventpipe.HandlerConfig{Name: name, Topics: []string{bus.EventsTopic("todo")},
			Handler: func(*message.Message) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, tc := range []struct {
		add          func() error
		name, holder string
	}{
		{func() error { return c.AddReadModel(namedProjection{eventpipe.AnalyticsAggregator}) }, "analytics", "aggregator"},
		{func() error { return c.AddReadModel(namedProjection{eventpipe.Snapshotter}) }, "snapshots", "snapshotter"},
		{func() error { return c.AddReadModel(namedProjection{eventpipe.SagaConsumer(transfersaga.Name)}) }, "transfer-saga", "saga"},
		{func() error { return c.AddSearchModel(searchmodels.TodoSearch{}) }, "todos-search", "search model"},
		{func() error { return c.AddConsumer(handler("todos")) }, "todos", "read model"},
		{func() error { return c.AddConsumer(handler(eventpipe.SagaConsumer(transfersaga.Name))) }, "transfer-saga", "saga"},
	} {
		err := tc.add()
		var taken *eventpipe.NameTakenError
		if !errors.As(err, &taken) || !errors.Is(err, eventpipe.ErrNameTaken) || taken.Name != tc.name || taken.Holder != tc.holder {
			t.Errorf("%s: %v; want a *NameTakenError held by the %s", tc.name, err, tc.holder)
		}
	}
	if cons, ok := c.Consumer("analytics"); !ok || cons.Describe(bus.Topics{}).Kind != eventpipe.KindAggregator {
		t.Errorf("the aggregator lost its name")
	}
	// A new name of any kind is taken once, and listed.
	if err := c.AddConsumer(handler("audit")); err != nil {
		t.Fatal(err)
	}
	if err := c.AddReadModel(namedProjection{"audit"}); !errors.Is(err, eventpipe.ErrNameTaken) {
		t.Errorf("a read model named like a handler: %v", err)
	}
	if !slices.Contains(c.ConsumerNames(), "audit") || !slices.Contains(c.ConsumerNames(), "transfer-saga") {
		t.Errorf("consumer names %v", c.ConsumerNames())
	}
	if _, err := eventpipe.Handler(eventpipe.HandlerConfig{Name: "h", Topics: []string{"t"}, Handler: func(*message.Message) error { return nil },
		Start: bus.StartHistory}); err == nil {
		t.Error("a handler that starts from the store's history was accepted")
	}
}

// TestConfigsRefuseABadFieldNamingIt: each process's Config validates
// with its defaults filled (eventpipe.Process) and names the bad field in
// an *eventstore.ValidationError; the constructors return the same error
// before they connect to anything.
func TestConfigsRefuseABadFieldNamingIt(t *testing.T) {
	ep := eventpipe.Endpoints{EventsTable: "same-table", LeasesTable: "same-table"}
	negative := int32(-2)
	for _, c := range []struct {
		name, field string
		err         error
	}{
		{"MigrateConfig tables", "Endpoints.LeasesTable", eventpipe.MigrateConfig{Process: eventpipe.Process{Endpoints: ep}}.Validate()},
		{"MigrateConfig table name", "Endpoints.EventsTable", eventpipe.MigrateConfig{Process: eventpipe.Process{Endpoints: eventpipe.Endpoints{EventsTable: "a#b"}}}.Validate()},
		{"Migrate", "Endpoints.LeasesTable", func() error {
			_, err := eventpipe.Migrate(context.Background(), eventpipe.MigrateConfig{Process: eventpipe.Process{Endpoints: ep}})
			return err
		}()},
		{"SenderConfig", "ReplyPartition", eventpipe.SenderConfig{ReplyPartition: &negative}.Validate()},
		{"NewSender", "ReplyPartition", func() error {
			_, err := eventpipe.NewSender(eventpipe.SenderConfig{ReplyPartition: &negative})
			return err
		}()},
		{"ConsumersConfig", "Names", eventpipe.ConsumersConfig{}.Validate()},
		{"RelayConfig", "Stream", eventpipe.RelayConfig{Stream: "nope"}.Validate()},
		{"WriteSideConfig", "CommandKey", eventpipe.WriteSideConfig{CommandKey: []byte("short")}.Validate()},
		{"WriteSideConfig", "HTTPLimits.IdleTimeout", eventpipe.WriteSideConfig{HTTPLimits: httpapi.Limits{IdleTimeout: -time.Second}}.Validate()},
		{"PostgresSchema", "Endpoints.Postgres", func() error {
			_, err := eventpipe.PostgresSchema(eventpipe.Endpoints{Postgres: "postgres://u:p@db.internal/app?sslmode=disable"})
			return err
		}()},
		{"HandlerConfig", "Topics", eventpipe.HandlerConfig{Name: "h"}.Validate()},
	} {
		var ve *eventstore.ValidationError
		if !errors.As(c.err, &ve) || ve.Field != c.field {
			t.Errorf("%s: %v, want a ValidationError of field %s", c.name, c.err, c.field)
		}
	}
	if err := (eventpipe.MigrateConfig{}).Validate(); err != nil {
		t.Errorf("MigrateConfig{} with its defaults: %v", err)
	}
	var unknown *eventstore.ValidationError
	if err := (eventpipe.ConsumersConfig{Names: []string{"nope"}}).Validate(); !errors.Is(err, eventpipe.ErrUnknownConsumer) || !errors.As(err, &unknown) {
		t.Errorf("ConsumersConfig of an unknown consumer: %v, want ErrUnknownConsumer and a ValidationError", err)
	}
}

// TestAChainOfUpcastersWithAGapStopsEveryProcessAtStart: a catalogue
// whose upcasters of one event type skip a version is refused by serve's
// write side, the consumers and the relay before they connect to
// anything, each error naming the type and the missing step.
func TestAChainOfUpcastersWithAGapStopsEveryProcessAtStart(t *testing.T) {
	catalog := eventpipe.Builtin()
	same := func(p json.RawMessage) (json.RawMessage, error) { return p, nil }
	catalog.Upcasters().MustRegister("TodoCreated", 1, same).MustRegister("TodoCreated", 3, same)
	p := eventpipe.Process{Catalog: catalog}
	ctx := context.Background()
	for name, start := range map[string]func() error{
		"serve": func() error {
			_, err := eventpipe.NewWriteSide(ctx, eventpipe.WriteSideConfig{Process: p})
			return err
		},
		"consume": func() error {
			_, err := eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{Process: p, Names: []string{"todos"}})
			return err
		},
		"relay": func() error {
			_, err := eventpipe.NewRelay(ctx, eventpipe.RelayConfig{Process: p})
			return err
		},
	} {
		err := start()
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || ve.Field != "upcasters" || !strings.Contains(err.Error(), "TodoCreated has no upcaster from v2 to v3") {
			t.Errorf("%s with a gap in TodoCreated's upcasters: %v, want an *eventstore.ValidationError naming TodoCreated v2 to v3", name, err)
		}
	}
}
