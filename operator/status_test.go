package operator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/oklog/ulid/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/analytics/aggregator"
	"github.com/eventpipe/eventpipe/analytics/analyticsbus"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/endpoints"
	migrate "github.com/eventpipe/eventpipe/migrations/dynamodb"
	"github.com/eventpipe/eventpipe/operator"
	"github.com/eventpipe/eventpipe/parking"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/relay"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestStatusShowsEachGroupsPositionLagAndPoison sends three todo
// commands, one of them invalid, through the command handlers and reads
// Status: the todo commands group has consumed all three (committed =
// newest, lag 0), its poison topic holds the invalid one, and the read
// models' groups, which never ran, lag by nothing because nothing was
// relayed in this namespace.
func TestStatusShowsEachGroupsPositionLagAndPoison(t *testing.T) {
	ep := rigs.Endpoints(t)
	group := testenv.UniqueName(t, "g")
	svc := rigs.NewService(t, ep, group)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.RunCommandHandlers(ctx) }()
	defer func() { cancel(); <-done }()
	sender, err := kafka.NewSender(kafka.SenderConfig{Brokers: ep.KafkaBrokers, Topics: bus.Topics{Prefix: ep.TopicPrefix}, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	id := testenv.UniqueName(t, "todo")
	for _, c := range []commands.Command{
		commands.New(todo.CreateTodo, todo.AggregateType, id, json.RawMessage(`{"title":"a"}`)),
		commands.New(todo.UpdateTodo, todo.AggregateType, id, json.RawMessage(`{"title":"b"}`)),
		commands.New(todo.UpdateTodo, todo.AggregateType, id, json.RawMessage(`{"title":"c","bogus":1}`)),
	} {
		waitCtx, waitCancel := context.WithTimeout(ctx, integration.HangAfter())
		if _, err := sender.SendAndWait(waitCtx, c); err != nil {
			t.Fatal(err)
		}
		waitCancel()
	}

	var todoGroup operator.GroupStatus
	integration.Await(t, "the todo commands group committed 3 of 3 and 1 poisoned", func() error {
		r := operator.Status(ctx, operator.StatusConfig{Process: eventpipe.Process{Endpoints: ep}, CommandGroup: group})
		for _, g := range r.Groups {
			if g.Group == group+"."+ep.TopicPrefix+"commands.todo" {
				todoGroup = g
			}
			if g.Group == ep.TopicPrefix+"projection.todos" && (g.Newest != 0 || g.Lag != 0 || g.Poisoned != 0) {
				t.Fatalf("read model group without events: %+v", g)
			}
		}
		if todoGroup.Lag != 0 || todoGroup.Committed != 3 || todoGroup.Poisoned != 1 {
			return fmt.Errorf("todo commands group %+v (errors %v)", todoGroup, r.Errors)
		}
		return nil
	})
	if todoGroup.Newest != 3 || todoGroup.PoisonTopic != ep.TopicPrefix+"poison."+group {
		t.Fatalf("todo commands group %+v", todoGroup)
	}
}

// TestStatusShowsTheAnalyticsRelayAndAggregatorAndAMissingTableInPlace
// puts three analytics events on two sources' topics and one message that
// is not an event, parks a record on the analytics relay's poison topic,
// and reads Status with no analytics table yet: the analytics relay's
// report says its table is missing while the events relay's is read, and
// the aggregator's group, found by its topics' prefix, lags by all four
// messages. Then the table is created and the aggregation consumer runs:
// the analytics stream has a report with no leases, and the group has
// committed all four, its poison topic holding the one that was not an
// event.
func TestStatusShowsTheAnalyticsRelayAndAggregatorAndAMissingTableInPlace(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	ep := rigs.Endpoints(t)
	ep.Postgres = rigs.MigratedPostgres(t) // parked_events, which Status counts
	db := testenv.DynamoDB(t)
	ep.LeasesTable, ep.AnalyticsTable = testenv.UniqueName(t, "leases"), testenv.UniqueName(t, "analytics")
	ctx := context.Background()
	if err := migrate.CreateLeasesTable(ctx, db, ep.LeasesTable); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, db, ep.LeasesTable); testenv.DeleteTable(t, db, ep.AnalyticsTable) })
	topics := bus.Topics{Prefix: ep.TopicPrefix}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: ep.KafkaBrokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	for _, e := range []struct{ source, session string }{{"site-a", "s1"}, {"site-a", "s2"}, {"site-b", "s1"}} {
		msg, err := analyticsbus.Message(analytics.Event{SourceID: e.source, SessionID: e.session, Type: "page_view", URL: "/",
			EventID: ulid.Make().String(), CreatedAt: time.Now().UTC()})
		if err != nil {
			t.Fatal(err)
		}
		if err := pub.Publish(topics.Analytics(e.source), msg); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Publish(topics.Analytics("site-b"), message.NewMessage(watermill.NewUUID(), []byte("not an event"))); err != nil {
		t.Fatal(err)
	}
	relayPoison := topics.Poison(relay.PoisonGroupFor(eventpipe.RelayAnalytics))
	if err := pub.Publish(relayPoison, message.NewMessage(watermill.NewUUID(), []byte("{}"))); err != nil {
		t.Fatal(err)
	}

	aggGroup := func(r operator.StatusReport) operator.GroupStatus {
		t.Helper()
		for _, g := range r.Groups {
			if g.Group == ep.TopicPrefix+aggregator.DefaultGroup {
				return g
			}
		}
		t.Fatalf("no aggregator group among %+v", r.Groups)
		return operator.GroupStatus{}
	}
	r := operator.Status(ctx, operator.StatusConfig{Process: eventpipe.Process{Endpoints: ep}})
	events, _ := r.Relay(eventpipe.RelayEvents)
	an, ok := r.Relay(eventpipe.RelayAnalytics)
	if events.Err != nil || events.Stream == "" {
		t.Fatalf("events relay %+v, want its stream read", events)
	}
	if !ok || an.Err == nil || !strings.Contains(an.Err.Error(), ep.AnalyticsTable) || !slices.Contains(r.Errors, an.Err) {
		t.Fatalf("analytics relay %+v (errors %v), want its missing table reported in place and among the errors", an, r.Errors)
	}
	if an.PoisonTopic != relayPoison || an.Poisoned != 1 || events.PoisonTopic != topics.Poison(relay.DefaultPoisonGroup) {
		t.Fatalf("relay poison: events %s, analytics %s with %d, want %s and %s with 1", events.PoisonTopic, an.PoisonTopic, an.Poisoned,
			topics.Poison(relay.DefaultPoisonGroup), relayPoison)
	}
	want := operator.GroupStatus{Group: ep.TopicPrefix + aggregator.DefaultGroup,
		Topics:    []string{topics.Analytics("site-a"), topics.Analytics("site-b")},
		Committed: 0, Newest: 4, Lag: 4,
		PoisonTopic: topics.Poison(aggregator.DefaultGroup), Consumer: eventpipe.AnalyticsAggregator, Kind: eventpipe.KindAggregator,
		Declared: eventpipe.Definition{Kind: eventpipe.KindAggregator, TopicPrefix: ep.TopicPrefix + bus.AnalyticsPrefix}}
	if g := aggGroup(r); !reflect.DeepEqual(g, want) {
		t.Fatalf("aggregator group before it ran %+v, want %+v", g, want)
	}
	if len(r.Errors) != 1 {
		t.Fatalf("errors %v, want only the analytics relay's", r.Errors)
	}

	if err := migrate.CreateAnalyticsTable(ctx, db, ep.AnalyticsTable); err != nil {
		t.Fatal(err)
	}
	consumers, err := eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{Process: eventpipe.Process{Endpoints: ep, Logger: slog.New(slog.DiscardHandler)}, Names: []string{eventpipe.AnalyticsAggregator},
		Start: bus.StartEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer consumers.Close()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- consumers.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	want.Committed, want.Lag, want.Poisoned = 4, 0, 1
	integration.Await(t, fmt.Sprintf("the aggregator group at %+v", want), func() error {
		r = operator.Status(ctx, operator.StatusConfig{Process: eventpipe.Process{Endpoints: ep}})
		if g := aggGroup(r); !reflect.DeepEqual(g, want) {
			return fmt.Errorf("aggregator group %+v (errors %v)", g, r.Errors)
		}
		return nil
	})
	if an, _ = r.Relay(eventpipe.RelayAnalytics); an.Err != nil || an.Stream == "" || len(an.Leases) != 0 || len(r.Errors) != 0 {
		t.Fatalf("analytics relay %+v (errors %v), want its stream and no leases (no relay ran)", an, r.Errors)
	}
}

// TestStatusReportsAMissingParkedEventsTableInPlace reads Status on a
// Postgres schema that was never migrated: the read models' groups are
// still measured, ParkedErr says to migrate (parking.ErrNoTable) and is
// among the errors, and no group claims parked events.
func TestStatusReportsAMissingParkedEventsTableInPlace(t *testing.T) {
	ep := rigs.Endpoints(t)
	_, ep.Postgres = testenv.PostgresSchema(t, "bare")
	r := operator.Status(context.Background(), operator.StatusConfig{Process: eventpipe.Process{Endpoints: ep}})
	if !errors.Is(r.ParkedErr, parking.ErrNoTable) || !slices.Contains(r.Errors, r.ParkedErr) {
		t.Fatalf("parked error %v (errors %v), want ErrNoTable reported in place and among the errors", r.ParkedErr, r.Errors)
	}
	projectionGroups := 0
	for _, g := range r.Groups {
		if g.Parked != (parking.Counts{}) {
			t.Fatalf("group %+v has parked events", g)
		}
		if g.Projection != "" {
			projectionGroups++
			if g.Group != projections.ConsumerGroup(bus.Topics{Prefix: ep.TopicPrefix}, g.Projection) || len(g.Topics) == 0 {
				t.Fatalf("projection group %+v", g)
			}
		}
	}
	if want := len(eventpipe.Builtin().ModelNames()); projectionGroups != want {
		t.Fatalf("%d projection groups, want %d", projectionGroups, want)
	}
}

// statusFixture is a namespace with handler consumers whose groups have
// committed offsets of their own on the namespace's topics.
type statusFixture struct {
	ep      endpoints.Endpoints
	topics  bus.Topics
	catalog *eventpipe.Catalog
	adm     *kadm.Client
}

func newStatusFixture(tb testing.TB) *statusFixture {
	tb.Helper()
	ep := rigs.Endpoints(tb)
	cl, err := kgo.NewClient(kgo.SeedBrokers(ep.KafkaBrokers...))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(cl.Close)
	return &statusFixture{ep: ep, topics: bus.Topics{Prefix: ep.TopicPrefix}, catalog: eventpipe.NewCatalog(), adm: kadm.NewClient(cl)}
}

// publish puts n messages on topic (in the namespace), spread over the
// partitions.
func (f *statusFixture) publish(tb testing.TB, topic string, n int) {
	tb.Helper()
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: f.ep.KafkaBrokers, Logger: watermill.NopLogger{}})
	if err != nil {
		tb.Fatal(err)
	}
	defer pub.Close()
	msgs := make([]*message.Message, n)
	for i := range msgs {
		msgs[i] = message.NewMessage(watermill.NewULID(), []byte("{}"))
		msgs[i].Metadata.Set(bus.MetadataPartitionKey, fmt.Sprintf("key-%d", i%7))
	}
	if err := pub.Publish(topic, msgs...); err != nil {
		tb.Fatalf("publish on %s: %v", topic, err)
	}
}

