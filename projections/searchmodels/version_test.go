package searchmodels_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
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

// envVersionChild runs versionedTodos at the version it names in a
// child.
const envVersionChild = "EVENTPIPE_TEST_SEARCH_VERSION_CHILD"

// versionedTodos is the todos search model under a name of its own,
// whose documents record the version of the model that last wrote them
// (built_by): a rebuild at version 2 writes every document again.
type versionedTodos struct{ version int }

func (versionedTodos) Name() string { return "todos-versioned" }

func (m versionedTodos) Version() int { return m.version }

func (versionedTodos) AggregateTypes() []string { return searchmodels.TodoSearch{}.AggregateTypes() }

func (versionedTodos) EventTypes() []string { return searchmodels.TodoSearch{}.EventTypes() }

func (versionedTodos) IndexBody() map[string]any {
	body := searchmodels.TodoSearch{}.IndexBody()
	props := body["mappings"].(map[string]any)["properties"].(map[string]any)
	props["built_by"] = map[string]any{"type": "integer"}
	return body
}

func (m versionedTodos) Apply(doc json.RawMessage, e eventstore.Envelope) (json.RawMessage, error) {
	out, err := searchmodels.TodoSearch{}.Apply(doc, e)
	if err != nil {
		return nil, err
	}
	var d map[string]any
	if err := json.Unmarshal(out, &d); err != nil {
		return nil, err
	}
	d["built_by"] = m.version
	return json.Marshal(d)
}

