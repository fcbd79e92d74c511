package readmodels_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/readmodels"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// envGainedChild runs todosAndAccounts in a child: "1" reading todos,
// "2" reading bank accounts too; envGainedSchema is its Postgres schema.
const (
	envGainedChild  = "EVENTPIPE_TEST_GAINED_CHILD"
	envGainedSchema = "EVENTPIPE_TEST_GAINED_SCHEMA"
)

// todosAndAccounts is one read model (one name, one set of positions)
// that reads todos and, from its second version, bank accounts too,
// writing the todos and accounts tables as Todos and Accounts do.
type todosAndAccounts struct{ accounts bool }

func (todosAndAccounts) Name() string { return "todos-and-accounts" }

func (m todosAndAccounts) AggregateTypes() []string {
	types := slices.Clone(readmodels.Todos{}.AggregateTypes())
	if m.accounts {
		types = append(types, readmodels.Accounts{}.AggregateTypes()...)
	}
	return types
}

func (m todosAndAccounts) EventTypes() []string {
	types := slices.Clone(readmodels.Todos{}.EventTypes())
	if m.accounts {
		types = append(types, readmodels.Accounts{}.EventTypes()...)
	}
	return types
}

func (m todosAndAccounts) Apply(ctx context.Context, b *pgx.Batch, e eventstore.Envelope) error {
	if slices.Contains(readmodels.Accounts{}.AggregateTypes(), e.AggregateType) {
		return readmodels.Accounts{}.Apply(ctx, b, e)
	}
	return readmodels.Todos{}.Apply(ctx, b, e)
}

// runGainedChildIfRequested runs todosAndAccounts (the version
// envGainedChild names) in this process with NewConsumers' defaults
// (start: history), until SIGTERM or SIGKILL.
func runGainedChildIfRequested() {
	runModelChildIfRequested("gained child", envGainedChild, envGainedSchema, func(v string) (projections.Projection, error) {
		return todosAndAccounts{accounts: v == "2"}, nil
	})
}

