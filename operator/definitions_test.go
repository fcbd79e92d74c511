package operator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/operator"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// todoTitles is a read model of the todos' titles in a table of its own.
// Version 2 also reads TodoDeleted.
type todoTitles struct{ version int }

func (todoTitles) Name() string             { return "todo-titles" }
func (m todoTitles) Version() int           { return m.version }
func (todoTitles) AggregateTypes() []string { return []string{todo.AggregateType} }
func (todoTitles) Tables() []string         { return []string{"todo_titles"} }

func (m todoTitles) EventTypes() []string {
	if m.version >= 2 {
		return []string{todo.TodoCreated, todo.TodoDeleted}
	}
	return []string{todo.TodoCreated}
}

func (todoTitles) Migrations() fs.FS {
	return fstest.MapFS{"001_todo_titles.sql": {Data: []byte(`CREATE TABLE todo_titles (id text PRIMARY KEY, title text NOT NULL, built_by integer NOT NULL);
---- create above / drop below ----
DROP TABLE todo_titles;
`)}}
}

func (m todoTitles) Apply(_ context.Context, b *pgx.Batch, e eventstore.Envelope) error {
	switch e.EventType {
	case todo.TodoCreated:
		var d todo.TodoData
		if err := json.Unmarshal(e.Payload, &d); err != nil {
			return &eventstore.DecodeError{What: e.String(), Field: "payload", Reason: err.Error()}
		}
		b.Queue(`INSERT INTO todo_titles (id, title, built_by) VALUES ($1, $2, $3)`, e.AggregateID, d.Title, m.version)
	case todo.TodoDeleted:
		if m.version >= 2 {
			b.Queue(`DELETE FROM todo_titles WHERE id = $1`, e.AggregateID)
		}
	}
	return nil
}

// TestStatusShowsADefinitionChangeAndARebuildInProgress runs todoTitles at
// version 1 over 30 stored todos, then reads Status as the catalogue
// declares version 2 (which reads TodoDeleted too) before it is deployed,
// after its first start was recorded, while its rebuild is half-way (one
// interrupted with its shadow kept) and once version 2's consumer swapped
// it in. Each reading says what it should: the change not deployed yet,
// the change made, the rebuild's progress, and the current build.
func TestStatusShowsADefinitionChangeAndARebuildInProgress(t *testing.T) {
	ctx := context.Background()
	ep := rigs.Endpoints(t)
	_, ep.Postgres = testenv.PostgresSchema(t, "defs")
	catalog := func(version int) *eventpipe.Catalog {
		cat := eventpipe.NewCatalog()
		if err := cat.AddDomain(todo.Domain()); err != nil {
			t.Fatal(err)
		}
		if err := cat.AddReadModel(todoTitles{version: version}); err != nil {
			t.Fatal(err)
		}
		return cat
	}
	v1, v2 := catalog(1), catalog(2)
	if _, err := eventpipe.Migrate(ctx, eventpipe.MigrateConfig{Process: eventpipe.Process{Catalog: v2, Endpoints: ep}}); err != nil {
		t.Fatal(err)
	}
	db, err := eventpipe.OpenPostgres(ctx, ep)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store, err := eventpipe.OpenStore(ctx, ep, v1, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		req, err := eventstore.Prepare(eventstore.Ref{Type: todo.AggregateType, ID: fmt.Sprintf("t-%02d", i)}, 0,
			eventstore.Change{Events: []eventstore.NewEvent{eventstore.Event(todo.TodoCreated, todo.TodoData{Title: fmt.Sprint("todo ", i)})}}, eventstore.Schema{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Append(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	name := todoTitles{}.Name()
	// run runs the catalogue's todoTitles until it is built at want.
	run := func(cat *eventpipe.Catalog, want int) {
		t.Helper()
		runCtx, stop := context.WithCancel(ctx)
		cons, err := eventpipe.NewConsumers(runCtx, eventpipe.ConsumersConfig{Process: eventpipe.Process{Catalog: cat, Endpoints: ep}, Names: []string{name}, DB: db})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cons.Run(runCtx) }()
		integration.Await(t, fmt.Sprintf("%s built at version %d", name, want), func() error {
			st, err := projections.ReadModelState(ctx, db, name)
			if err != nil {
				return err
			}
			if st.Built.Done.IsZero() || st.Built.ModelVersion() != want {
				return fmt.Errorf("model state %+v", st)
			}
			return nil
		})
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		_ = cons.Close()
	}
	status := func(cat *eventpipe.Catalog) operator.GroupStatus {
		t.Helper()
		r := operator.Status(ctx, operator.StatusConfig{Process: eventpipe.Process{Catalog: cat, Endpoints: ep}, DB: db})
		for _, g := range r.Groups {
			if g.Consumer == name {
				if g.Model == nil {
					t.Fatalf("no model state for %s (errors %v)", name, r.Errors)
				}
				return g
			}
		}
		t.Fatalf("no group of %s in %+v", name, r.Groups)
		return operator.GroupStatus{}
	}
	expect := func(label string, g operator.GroupStatus, build string, changes ...string) {
		t.Helper()
		t.Logf("%s: build %q, definition changes %q", label, g.BuildState(), g.DefinitionChanges())
		if !strings.HasPrefix(g.BuildState(), build) {
			t.Errorf("%s: build state %q, want it to begin %q", label, g.BuildState(), build)
		}
		got := strings.Join(g.DefinitionChanges(), " | ")
		for _, c := range changes {
			if !strings.Contains(got, c) {
				t.Errorf("%s: definition changes %q lack %q", label, got, c)
			}
		}
		if len(changes) == 0 && got != "" {
			t.Errorf("%s: definition changes %q, want none", label, got)
		}
	}

	run(v1, 1)
	expect("version 1 running", status(v1), "current")
	expect("version 2 declared, not deployed", status(v2), "built by version 1, declared 2",
		"not deployed yet", "event types added: TodoDeleted", "version 1 → 2")

	// Version 2's first start is recorded; its rebuild is interrupted
	// after its first batch, its shadow kept.
	topics := bus.Topics{Prefix: ep.TopicPrefix}
	if err := eventpipe.RecordDefinitions(ctx, db, v2, topics, []string{name}, nil); err != nil {
		t.Fatal(err)
	}
	rebuildCtx, interrupt := context.WithCancel(ctx)
	_, err = projections.Replay(rebuildCtx, projections.ReplayConfig{DB: db, Store: store, History: eventpipe.StoreHistory(store), Projection: todoTitles{version: 2}, Resume: true,
		CreateTables: func(ctx context.Context, schema string) error {
			_, _, err := eventpipe.MigratePostgres(ctx, db.Config().ConnConfig, schema, nil, todoTitles{version: 2})
			return err
		},
		Progress: func(p projections.ReplayProgress) {
			if p.Done > 0 {
				interrupt()
			}
		}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("the interrupted rebuild returned %v, want context.Canceled", err)
	}
	expect("version 2 rebuilding", status(v2), "rebuilding at version 2: 30 events",
		"changed at its start", "event types added: TodoDeleted", "version 1 → 2")

	run(v2, 2)
	expect("version 2 swapped in", status(v2), "current", "changed at its start", "version 1 → 2")
	var builtBy2 int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM todo_titles WHERE built_by = 2`).Scan(&builtBy2); err != nil {
		t.Fatal(err)
	}
	if builtBy2 != 30 {
		t.Errorf("%d rows built by version 2 after the swap, want 30", builtBy2)
	}
}