// runVersionChildIfRequested runs versionedTodos at the version
// envVersionChild names with NewConsumers' defaults (start: history,
// automatic rebuilds), until SIGTERM or SIGKILL.
func runVersionChildIfRequested() {
	v := os.Getenv(envVersionChild)
	if v == "" {
		return
	}
	slog.SetLogLoggerLevel(slog.LevelWarn)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := func() error {
		cat := eventpipe.Builtin()
		model := versionedTodos{version: map[string]int{"1": 1, "2": 2}[v]}
		if err := cat.AddSearchModel(model); err != nil {
			return err
		}
		consumers, err := eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{Process: eventpipe.Process{Catalog: cat}, Names: []string{model.Name()}})
		if err != nil {
			return err
		}
		defer consumers.Close()
		return consumers.Run(ctx)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "version child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestASearchModelWhoseVersionChangesIsRebuiltBesideTheLiveOne builds
// versionedTodos at version 1 from 125 stored todos (5,000 events), then
// deploys version 2. The child rebuilds it into a new index while the
// alias keeps pointing to version 1's index, which answers searches (every
// todo, built by version 1) and stays live: new todos keep being written
// and published, and appear behind the alias during the rebuild. The
// child is killed with SIGKILL twice mid-rebuild, each time after the new
// index's catch-up state recorded a batch; each restart resumes the same
// index and state (same start, further on). After the swap the alias
// points to the rebuilt index, every document was built by version 2 and
// equals a from-scratch application of the stored events, and the
// model's recorded version is 2.
func TestASearchModelWhoseVersionChangesIsRebuiltBesideTheLiveOne(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	const todos, updates, kills = 125, 39, 2
	const total = todos * (1 + updates)
	ctx := context.Background()
	w := newWorld(t)
	all, _ := w.storeTodos(todos, updates)
	topics := bus.Topics{Prefix: w.prefix}
	name := versionedTodos{}.Name()
	alias := elastic.Alias(topics.Prefix, name)
	stateIndex := elastic.Alias(topics.Prefix, elastic.DefaultCatchUpIndex)
	schema, pgURL := testenv.PostgresSchema(t, "rm") // parking
	if _, err := pgmigrate.Migrate(ctx, pgmigrate.Config{URL: testenv.Endpoints().Postgres, Schema: schema}); err != nil {
		t.Fatal(err)
	}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: testenv.KafkaBrokers(t), Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()

	// live stores a new todo and publishes its event, as the relay would.
	var liveEvents []eventstore.Envelope
	live := func() error {
		id := fmt.Sprintf("live-%04d", len(liveEvents))
		req, err := eventstore.Prepare(eventstore.Ref{Type: todo.AggregateType, ID: id}, 0,
			eventstore.Change{Events: []eventstore.NewEvent{eventstore.Event(todo.TodoCreated, todo.TodoData{Title: id})}}, eventstore.Schema{})
		if err != nil {
			return err
		}
		res, err := w.store.Append(ctx, req)
		if err != nil {
			return err
		}
		liveEvents = append(liveEvents, res.Events...)
		m, err := bus.EventMessage(res.Events[0])
		if err != nil {
			return err
		}
		return pub.Publish(topics.Events(todo.AggregateType), m)
	}

	var child *exec.Cmd
	start := func(version string) {
		child = exec.Command(os.Args[0], "-test.run=^$")
		child.Env = append(os.Environ(), envVersionChild+"="+version, endpoints.EnvKafkaInstanceID+"=search-version-child",
			endpoints.EnvEventsTable+"="+w.store.Table(), endpoints.EnvTopicPrefix+"="+topics.Prefix, endpoints.EnvPostgres+"="+pgURL)
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
	// state reads a catch-up document of the catch-up index.
	state := func(id string) (st struct {
		searchCatchUp
		Version int `json:"version"`
	}) {
		var res struct {
			Source json.RawMessage `json:"_source"`
		}
		err := esclient.Do(ctx, w.es, esapi.GetRequest{Index: stateIndex, DocumentID: id}, &res)
		if esclient.IsNotFound(err) {
			return st
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(res.Source, &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	target := func() string {
		idx, err := elastic.AliasTarget(ctx, w.es, alias)
		if err != nil {
			t.Fatal(err)
		}
		return idx
	}
	// rebuilding is the index a rebuild fills: alias's own, not its
	// target ("" while there is none).
	rebuilding := func() string {
		var res map[string]json.RawMessage
		if err := esclient.Do(ctx, w.es, esapi.IndicesGetRequest{Index: []string{alias + "-*"}}, &res); err != nil && !esclient.IsNotFound(err) {
			t.Fatal(err)
		}
		cur := target()
		for _, idx := range slices.Sorted(maps.Keys(res)) {
			if idx != cur {
				return idx
			}
		}
		return ""
	}
	builtBy := func(index string) map[int]int {
		out := map[int]int{}
		for id, d := range testenv.SearchDocuments(t, w.es, index) {
			var doc struct {
				BuiltBy int `json:"built_by"`
			}
			if err := json.Unmarshal([]byte(d.Source), &doc); err != nil {
				t.Fatalf("document %s: %v", id, err)
			}
			out[doc.BuiltBy]++
		}
		return out
	}

	// Version 1, caught up from the store.
	start("1")
	integration.AwaitProgress(t, "version 1's catch-up", func() int64 {
		if st := state(alias); st.Done != nil {
			return total + 1
		} else {
			return st.Events
		}
	}, total+1)
	kill()
	v1Index := target()
	if got := builtBy(alias); got[1] != todos || len(got) != 1 {
		t.Fatalf("version 1 built %v (documents by version), want %d by version 1", got, todos)
	}

	// Version 2; new todos keep coming.
	stop := make(chan struct{})
	writing := make(chan struct{})
	go func() {
		defer close(writing)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				if err := live(); err != nil {
					t.Errorf("write a live todo: %v", err)
					return
				}
			}
		}
	}()
	stopWriting := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-writing
	}
	defer stopWriting()
	start("2")
	var fresh string
	var prev struct {
		searchCatchUp
		Version int `json:"version"`
	}
	liveBehindAlias := func() int { return builtBy(alias)[2] } // live todos written by version 2's live consumer
	var liveDuringRebuild int
	for k := range kills {
		for deadline := time.Now().Add(integration.HangAfter()); ; time.Sleep(5 * time.Millisecond) {
			if fresh == "" {
				fresh = rebuilding()
			}
			if fresh == "" {
				continue
			}
			st := state(fresh)
			if target() != v1Index {
				t.Fatalf("kill %d: the alias moved to %s before the kill", k+1, target())
			}
			if st.Events > prev.Events && (k > 0 || liveBehindAlias() > 0) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("kill %d: the rebuild into %q did not record a batch past %d events in %v (%s; state %+v)", k+1, fresh, prev.Events, integration.HangAfter(), integration.EnvHangAfter, st)
			}
		}
		time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond)
		kill()
		st, by := state(fresh), builtBy(alias)
		t.Logf("kill %d: rebuild of %s events=%d after=%s done=%v; behind the alias (%s): documents by version %v", k+1, fresh, st.Events, st.After, st.Done != nil, target(), by)
		switch {
		case st.Done != nil || st.Events <= 0 || st.Events >= total:
			t.Fatalf("kill %d did not land mid-rebuild: state %+v of %d events", k+1, st, total)
		case st.Version != 2:
			t.Fatalf("kill %d: the new index is a rebuild at version %d, want 2", k+1, st.Version)
		case target() != v1Index || by[1] != todos:
			t.Fatalf("kill %d: the alias points to %s (want %s) with %d documents by version 1 (want %d)", k+1, target(), v1Index, by[1], todos)
		case k > 0 && (!st.Started.Equal(prev.Started) || st.Events <= prev.Events):
			t.Fatalf("kill %d: state %+v did not resume the previous kill's %+v", k+1, st, prev)
		}
		if k == 0 {
			liveDuringRebuild = by[2]
		}
		prev = st
		start("2")
	}
	integration.AwaitProgress(t, "the rebuild to move the alias", func() int64 {
		if st := state(alias); st.Version == 2 {
			return total + 1
		}
		return min(state(fresh).Events, total)
	}, total+1)
	stopWriting()
	if target() != fresh {
		t.Fatalf("the alias points to %s, want the rebuilt index %s", target(), fresh)
	}
	want := w.scratch(versionedTodos{version: 2}, append(slices.Clone(all), liveEvents...))
	integration.AwaitProgress(t, "every live todo behind the alias", func() int64 { return int64(len(w.documents(alias))) }, int64(len(want)))
	assertSame(t, "after the rebuild", w.documents(alias), want)
	if liveDuringRebuild == 0 {
		t.Error("no live todo reached the alias during the rebuild")
	}
	t.Logf("rebuilt %d stored events at version 2 through %d kills; %d live todos written, %d behind the alias at the first kill", total, kills, len(liveEvents), liveDuringRebuild)
}
