package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/todo"
	ddbstore "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	"github.com/eventpipe/eventpipe/internal/dynamoclient"
	migrate "github.com/eventpipe/eventpipe/migrations/dynamodb"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/readmodels"
	"github.com/eventpipe/eventpipe/relay"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// sharedSubscriber hands out one GoChannel to every consumer and ignores
// their Close: the GoChannel outlives them and is closed by the test.
type sharedSubscriber struct{ message.Subscriber }

func (sharedSubscriber) Close() error { return nil }

// TestPipelineRunsOnGoChannelWithTheRealStore runs the write side's
// command handlers, the relay and the todos projection's Runner on
// Watermill's in-memory GoChannel Pub/Sub instead of Kafka, injected
// through their configs, with the real event store (DynamoDB Local, its
// stream) and the real read model (Postgres). A command published on the
// GoChannel is answered there, appended to the store, relayed from the
// stream onto the GoChannel and applied to the read model.
func TestPipelineRunsOnGoChannelWithTheRealStore(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ep := readModelSchema(t, rigs.Endpoints(t), true)
	ep.LeasesTable = testenv.UniqueName(t, "leases")
	db := testenv.DynamoDB(t)
	if err := migrate.CreateLeasesTable(ctx, db, ep.LeasesTable); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, db, ep.LeasesTable) })
	topics := bus.Topics{Prefix: ep.TopicPrefix}

	goch := gochannel.NewGoChannel(gochannel.Config{Persistent: true, OutputChannelBuffer: 64}, watermill.NopLogger{})
	defer goch.Close()
	subscribers := func(string) (message.Subscriber, error) { return sharedSubscriber{goch}, nil }
	var running []chan error
	run := func(f func(context.Context) error) {
		done := make(chan error, 1)
		running = append(running, done)
		go func() { done <- f(ctx) }()
	}
	defer func() {
		cancel()
		for _, done := range running {
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("stopped with %v", err)
			}
		}
	}()

	// The write side: command handlers on the GoChannel.
	svc, err := eventpipe.NewWriteSide(ctx, eventpipe.WriteSideConfig{Process: eventpipe.Process{Endpoints: ep}, ConsumerGroup: testenv.UniqueName(t, "g"), Publisher: goch, NewSubscriber: subscribers})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	run(svc.RunCommandHandlers)

	// The relay: the table's stream onto the GoChannel.
	streams, err := dynamoclient.NewStreams(ctx, dynamoclient.Config{Endpoint: ep.DynamoDB})
	if err != nil {
		t.Fatal(err)
	}
	rl, err := relay.New(relay.Config{Streams: streams, DynamoDB: db, EventsTable: ep.EventsTable, LeaseTable: ep.LeasesTable,
		Publisher: goch, Topics: topics, WorkerID: "w1", DiscoveryInterval: 250 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	run(rl.Run)

	// The todos read model, fed from the GoChannel.
	pool, err := pgxpool.New(ctx, ep.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	applier, err := projections.NewApplier(projections.ApplierConfig{DB: pool, Store: svc.Store, Projection: readmodels.Todos{}})
	if err != nil {
		t.Fatal(err)
	}
	// The store seals the todos' titles: the runner opens them with its
	// sealer, as eventpipe.NewConsumers wires it.
	runner, err := projections.NewRunner(projections.RunnerConfig{Applier: applier, NewSubscriber: subscribers, Publisher: goch, Topics: topics,
		Opener: svc.Store.(*ddbstore.Store).Sealer()})
	if err != nil {
		t.Fatal(err)
	}
	run(runner.Run)

	replies, err := goch.Subscribe(ctx, topics.Replies())
	if err != nil {
		t.Fatal(err)
	}
	id := testenv.UniqueName(t, "todo")
	cmds := []commands.Command{
		rigs.TodoCmd(t, todo.CreateTodo, id, todo.TodoData{Title: "on a GoChannel"}, rigs.Ver(0)),
		rigs.TodoCmd(t, todo.UpdateTodo, id, todo.TodoData{Title: "still on a GoChannel", Completed: true}, rigs.Ver(1)),
		rigs.TodoCmd(t, todo.UpdateTodo, id, todo.TodoData{Title: "stale"}, rigs.Ver(1)),
	}
	want := []commands.Status{commands.StatusAccepted, commands.StatusAccepted, commands.StatusConflict}
	for i, c := range cmds {
		msg, err := c.ToMessage()
		if err != nil {
			t.Fatal(err)
		}
		if err := goch.Publish(c.Topic(topics), msg); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-replies:
			m.Ack()
			res, err := commands.ResultFromMessage(m)
			if err != nil || res.CommandID != c.ID || res.Status != want[i] {
				t.Fatalf("command %d: answer %+v, %v; want %s for %s", i, res, err, want[i], c.ID)
			}
		case <-time.After(integration.HangAfter()):
			t.Fatalf("command %d: no answer on the GoChannel within %v (%s)", i, integration.HangAfter(), integration.EnvHangAfter)
		}
	}

	var title string
	var completed bool
	var version, applied int64
	integration.Await(t, "the read model of "+id+" at version 2", func() error {
		err := pool.QueryRow(ctx, `SELECT title, completed, version, apply_count FROM todos WHERE todo_id = $1`, id).Scan(&title, &completed, &version, &applied)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		if err != nil || version != 2 {
			return fmt.Errorf("version %d, %v", version, err)
		}
		return nil
	})
	if title != "still on a GoChannel" || !completed || applied != 2 {
		t.Fatalf("read model row: %q completed=%v version %d applied %d times", title, completed, version, applied)
	}
}