// addHandler registers the handler name on topics (named without the
// namespace's prefix) and commits, for its group, at(end offset) on every
// partition of those topics where at returns 0 or more.
func (f *statusFixture) addHandler(tb testing.TB, name string, topics []string, at func(end int64) int64) {
	tb.Helper()
	cons, err := eventpipe.Handler(eventpipe.HandlerConfig{Name: name, Topics: topics,
		Handler: func(*message.Message) error { return nil }})
	if err != nil {
		tb.Fatal(err)
	}
	if err := f.catalog.AddConsumer(cons); err != nil {
		tb.Fatal(err)
	}
	var full []string
	for _, t := range topics {
		full = append(full, f.topics.Prefix+t)
	}
	ctx := context.Background()
	ends, err := f.adm.ListEndOffsets(ctx, full...)
	if err != nil {
		tb.Fatal(err)
	}
	offs := kadm.Offsets{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Partition >= 0 {
			if n := at(o.Offset); n >= 0 {
				offs.AddOffset(o.Topic, o.Partition, n, -1)
			}
		}
	})
	if len(offs) == 0 {
		return
	}
	resp, err := f.adm.CommitOffsets(ctx, eventpipe.HandlerGroup(f.topics, name), offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		tb.Fatalf("commit offsets of %s: %v", name, err)
	}
}

