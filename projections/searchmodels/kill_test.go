package searchmodels_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/dev/testservers"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/internal/probe"
	pgmigrate "github.com/eventpipe/eventpipe/migrations/postgres"
	"github.com/eventpipe/eventpipe/projections/elastic"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
	"github.com/eventpipe/eventpipe/projections/searchmodels"
)

const (
	envConsumeChild = "EVENTPIPE_TEST_SEARCH_CONSUME_CHILD"
	// envConsumeChildStart is the child's ConsumersConfig.Start
	// (bus.ParseStart; "default" for the search model's default:
	// history); unset: earliest, without catch-up.
	envConsumeChildStart = "EVENTPIPE_TEST_SEARCH_CONSUME_CHILD_START"
)

// runConsumeChildIfRequested runs the todos search model in this process
// when a test started it as a child: eventpipe.NewConsumers from the
// environment (events table, topic prefix), without catch-up unless
// envConsumeChildStart says otherwise.
func runConsumeChildIfRequested() {
	if os.Getenv(envConsumeChild) == "" {
		return
	}
	slog.SetLogLoggerLevel(slog.LevelWarn)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := func() error {
		start := bus.StartEarliest
		if s := os.Getenv(envConsumeChildStart); s != "" {
			var err error
			if start, err = bus.ParseStart(s); err != nil {
				return err
			}
		}
		consumers, err := eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{Names: []string{searchmodels.TodoSearch{}.Name()}, Start: start})
		if err != nil {
			return err
		}
		defer consumers.Close()
		return consumers.Run(ctx)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "consume child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// versionSum is the sum of the versions of the documents ids in index
// alias (real time): the number of events applied when every aggregate's
// sequence starts at 1.
func versionSum(t testing.TB, es *esclient.Client, alias string, ids []string) int64 {
	t.Helper()
	var res struct {
		Docs []struct {
			Version int64 `json:"_version"`
		} `json:"docs"`
	}
	body, _ := json.Marshal(map[string]any{"ids": ids})
	if err := esclient.Do(context.Background(), es, esapi.MgetRequest{Index: alias, Body: strings.NewReader(string(body))}, &res); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, d := range res.Docs {
		n += d.Version
	}
	return n
}

// TestKilledSearchConsumerEndsEqualToTheReplay covers the live path: it
// publishes 10,000 todo events (100 todos of 100 events) on the topic and
// runs the todos search model in a child process (eventpipe.NewConsumers,
// as `eventpipe consume` does, with --start earliest: no catch-up from the
// store) that is killed with SIGKILL at random moments 6 times and
// restarted, each kill once the running child has applied more. Every
// kill must land mid-write: the documents' version sum (the events
// applied) at each kill is above the previous kill's and strictly between
// 0 and 10,000. In the end every document equals a from-scratch
// application of the events.
//
// The events go straight onto the topic, as the relay would put them,
// and not into the store: a consumer fed in order never reads the store
// (it would only to repair a gap, and then find nothing and fail the test
// loudly). The catch-up from the store, killed mid-way, is
// TestKilledSearchCatchUpResumesAndEndsEqualToTheStore.
func TestKilledSearchConsumerEndsEqualToTheReplay(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	const todos, perTodo, kills = 100, 100, 6
	w := newWorld(t)
	p := searchmodels.TodoSearch{}
	topics := bus.Topics{Prefix: w.prefix}
	brokers := testenv.KafkaBrokers(t)
	all := syntheticTodos(todos, todos*perTodo)
	msgs := make([]*message.Message, len(all))
	for i, e := range all {
		m, err := bus.EventMessage(e)
		if err != nil {
			t.Fatal(err)
		}
		msgs[i] = m
	}
	todoIDs := make([]string, todos)
	for i := range todoIDs {
		todoIDs[i] = all[i].AggregateID
	}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	if err := pub.Publish(topics.Events(todo.AggregateType), msgs...); err != nil {
		t.Fatal(err)
	}

	alias := elastic.Alias(topics.Prefix, p.Name())
	if err := elastic.EnsureIndex(context.Background(), w.es, p, alias); err != nil {
		t.Fatal(err)
	}

	// The search model parks into Postgres (NewConsumers' default): a
	// migrated schema of the test's own, for the child.
	schema, pgURL := testenv.PostgresSchema(t, "rm")
	if _, err := pgmigrate.Migrate(context.Background(), pgmigrate.Config{URL: testenv.Endpoints().Postgres, Schema: schema}); err != nil {
		t.Fatal(err)
	}
	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		// A static group member: each restart takes back the partitions
		// at once (see readmodels' TestKilledConsumerAppliesEveryEventOnce).
		cmd.Env = append(os.Environ(), envConsumeChild+"=1", endpoints.EnvKafkaInstanceID+"=search-child",
			endpoints.EnvEventsTable+"="+w.store.Table(), endpoints.EnvTopicPrefix+"="+topics.Prefix, endpoints.EnvPostgres+"="+pgURL)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	applied := func() int64 { return versionSum(t, w.es, alias, todoIDs) }
	killedAt := testenv.KillRepeatedly(t, start, applied, int64(len(all)), kills)
	// KillRepeatedly already fails unless most kills landed before the
	// end; a fast child may finish before the last ones, and that is no
	// failure. Each kill before the end came after more was applied.
	for i, n := range killedAt {
		if n < int64(len(all)) && (n <= 0 || (i > 0 && n <= killedAt[i-1])) {
			t.Errorf("kill %d did not land after more was applied: versions added up to %v at the kills, of %d", i+1, killedAt, len(all))
		}
	}
	assertSame(t, "after the kills", w.documents(alias), w.scratch(p, all))
}

// TestKilledElasticsearchServerLosesNoAcknowledgedWrite runs an
// Elasticsearch-API server as a child process, applies todo events to it
// through an Applier while killing the server with SIGKILL three times
// mid-stream (restarting it on the same data), and checks after the last
// restart that every aggregate is at least at the position of its last
// acknowledged Apply, and that re-applying everything ends equal to a
// from-scratch application.
func TestKilledElasticsearchServerLosesNoAcknowledgedWrite(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	w := newWorld(t)
	ctx := context.Background()
	dir := t.TempDir()
	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	url := "http://" + addr
	var server *exec.Cmd
	startServer := func() {
		args, env := testservers.ESServerCommand()
		server = exec.Command(args[0], "--addr", addr, "--data-dir", filepath.Join(dir, "es"))
		server.Env = append(os.Environ(), env...)
		server.Stdout, server.Stderr = os.Stderr, os.Stderr
		if err := server.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for probe.Elasticsearch(ctx, url, esclient.Security{}) != nil {
			if time.Now().After(deadline) {
				t.Fatalf("the Elasticsearch-API server child at %s did not come up", addr)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	startServer()
	defer func() { _ = server.Process.Kill(); _, _ = server.Process.Wait() }()
	es, err := esclient.NewClient(url, esclient.Security{})
	if err != nil {
		t.Fatal(err)
	}
	p := searchmodels.TodoSearch{}
	if err := elastic.EnsureIndex(ctx, es, p, p.Name()); err != nil {
		t.Fatal(err)
	}
	a, err := elastic.NewApplier(elastic.ApplierConfig{Client: es, Store: w.store, Projection: p})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	var all []eventstore.Envelope
	for _, id := range ids("todo-", 150) {
		all = append(all, w.todoHistory(id, rng)...)
	}
	acked := map[string]int64{}
	failed, kills := 0, 0
	for i := 0; i < len(all); {
		n := min(len(all)-i, 1+rng.IntN(20))
		if kills < 3 && i > (kills+1)*len(all)/4 {
			// Kill while a write is in flight: the Apply runs in a
			// goroutine and the kill follows at once.
			done := make(chan error, 1)
			batch := all[i : i+n]
			go func() { _, err := a.Apply(ctx, batch); done <- err }()
			time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
			_ = server.Process.Signal(syscall.SIGKILL)
			_, _ = server.Process.Wait()
			kills++
			if err := <-done; err == nil {
				for _, e := range batch {
					acked[e.AggregateID] = max(acked[e.AggregateID], e.Sequence)
				}
			} else {
				failed++
			}
			startServer()
			i += n
			continue
		}
		out, err := a.Apply(ctx, all[i:i+n])
		if err != nil {
			t.Fatal(err)
		}
		for ref, pos := range out.Positions {
			acked[ref.ID] = max(acked[ref.ID], pos)
		}
		i += n
	}
	if kills < 3 {
		t.Fatalf("only %d kills", kills)
	}
	got := (&world{t: t, es: es}).documents(p.Name())
	for id, pos := range acked {
		if got[id].Version < pos {
			t.Errorf("todo %s at version %d after the restarts; an acknowledged write had moved it to %d", id, got[id].Version, pos)
		}
	}
	// Whatever a killed write left undone, a redelivery completes.
	if _, err := a.Apply(ctx, all); err != nil {
		t.Fatal(err)
	}
	scratch := w.scratch(p, all)
	assertSame(t, "after the server kills", (&world{t: t, es: es}).documents(p.Name()), scratch)
	t.Logf("%d kills of the server; %d writes in flight at a kill failed, %d acknowledged aggregates checked", kills, failed, len(acked))
}
