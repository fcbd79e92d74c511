// Package rigs holds the integration-test rigs that the tests of the
// composition root (package eventpipe), of the operator's tools (package
// operator) and the end-to-end tests (e2e/) share: fresh endpoints, a
// write side, a parking pipeline, the saga tests' pipeline, and waits.
// It is for tests only; like package testenv, it needs the local stack
// (`eventpipe stack up`).
package rigs

import (
	"context"
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/eventstore"
	migrate "github.com/eventpipe/eventpipe/migrations/dynamodb"
	pgmigrate "github.com/eventpipe/eventpipe/migrations/postgres"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// Endpoints returns the environment's endpoints with a fresh events
// table and a fresh keys table (the data subjects' keys the store seals
// personal data with), deleted when t ends.
func Endpoints(t testing.TB) endpoints.Endpoints {
	t.Helper()
	db := testenv.DynamoDB(t)
	testenv.KafkaBrokers(t)
	ep := testenv.Endpoints()
	ep.EventsTable = testenv.UniqueName(t, "events")
	ep.KeysTable = testenv.UniqueName(t, "keys")
	ep.TopicPrefix = testenv.UniqueName(t, "ns") + "."
	ctx := context.Background()
	if err := migrate.CreateEventsTable(ctx, db, ep.EventsTable); err != nil {
		t.Fatalf("create events table: %v", err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, db, ep.EventsTable) })
	if err := migrate.CreateSubjectKeysTable(ctx, db, ep.KeysTable); err != nil {
		t.Fatalf("create keys table: %v", err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, db, ep.KeysTable) })
	return ep
}

// NewService returns a write side on ep whose command handlers consume in
// group, with an open HTTP API (NoAuth); it is closed when t ends.
func NewService(t testing.TB, ep endpoints.Endpoints, group string) *eventpipe.WriteSide {
	t.Helper()
	svc, err := eventpipe.NewWriteSide(context.Background(), eventpipe.WriteSideConfig{Process: eventpipe.Process{Endpoints: ep}, ConsumerGroup: group, NoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	return svc
}

// TodoCmd returns a todo command, expecting the aggregate at expected
// (nil: any version).
func TodoCmd(t *testing.T, typ, id string, payload any, expected *int64) commands.Command {
	t.Helper()
	cmd, err := commands.NewJSON(typ, todo.AggregateType, id, payload)
	if err != nil {
		t.Fatal(err)
	}
	cmd.ExpectedVersion = expected
	return cmd
}

// Ver returns a pointer to v, for TodoCmd's expected version.
func Ver(v int64) *int64 { return &v }

// Events returns the events of aggregate typ/id in svc's store (nil when
// it does not exist).
func Events(t *testing.T, svc *eventpipe.WriteSide, typ, id string) []eventstore.Envelope {
	t.Helper()
	evs, err := svc.Store.Load(context.Background(), eventstore.Ref{Type: typ, ID: id}, 0)
	if errors.Is(err, eventstore.ErrAggregateNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// BusClients returns a Kafka publisher and a command Sender on ep's
// brokers and topic prefix, closed when t ends, and the topics.
func BusClients(t *testing.T, ep endpoints.Endpoints) (*kafka.Publisher, *kafka.Sender, bus.Topics) {
	t.Helper()
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: ep.KafkaBrokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	topics := bus.Topics{Prefix: ep.TopicPrefix}
	sender, err := kafka.NewSender(kafka.SenderConfig{Brokers: ep.KafkaBrokers, Publisher: pub, Topics: topics, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sender.Close() })
	return pub, sender, topics
}

// MigratedPostgres creates a Postgres schema for t with eventpipe's own
// migrations (parked_events among them) and returns the URL that selects
// it; the schema is dropped when t ends.
func MigratedPostgres(t *testing.T) string {
	t.Helper()
	schema, url := testenv.PostgresSchema(t, "rm")
	if _, err := pgmigrate.Migrate(context.Background(), pgmigrate.Config{URL: testenv.Endpoints().Postgres, Schema: schema}); err != nil {
		t.Fatal(err)
	}
	return url
}

// WaitUntil polls cond until it holds; it fails t, with the state cond
// last reported, when cond does not hold within integration.HangAfter.
func WaitUntil(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	integration.Await(t, what, func() error {
		if ok, state := cond(); !ok {
			return errors.New(state)
		}
		return nil
	})
}

// WaitFor waits until cond holds; it fails t when cond does not hold
// within integration.HangAfter.
func WaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	integration.Await(t, what, func() error {
		if !cond() {
			return errors.New("not yet")
		}
		return nil
	})
}

// ServeHTTP runs svc's HTTP API until t ends and returns its base URL.
func ServeHTTP(t *testing.T, svc *eventpipe.WriteSide) string {
	t.Helper()
	srv, err := svc.NewHTTP()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() { done <- srv.Run(ctx, ready) }()
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + <-ready
}

// GroupCommitted sums group's committed offsets on topics, on the stack's
// Kafka (kafka.ConsumerLag); -1 when the group has committed none there.
func GroupCommitted(t testing.TB, group string, topics ...string) int64 {
	t.Helper()
	rows, err := kafka.ConsumerLag(context.Background(), kafka.Cluster{Brokers: testenv.KafkaBrokers(t)}, group, topics)
	if err != nil {
		t.Fatal(err)
	}
	sum, any := int64(0), false
	for _, r := range rows {
		if r.Committed >= 0 {
			sum, any = sum+r.Committed, true
		}
	}
	if !any {
		return -1
	}
	return sum
}
