package integration_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// consume is a child's main: the todos read model, on the endpoints of
// the child's environment, until the child is stopped or killed.
func consume(ctx context.Context, _ []string) error {
	slog.SetLogLoggerLevel(slog.LevelWarn)
	c, err := eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{Names: []string{"todos"}})
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Run(ctx)
}

// TestTheReadModelAppliesEveryEventOnceThroughKills runs the todos read
// model in a child process that is killed with SIGKILL three times while
// it applies the events of 60 todos, written as it runs (the relay
// publishes them in this process); in the end each todo's row applied
// each event exactly once.
func TestTheReadModelAppliesEveryEventOnceThroughKills(t *testing.T) {
	const todos, perTodo = 60, 20
	ep := integration.Isolate(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	catalog := eventpipe.Builtin()
	if _, err := eventpipe.Migrate(ctx, eventpipe.MigrateConfig{Process: eventpipe.Process{Catalog: catalog, Endpoints: ep}}); err != nil {
		t.Fatal(err)
	}
	store, err := eventpipe.OpenStore(ctx, ep, catalog, nil)
	if err != nil {
		t.Fatal(err)
	}
	child := integration.StartChild(t, integration.ChildConfig{Main: "consume", Env: integration.Environ(ep)})
	relay, err := eventpipe.NewRelay(ctx, eventpipe.RelayConfig{Process: eventpipe.Process{Endpoints: ep}})
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	done := make(chan error, 1)
	go func() { done <- relay.Run(ctx) }()
	defer func() { cancel(); <-done }()

	db, err := eventpipe.OpenPostgres(ctx, ep)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	count := func() (n int64, err error) {
		err = db.QueryRow(ctx, `SELECT coalesce(sum(apply_count), 0) FROM todos`).Scan(&n)
		return n, err
	}
	applied := func() int64 {
		n, err := count()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	// The events are written while the child runs, as live traffic:
	// rounds of two events per todo, each round once the read model is at
	// most one round behind, so that the writing lasts through the kills.
	written := make(chan struct{})
	go func() {
		defer close(written)
		schema := eventstore.Schema{Types: todo.Domain().EventTypes}
		for v := 1; v <= perTodo; v += 2 {
			for {
				n, err := count()
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("applied: %v", err)
					}
					return
				}
				if n >= int64((v-3)*todos) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			for i := range todos {
				var events []eventstore.NewEvent
				for _, n := range []int{v, v + 1} {
					typ := todo.TodoUpdated
					if n == 1 {
						typ = todo.TodoCreated
					}
					events = append(events, eventstore.Event(typ, todo.TodoData{Title: fmt.Sprintf("v%d", n)}))
				}
				req, err := eventstore.Prepare(eventstore.Ref{Type: todo.AggregateType, ID: fmt.Sprintf("t%02d", i)}, int64(v-1), eventstore.Change{Events: events}, schema)
				if err == nil {
					_, err = store.Append(ctx, req)
				}
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
			}
		}
	}()
	defer func() { cancel(); <-written }()

	integration.KillRepeatedly(t, child, applied, todos*perTodo, 3)

	var rows, wrong int
	if err := db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE apply_count <> version OR version <> $1 OR title <> $2) FROM todos`,
		perTodo, fmt.Sprintf("v%d", perTodo)).Scan(&rows, &wrong); err != nil {
		t.Fatal(err)
	}
	if rows != todos || wrong != 0 {
		t.Fatalf("todos holds %d rows, %d of them not at version %d applied once per event", rows, wrong, perTodo)
	}
}
