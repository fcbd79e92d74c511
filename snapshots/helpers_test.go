package snapshots_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
	ddbstore "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	migrations "github.com/eventpipe/eventpipe/migrations/dynamodb"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// eventsPerAppend is how many events one facet append writes when a test
// builds a long log: 92, the most one transaction holds beside the meta
// and STATE items. One event per append would make a 10,000-event log
// 10,000 transactions, minutes on DynamoDB Local; 92 per append makes it
// 110, about 100 ms each on a table without a stream (newStreamlessStore),
// and were faster per event than smaller batches here. The log, the STATE
// and every event's sequence are the same either way: only the number of
// transactions differs.
const eventsPerAppend = 92

// newStore returns an event store on a fresh events table as `eventpipe
// migrate` creates it, deleted when tb ends.
func newStore(tb testing.TB) *ddbstore.Store {
	tb.Helper()
	client := testenv.DynamoDB(tb)
	table := testenv.UniqueName(tb, "snapshots")
	if err := migrations.CreateEventsTable(context.Background(), client, table); err != nil {
		tb.Fatalf("create table: %v", err)
	}
	tb.Cleanup(func() { testenv.DeleteTable(tb, client, table) })
	return storeOn(tb, client, table)
}

// newStreamlessStore returns an event store on a fresh events table
// without a stream, which the caller deletes. It is for the 10,000-event
// logs: nothing relays them, and DynamoDB Local slows every write as a
// table's stream grows (measured here: a 92-event append took ~100 ms
// throughout a 10,000-event log without a stream, and grew from ~200 ms
// to ~3 s with one; the log took 12 s against 2 minutes). The keys, the
// index and the store's items are those of migrations.EventsTable.
func newStreamlessStore(tb testing.TB) (*ddbstore.Store, *dynamodb.Client) {
	tb.Helper()
	ctx := context.Background()
	client := testenv.DynamoDB(tb)
	in := migrations.EventsTable(testenv.UniqueName(tb, "snapshots-log"))
	in.StreamSpecification = nil
	if _, err := client.CreateTable(ctx, in); err != nil {
		tb.Fatalf("create table: %v", err)
	}
	if err := dynamodb.NewTableExistsWaiter(client).Wait(ctx, &dynamodb.DescribeTableInput{TableName: in.TableName}, integration.HangAfter()); err != nil {
		testenv.DeleteTable(tb, client, *in.TableName)
		tb.Fatalf("table %s not active: %v", *in.TableName, err)
	}
	return storeOn(tb, client, *in.TableName), client
}

func storeOn(tb testing.TB, client *dynamodb.Client, table string) *ddbstore.Store {
	tb.Helper()
	s, err := ddbstore.New(ddbstore.Config{Client: client, Table: table})
	if err != nil {
		testenv.DeleteTable(tb, client, table)
		tb.Fatal(err)
	}
	return s
}

// transaction is the i-th transaction of a test account: mostly
// deposits, every seventh a withdrawal that keeps the balance ≥ 0 (no
// overdraft, so no outbound event), every 250th a rename instead.
func transaction(i int) eventstore.NewEvent {
	switch {
	case i%250 == 0:
		return bankaccount.Renamed(fmt.Sprintf("First%d", i), fmt.Sprintf("Last%d", i))
	case i%7 == 0:
		return bankaccount.Transacted(fmt.Sprintf("withdrawal %d", i), -int64(i%5+1))
	default:
		return bankaccount.Transacted(fmt.Sprintf("deposit %d", i), int64(i%13+1))
	}
}

// appendAccount appends events to account id through its facet, from its
// current version up to version to (opening it first when new),
// eventsPerAppend at a time, and returns the envelopes written.
func appendAccount(tb testing.TB, facet *eventstore.Facet[bankaccount.Account], id string, to int64) []eventstore.Envelope {
	tb.Helper()
	ctx := context.Background()
	cur, err := facet.Get(ctx, id)
	if errors.Is(err, eventstore.ErrAggregateNotFound) {
		cur, err = facet.Initial(id), nil
	}
	if err != nil {
		tb.Fatal(err)
	}
	var written []eventstore.Envelope
	for cur.Seq < to {
		var evs []eventstore.NewEvent
		for seq := cur.Seq + 1; seq <= to && len(evs) < eventsPerAppend; seq++ {
			if seq == 1 {
				evs = append(evs, bankaccount.Opened(id))
			} else {
				evs = append(evs, transaction(int(seq)))
			}
		}
		res, err := facet.AppendTo(ctx, cur, eventstore.Change{Events: evs})
		if err != nil {
			tb.Fatalf("append to %s at %d: %v", id, cur.Seq, err)
		}
		cur = res.State
		written = append(written, res.Events...)
	}
	return written
}

// publish publishes events on their aggregate type's events topic, as
// the relay does.
func publish(tb testing.TB, pub message.Publisher, topics bus.Topics, events []eventstore.Envelope) {
	tb.Helper()
	byTopic := map[string][]*message.Message{}
	var order []string
	for _, e := range events {
		msg, err := bus.EventMessage(e)
		if err != nil {
			tb.Fatal(err)
		}
		t := topics.Events(e.AggregateType)
		if _, ok := byTopic[t]; !ok {
			order = append(order, t)
		}
		byTopic[t] = append(byTopic[t], msg)
	}
	for _, t := range order {
		if err := pub.Publish(t, byTopic[t]...); err != nil {
			tb.Fatal(err)
		}
	}
}

func newPublisher(tb testing.TB, brokers []string) *kafka.Publisher {
	tb.Helper()
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = pub.Close() })
	return pub
}

// withoutSnapshots is a store whose aggregates have no snapshot: Load
// through it replays the whole log.
type withoutSnapshots struct{ eventstore.Store }

func (withoutSnapshots) Snapshot(context.Context, eventstore.Ref) (eventstore.Stored, error) {
	return eventstore.Stored{}, eventstore.ErrAggregateNotFound
}

// countingLoads is a store that counts the events its Load returns.
type countingLoads struct {
	eventstore.Store
	events atomic.Int64
}

func (s *countingLoads) Load(ctx context.Context, ref eventstore.Ref, after int64) ([]eventstore.Envelope, error) {
	evs, err := s.Store.Load(ctx, ref, after)
	s.events.Add(int64(len(evs)))
	return evs, err
}

// waitFor polls cond until it holds; it fails tb, with the state cond
// last reported, when cond does not hold within integration.HangAfter.
func waitFor(tb testing.TB, what string, cond func() (bool, string)) {
	tb.Helper()
	integration.Await(tb, what, func() error {
		if ok, state := cond(); !ok {
			return errors.New(state)
		}
		return nil
	})
}