// runModelChildIfRequested runs, when the environment variable env is
// set, the read model that model builds from its value, alone in this
// process on the Postgres schema schemaEnv names, with NewConsumers'
// defaults (start: history, automatic rebuilds), until SIGTERM or
// SIGKILL; then it exits. what names the child in its errors.
func runModelChildIfRequested(what, env, schemaEnv string, model func(spec string) (projections.Projection, error)) {
	v := os.Getenv(env)
	if v == "" {
		return
	}
	slog.SetLogLoggerLevel(slog.LevelWarn)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := func() error {
		m, err := model(v)
		if err != nil {
			return err
		}
		db, err := schemaPool(ctx, os.Getenv(schemaEnv))
		if err != nil {
			return err
		}
		defer db.Close()
		cat := eventpipe.Builtin()
		if err := cat.AddReadModel(m); err != nil {
			return err
		}
		consumers, err := eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{Process: eventpipe.Process{Catalog: cat}, Names: []string{m.Name()}, DB: db})
		if err != nil {
			return err
		}
		defer consumers.Close()
		return consumers.Run(ctx)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, what+":", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestAReadModelThatGainsATypeCatchesUpItsHistoryWhileItStaysLive runs a
// read model of todos until its catch-up is done, stores 100 bank
// accounts (8,000 events) that only the event store holds, and deploys
// the read model's second version, which reads accounts too. Its catch-up
// of the account history runs beside the live consumer: todo events keep
// being written and published all along and are applied meanwhile. The
// child is killed with SIGKILL twice during that catch-up, each time after
// it committed a batch and with the catch-up mid-way (the first time once
// it has also applied a live todo); each restart resumes it. In the end every account and every todo equals its stored
// events, each event applied once (apply_count = version = position), and
// the catch-up counted exactly the 8,000 account events.
func TestAReadModelThatGainsATypeCatchesUpItsHistoryWhileItStaysLive(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	const accounts, perAccount, kills = 200, 39, 2
	const total = accounts * (1 + perAccount)
	w := newWorld(t)
	topics := bus.Topics{Prefix: testenv.UniqueName(t, "ns") + "."}
	name := todosAndAccounts{}.Name()
	brokers := testenv.KafkaBrokers(t)
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	// todos writes a todo to the store and publishes its event, as the
	// relay would.
	var todoCount atomic.Int64
	todos := func() error {
		id := fmt.Sprintf("todo-%04d", todoCount.Load()+1)
		req, err := eventstore.Prepare(eventstore.Ref{Type: todo.AggregateType, ID: id}, 0,
			eventstore.Change{Events: []eventstore.NewEvent{eventstore.Event(todo.TodoCreated, todo.TodoData{Title: id})}}, eventstore.Schema{})
		if err != nil {
			return err
		}
		res, err := w.store.Append(context.Background(), req)
		if err != nil {
			return err
		}
		todoCount.Add(1)
		m, err := bus.EventMessage(res.Events[0])
		if err != nil {
			return err
		}
		return pub.Publish(topics.Events(todo.AggregateType), m)
	}
	var child *exec.Cmd
	start := func(version string) {
		child = exec.Command(os.Args[0], "-test.run=^$")
		child.Env = append(os.Environ(), envGainedChild+"="+version, envGainedSchema+"="+w.schema, endpoints.EnvKafkaInstanceID+"=gained-child",
			endpoints.EnvEventsTable+"="+w.table, endpoints.EnvTopicPrefix+"="+topics.Prefix)
		child.Stdout, child.Stderr = os.Stderr, os.Stderr
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
	}
	kill := func() {
		_ = child.Process.Signal(syscall.SIGKILL)
		_, _ = child.Process.Wait()
	}
	t.Cleanup(func() { kill() })
	todosApplied := func() int64 {
		var n int64
		if err := w.db.QueryRow(context.Background(), `SELECT count(*) FROM projection_positions WHERE projection = $1 AND aggregate_type = $2`,
			name, todo.AggregateType).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Version 1: todos only, caught up and live.
	for range 20 {
		if err := todos(); err != nil {
			t.Fatal(err)
		}
	}
	start("1")
	integration.Await(t, "version 1's catch-up to finish", func() error {
		if r := w.catchUpRow(t, name); !r.Done {
			return fmt.Errorf("catch-up state %+v", r)
		}
		return nil
	})
	integration.AwaitProgress(t, "version 1 to apply the todos", todosApplied, todoCount.Load())
	kill()
	appliedByV1 := todosApplied()

	stored := w.storeAccounts(t, accounts, perAccount)
	first := w.catchUpRow(t, name)

	// Version 2 reads accounts too; todos keep coming.
	stop := make(chan struct{})
	writing := make(chan struct{})
	go func() {
		defer close(writing)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				if err := todos(); err != nil {
					t.Errorf("write a todo: %v", err)
					return
				}
			}
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-writing
	}()
	start("2")
	var (
		prev               catchUpRow
		appliedAtFirstKill int64
	)
	for k := range kills {
		// Polled every 5 ms, to kill soon after the batch.
		for deadline := time.Now().Add(integration.HangAfter()); ; time.Sleep(5 * time.Millisecond) {
			r := w.catchUpRow(t, name)
			if r.Done && !r.Started.Equal(first.Started) {
				t.Fatalf("kill %d: the catch-up of the accounts finished (%+v) before the kill", k+1, r)
			}
			// Before the first kill, version 2 must also have applied a
			// live todo: the live consumer runs beside the catch-up.
			if !r.Started.Equal(first.Started) && r.Events > prev.Events && (k > 0 || todosApplied() > appliedByV1) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("kill %d: the accounts' catch-up did not commit a batch past %d events in %v (%s; state %+v)", k+1, prev.Events, integration.HangAfter(), integration.EnvHangAfter, r)
			}
		}
		// Land in the next batch: reading it from the store, or in its
		// transaction.
		time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond)
		applied := todosApplied()
		kill()
		if k == 0 {
			appliedAtFirstKill = applied
		}
		r := w.catchUpRow(t, name)
		t.Logf("kill %d: catch-up events=%d after=%s done=%v; %d of %d todos applied", k+1, r.Events, r.After, r.Done, applied, todoCount.Load())
		if r.Done || r.Events <= 0 || r.Events >= total {
			t.Fatalf("kill %d did not land mid-catch-up: state %+v of %d events", k+1, r, total)
		}
		if k > 0 && r.Events <= prev.Events {
			t.Fatalf("kill %d: state %+v did not advance past the previous kill's %+v", k+1, r, prev)
		}
		prev = r
		start("2")
	}
	var final catchUpRow
	integration.AwaitProgress(t, "the accounts' catch-up after the last kill", func() int64 {
		if final = w.catchUpRow(t, name); final.Done {
			return total + 1
		}
		return min(final.Events, total)
	}, total+1)
	close(stop)
	<-writing
	integration.AwaitProgress(t, "every todo to be applied", todosApplied, todoCount.Load())
	t.Logf("catch-up of the accounts: %d events; todos applied: %d by version 1, %d at the first kill, %d written in all", final.Events, appliedByV1, appliedAtFirstKill, todoCount.Load())
	if final.Events != total {
		t.Errorf("the accounts' catch-up counted %d events, want exactly the %d stored", final.Events, total)
	}
	if appliedAtFirstKill <= appliedByV1 {
		t.Errorf("version 2 applied no todo before the first kill, mid-way through the accounts' catch-up (%d applied, as version 1 left it): the live consumer did not run beside the catch-up", appliedAtFirstKill)
	}
	w.assertAccountsEqualIn(t, name, stored)
	var wrong int
	if err := w.db.QueryRow(context.Background(), `SELECT count(*) FROM todos x LEFT JOIN projection_positions p
		ON p.projection = $1 AND p.aggregate_type = $2 AND p.aggregate_id = x.todo_id
		WHERE x.version <> 1 OR x.apply_count <> 1 OR p.seq IS DISTINCT FROM 1 OR x.title <> x.todo_id`, name, todo.AggregateType).Scan(&wrong); err != nil {
		t.Fatal(err)
	}
	var rows int64
	if err := w.db.QueryRow(context.Background(), `SELECT count(*) FROM todos`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if wrong != 0 || rows != todoCount.Load() {
		t.Errorf("%d todo rows (want %d), %d of them not applied exactly once", rows, todoCount.Load(), wrong)
	}
}