// TestStatusReadsEveryGroupInOnePassAsBefore reads Status on handlers
// whose groups stand in different places, on two topics and one that does
// not exist, some with poisoned messages: every group's committed and
// newest offsets, lag and poisoned messages are what one client per group
// (kafka.ConsumerLag) and the poison topics' count (kafka.TopicMessages)
// say, as Status read them before it read them all in one pass.
func TestStatusReadsEveryGroupInOnePassAsBefore(t *testing.T) {
	f := newStatusFixture(t)
	a, b := f.topics.Prefix+"a", f.topics.Prefix+"b"
	f.publish(t, a, 40)
	f.publish(t, b, 9)
	f.addHandler(t, "all", []string{"a"}, func(end int64) int64 { return end })
	f.addHandler(t, "half", []string{"a"}, func(end int64) int64 { return end / 2 })
	f.addHandler(t, "none", []string{"a", "b"}, func(int64) int64 { return -1 })
	f.addHandler(t, "two", []string{"b", "a", "missing"}, func(end int64) int64 { return end - 1 })
	f.addHandler(t, "missing", []string{"missing"}, func(int64) int64 { return -1 })
	f.publish(t, f.topics.Poison("handler.two"), 2)
	f.publish(t, f.topics.Poison("handler.all"), 1)

	r := operator.Status(context.Background(), operator.StatusConfig{Process: eventpipe.Process{Catalog: f.catalog, Endpoints: f.ep}})
	if len(r.Groups) != 5 {
		t.Fatalf("groups %+v, want the 5 handlers'", r.Groups)
	}
	cluster := kafka.Cluster{Brokers: f.ep.KafkaBrokers}
	for _, g := range r.Groups {
		// As Status read them before: a client per group, and one for the
		// poison topics.
		rows, err := kafka.ConsumerLag(context.Background(), cluster, g.Group, g.Topics)
		if err != nil {
			t.Fatal(err)
		}
		var want operator.GroupStatus
		for _, row := range rows {
			want.Newest += row.Newest
			want.Lag += row.Lag
			want.Committed += max(row.Committed, 0)
		}
		counts, err := kafka.TopicMessages(context.Background(), cluster, []string{g.PoisonTopic})
		if err != nil {
			t.Fatal(err)
		}
		want.Poisoned = counts[g.PoisonTopic]
		if g.Committed != want.Committed || g.Newest != want.Newest || g.Lag != want.Lag || g.Poisoned != want.Poisoned {
			t.Errorf("group %s: committed %d, newest %d, lag %d, poisoned %d; one client per group reads %d, %d, %d, %d",
				g.Group, g.Committed, g.Newest, g.Lag, g.Poisoned, want.Committed, want.Newest, want.Lag, want.Poisoned)
		}
	}
	// And the figures themselves.
	parts := func(topic string) int64 {
		ends, err := f.adm.ListEndOffsets(context.Background(), topic)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		ends.Each(func(o kadm.ListedOffset) {
			if o.Offset > 0 {
				n++
			}
		})
		return n
	}
	nonEmpty := parts(a) + parts(b)
	want := map[string][4]int64{ // committed, newest, lag, poisoned
		"all":     {40, 40, 0, 1},
		"none":    {0, 49, 49, 0},
		"two":     {49 - nonEmpty, 49, nonEmpty, 2},
		"missing": {0, 0, 0, 0},
	}
	for _, g := range r.Groups {
		w, ok := want[g.Consumer]
		if got := [4]int64{g.Committed, g.Newest, g.Lag, g.Poisoned}; ok && got != w {
			t.Errorf("group %s: committed, newest, lag, poisoned %v, want %v", g.Group, got, w)
		}
		if g.Consumer == "half" && (g.Newest != 40 || g.Lag <= 0 || g.Lag >= 40 || g.Committed+g.Lag != 40) {
			t.Errorf("group %s: %+v, want part of 40 committed", g.Group, g)
		}
	}
	for _, err := range r.Errors {
		if strings.Contains(err.Error(), "group ") || strings.Contains(err.Error(), "kafka") || strings.Contains(err.Error(), "poison") {
			t.Errorf("error reading Kafka: %v", err)
		}
	}
}
