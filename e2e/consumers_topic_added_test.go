package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/domains/order"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/sagas"
)

// seenSaga is a saga reading the events topics of types that records
// every event it is handed (type/id) in seen, one instance per event.
func seenSaga(name string, types []string, seen *sync.Map) sagas.Saga[struct{}] {
	return sagas.Saga[struct{}]{
		Name:   name,
		Events: types,
		Route: func(in sagas.Input) (string, bool) {
			return in.Event.AggregateType + "-" + in.Event.AggregateID, true
		},
		Initial: func(string) struct{} { return struct{}{} },
		Handle: func(s struct{}, in sagas.Input, fx *sagas.Effects) (struct{}, error) {
			seen.Store(in.Event.AggregateType+"/"+in.Event.AggregateID, true)
			fx.Finish("seen")
			return s, nil
		},
	}
}

// TestASagaGivenANewTopicActsOnlyOnWhatIsPublishedThereAfterTheChange
// runs a saga that reads the todo events until its group has committed,
// stops it, puts 100 order events on the order events topic, and deploys
// the saga again reading orders too: it acts on none of the 100 older
// records, and on every record published after the change, on both
// topics (issue 38: the group's start applied once per group, and a topic
// it had never read started at its oldest record).
func TestASagaGivenANewTopicActsOnlyOnWhatIsPublishedThereAfterTheChange(t *testing.T) {
	t.Parallel()
	ep, db, pub := sagaTestbed(t)
	topics := bus.Topics{Prefix: ep.TopicPrefix}
	publish := func(aggType, id string) {
		t.Helper()
		e := eventstore.Envelope{EventID: ulid.Make().String(), AggregateType: aggType, AggregateID: id, Sequence: 1,
			EventType: "Noted", SchemaVersion: 1, OccurredAt: time.Now().UTC(), Payload: []byte(`{}`)}
		msg, err := bus.EventMessage(e)
		if err != nil {
			t.Fatal(err)
		}
		if err := pub.Publish(topics.Events(aggType), msg); err != nil {
			t.Fatal(err)
		}
	}
	const name = "noticer"
	group := sagas.ConsumerGroup(topics, name)
	var seen sync.Map
	deploy := func(types ...string) (stop func()) {
		t.Helper()
		cat := eventpipe.NewCatalog()
		if err := cat.AddSaga(seenSaga(name, types, &seen)); err != nil {
			t.Fatal(err)
		}
		var topicNames []string
		for _, typ := range types {
			topicNames = append(topicNames, topics.Events(typ))
		}
		return deploySaga(t, ep, db, cat, name, topicNames...)
	}
	waitSeen := func(keys ...string) {
		t.Helper()
		rigs.WaitFor(t, fmt.Sprintf("the saga to act on %v", keys), func() bool {
			for _, k := range keys {
				if _, ok := seen.Load(k); !ok {
					return false
				}
			}
			return true
		})
	}

	stop := deploy(todo.AggregateType)
	publish(todo.AggregateType, "t-1")
	waitSeen(todo.AggregateType + "/t-1")
	offsets := kafkaOffsets(t)
	rigs.WaitFor(t, "the first deployment to commit past t-1", func() bool {
		return rigs.GroupCommitted(t, group, topics.Events(todo.AggregateType)) == topicEnd(t, offsets, topics.Events(todo.AggregateType))
	})
	stop()

	for i := range 100 {
		publish(order.AggregateType, fmt.Sprintf("old-%03d", i))
	}
	orders := topics.Events(order.AggregateType)
	rigs.WaitFor(t, "the 100 older records on "+orders, func() bool { return topicEnd(t, offsets, orders) == 100 })

	stop = deploy(todo.AggregateType, order.AggregateType)
	defer stop()
	var after []string
	for i := range 5 {
		id := fmt.Sprintf("new-%d", i)
		publish(order.AggregateType, id)
		after = append(after, order.AggregateType+"/"+id)
	}
	publish(todo.AggregateType, "t-2")
	after = append(after, todo.AggregateType+"/t-2")
	waitSeen(after...)
	rigs.WaitFor(t, "the second deployment to commit past every order record", func() bool {
		return rigs.GroupCommitted(t, group, orders) == topicEnd(t, offsets, orders)
	})
	acted := 0
	for i := range 100 {
		if _, ok := seen.Load(fmt.Sprintf("%s/old-%03d", order.AggregateType, i)); ok {
			acted++
		}
	}
	if acted != 0 {
		t.Errorf("the saga acted on %d of the 100 order records published before it started reading orders, want none", acted)
	}
}

// sagaTestbed returns the endpoints of a test's own events table, topic
// prefix and migrated Postgres schema, a pool on that schema and a Kafka
// publisher, closed when t ends: what a saga run in the test needs.
func sagaTestbed(t *testing.T) (eventpipe.Endpoints, *pgxpool.Pool, *kafka.Publisher) {
	t.Helper()
	ep := rigs.Endpoints(t)
	ep.Postgres = rigs.MigratedPostgres(t)
	db, err := pgxpool.New(context.Background(), ep.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: ep.KafkaBrokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return ep, db, pub
}

// deploySaga runs the saga called name of cat as `eventpipe consume`
// does, waits until its group has started on each of topics, and returns
// the stop of this deployment.
func deploySaga(t *testing.T, ep eventpipe.Endpoints, db *pgxpool.Pool, cat *eventpipe.Catalog, name string, topics ...string) (stop func()) {
	t.Helper()
	cons, err := eventpipe.NewConsumers(context.Background(), eventpipe.ConsumersConfig{Process: eventpipe.Process{Catalog: cat, Endpoints: ep}, DB: db,
		Names: []string{eventpipe.SagaConsumer(name)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cons.Run(ctx) }()
	group := sagas.ConsumerGroup(bus.Topics{Prefix: ep.TopicPrefix}, name)
	rigs.WaitFor(t, fmt.Sprintf("the saga's group to start on %v", topics), func() bool {
		for _, tp := range topics {
			if rigs.GroupCommitted(t, group, tp) < 0 {
				return false
			}
		}
		return true
	})
	return func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("saga %s: %v", name, err)
		}
		if err := cons.Close(); err != nil {
			t.Error(err)
		}
	}
}
