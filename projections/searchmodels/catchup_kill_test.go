package searchmodels_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"
	"golang.org/x/sync/errgroup"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/eventstore"
	pgmigrate "github.com/eventpipe/eventpipe/migrations/postgres"
	"github.com/eventpipe/eventpipe/projections/elastic"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
	"github.com/eventpipe/eventpipe/projections/searchmodels"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// storeTodos appends n todos to w's store, each in one append of
// TodoCreated and updates TodoUpdated, from 8 goroutines (DynamoDB Local
// writes one transaction at a time, about 80 a second here). It
// returns every stored event and the todos' ids.
func (w *world) storeTodos(n, updates int) ([]eventstore.Envelope, []string) {
	w.t.Helper()
	results := make([][]eventstore.Envelope, n)
	ids := ids("todo-", n)
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(8)
	for i, id := range ids {
		g.Go(func() error {
			evs := []eventstore.NewEvent{eventstore.Event(todo.TodoCreated, todo.TodoData{Title: "task " + id, Message: "new"})}
			for j := range updates {
				evs = append(evs, eventstore.Event(todo.TodoUpdated,
					todo.TodoData{Title: fmt.Sprintf("task %s take %d", id, j+1), Message: fmt.Sprint("note ", rand.IntN(1000)), Completed: rand.IntN(2) == 0}))
			}
			req, err := eventstore.Prepare(eventstore.Ref{Type: todo.AggregateType, ID: id}, 0, eventstore.Change{Events: evs}, eventstore.Schema{})
			if err != nil {
				return err
			}
			res, err := w.store.Append(ctx, req)
			if err != nil {
				return fmt.Errorf("append %s: %w", id, err)
			}
			results[i] = res.Events
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		w.t.Fatal(err)
	}
	var all []eventstore.Envelope
	for _, evs := range results {
		all = append(all, evs...)
	}
	return all, ids
}

// searchCatchUp is a search model's catch-up document as the test reads
// it (the zero value when there is none).
type searchCatchUp struct {
	Started time.Time  `json:"started"`
	After   string     `json:"after"`
	Events  int64      `json:"events"`
	Done    *time.Time `json:"done"`
}

// catchUpDoc reads the catch-up document of alias from index (real time).
func (w *world) catchUpDoc(index, alias string) searchCatchUp {
	w.t.Helper()
	var res struct {
		Source searchCatchUp `json:"_source"`
	}
	err := esclient.Do(context.Background(), w.es, esapi.GetRequest{Index: index, DocumentID: alias}, &res)
	if esclient.IsNotFound(err) {
		return searchCatchUp{}
	}
	if err != nil {
		w.t.Fatal(err)
	}
	return res.Source
}

// TestKilledSearchCatchUpResumesAndEndsEqualToTheStore is the issue's
// acceptance test for a search model: 125 todos (5,000 events) exist
// only in the event store, the live topics are empty (a namespace of the
// test's own), and the todos search model runs in a child process
// (eventpipe.NewConsumers with the search model's default start:
// history) that is killed with SIGKILL three times during its catch-up
// and restarted. Each kill follows a batch the running child recorded in
// <prefix>eventpipe-catchup (document id: the alias), and after each kill
// that document and the documents' version sum (the events applied) show
// the catch-up mid-way: not done, 0 < events ≤ version sum < 5,000 (the
// state never claims an event the index lacks), events above the previous
// kill's (the restart resumed and made progress). Polled throughout, the
// document never goes back and keeps its first start: no restart begins
// again. In the end the catch-up is done with exactly 5,000 events counted (one that started
// over after a kill would count re-read events again), the group was
// started on the live topics, and every document equals a from-scratch
// application of the stored events, version included.
func TestKilledSearchCatchUpResumesAndEndsEqualToTheStore(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	const todos, updates, kills = 125, 39, 3
	const total = todos * (1 + updates)
	began := time.Now()
	w := newWorld(t)
	all, todoIDs := w.storeTodos(todos, updates)
	if len(all) != total {
		t.Fatalf("stored %d events, want %d", len(all), total)
	}
	t.Logf("stored %d events of %d todos in %v", total, todos, time.Since(began).Round(time.Millisecond))
	p := searchmodels.TodoSearch{}
	topics := bus.Topics{Prefix: w.prefix}
	alias := elastic.Alias(topics.Prefix, p.Name())
	stateIndex := elastic.Alias(topics.Prefix, elastic.DefaultCatchUpIndex)

	// The search model parks into Postgres (NewConsumers' default): a
	// migrated schema of the test's own, for the child.
	schema, pgURL := testenv.PostgresSchema(t, "rm")
	if _, err := pgmigrate.Migrate(context.Background(), pgmigrate.Config{URL: testenv.Endpoints().Postgres, Schema: schema}); err != nil {
		t.Fatal(err)
	}
	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envConsumeChild+"=1", envConsumeChildStart+"=default",
			endpoints.EnvEventsTable+"="+w.store.Table(), endpoints.EnvTopicPrefix+"="+topics.Prefix, endpoints.EnvPostgres+"="+pgURL)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	applied := func() int64 {
		if w.catchUpDoc(stateIndex, alias) == (searchCatchUp{}) {
			return 0 // no catch-up yet: maybe no index either
		}
		return versionSum(t, w.es, alias, todoIDs)
	}

	// observe reads the state, failing t if it ever goes back or names
	// another start than the first one seen: a catch-up begun again
	// instead of resumed. seen is every distinct events count observed.
	var (
		first, last searchCatchUp
		seen        []int64
	)
	observe := func() searchCatchUp {
		st := w.catchUpDoc(stateIndex, alias)
		switch {
		case st.Started.IsZero():
			return st
		case first.Started.IsZero():
			first = st
		case !st.Started.Equal(first.Started):
			t.Fatalf("the catch-up began again at %v (first began at %v): state %+v", st.Started, first.Started, st)
		}
		if st.Events < last.Events || st.After < last.After {
			t.Fatalf("the catch-up state went back from %+v to %+v", last, st)
		}
		if st.Events != last.Events {
			seen = append(seen, st.Events)
		}
		last = st
		return st
	}

	catchUpStarted := time.Now()
	child := start()
	t.Cleanup(func() { _ = child.Process.Kill(); _, _ = child.Process.Wait() })
	var prev searchCatchUp
	for k := range kills {
		// Wait for the running child to record a batch beyond the
		// previous kill's state.
		deadline := time.Now().Add(integration.HangAfter()) // polled every 5 ms, to kill soon after the batch
		for {
			st := observe()
			if st.Done != nil {
				t.Fatalf("kill %d: the catch-up finished (%+v) before the kill", k+1, st)
			}
			if st.Events > prev.Events {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("kill %d: the catch-up did not move past %d events in %v (%s; state %+v)", k+1, prev.Events, integration.HangAfter(), integration.EnvHangAfter, st)
			}
			time.Sleep(5 * time.Millisecond)
		}
		// Land somewhere in the next batch: reading it, in its _bulk, or
		// between the _bulk and the state's write.
		time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond)
		_ = child.Process.Signal(syscall.SIGKILL)
		_, _ = child.Process.Wait()
		st, sum := observe(), applied()
		t.Logf("kill %d: catch-up state events=%d after=%s done=%v; document versions add up to %d of %d", k+1, st.Events, st.After, st.Done != nil, sum, total)
		switch {
		case st.Done != nil || st.Events <= 0 || st.Events >= total:
			t.Fatalf("kill %d did not land mid-catch-up: state %+v of %d events", k+1, st, total)
		case st.Events <= prev.Events || st.After <= prev.After:
			t.Fatalf("kill %d: state %+v did not advance past the previous kill's %+v", k+1, st, prev)
		case sum < st.Events:
			t.Fatalf("kill %d: the state claims %d events but the documents' versions add up to %d", k+1, st.Events, sum)
		case sum >= total:
			t.Fatalf("kill %d: every event was applied already (versions add up to %d)", k+1, sum)
		}
		prev = st
		child = start()
	}

	// The last child finishes the catch-up and hands over to the topics.
	var final searchCatchUp
	integration.AwaitProgress(t, "the catch-up after the last kill (its events, then done)", func() int64 {
		if final = observe(); final.Done != nil {
			return total + 1
		}
		return min(final.Events, total)
	}, total+1)
	t.Logf("caught up %v after the first start, through %d kills; state events=%d after=%s; events counts seen: %v",
		time.Since(catchUpStarted).Round(time.Millisecond), kills, final.Events, final.After, seen)
	if final.Events != total {
		t.Errorf("the catch-up counted %d events, want exactly the %d stored: more means it read events again after a kill instead of resuming", final.Events, total)
	}
	if final.After < prev.After {
		t.Errorf("the final cursor %s is below the last kill's %s", final.After, prev.After)
	}
	brokers := testenv.KafkaBrokers(t)
	group, topic := topics.Prefix+"projection."+p.Name(), topics.Events(todo.AggregateType)
	integration.Await(t, "the group "+group+" to start on "+topic+" after the catch-up", func() error {
		if len(testenv.CommittedOffsets(t, brokers, group, topic)) == 0 {
			return errors.New("no offset committed")
		}
		return nil
	})

	got, want := w.documents(alias), w.scratch(p, all)
	if len(want) != todos {
		t.Fatalf("the scratch application holds %d documents, want %d", len(want), todos)
	}
	lastSeq := lastSequences(all)
	for id, d := range got {
		if d.Version != lastSeq[id] {
			t.Errorf("todo %s at version %d, its last stored sequence is %d", id, d.Version, lastSeq[id])
		}
	}
	assertSame(t, "after the killed catch-up", got, want)
	t.Logf("test took %v", time.Since(began).Round(time.Millisecond))
}
