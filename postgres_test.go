package eventpipe_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/elastic/go-elasticsearch/v8/esapi"
	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	ddbstore "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	pgmigrate "github.com/eventpipe/eventpipe/migrations/postgres"
	"github.com/eventpipe/eventpipe/operator"
	"github.com/eventpipe/eventpipe/parking"
	"github.com/eventpipe/eventpipe/projections/elastic"
	"github.com/eventpipe/eventpipe/projections/readmodels"
	"github.com/eventpipe/eventpipe/projections/searchmodels"
)

// TestPostgresSchemaIsTheSearchPathOfTheURL reads the schema from the
// search_path parameter as Postgres reads it (an unquoted name folded to
// lower case, a quoted one kept), defaults it to public, and refuses,
// with a *eventstore.ValidationError, what would leave the schema to
// chance: several schemas, $user, a name Postgres would cut, a
// search_path hidden in options, a URL that does not parse.
func TestPostgresSchemaIsTheSearchPathOfTheURL(t *testing.T) {
	const base = "postgres://eventpipe@127.0.0.1:5433/eventpipe?sslmode=disable"
	for url, want := range map[string]string{
		base:                                    "public",
		base + "&search_path=tenant_a":          "tenant_a",
		base + "&search_path=Tenant_A":          "tenant_a",
		base + "&search_path=%22Tenant%20A%22":  "Tenant A",
		base + "&search_path=%20t1%20":          "t1",
		base + "&search_path=":                  "public",
		"host=127.0.0.1 user=x search_path=t_2": "t_2",
	} {
		got, err := eventpipe.PostgresSchema(eventpipe.Endpoints{Postgres: url})
		if err != nil || got != want {
			t.Errorf("PostgresSchema(%s) = %q, %v; want %q", url, got, err, want)
		}
	}
	for url, field := range map[string]string{
		base + "&search_path=tenant_a,public":            "search_path",
		base + "&search_path=$user":                      "search_path",
		base + "&search_path=a-b":                        "search_path",
		base + "&search_path=%22unterminated":            "search_path",
		base + "&search_path=" + strings.Repeat("s", 64): "search_path",
		base + "&options=-c%20search_path%3Dtenant_a":    "Endpoints.Postgres",
		"postgres://eventpipe@127.0.0.1:port/eventpipe":  "Endpoints.Postgres",
	} {
		_, err := eventpipe.PostgresSchema(eventpipe.Endpoints{Postgres: url})
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("PostgresSchema(%s) = %v, want a *eventstore.ValidationError on %s", url, err, field)
		}
		if _, err := eventpipe.OpenPostgres(context.Background(), eventpipe.Endpoints{Postgres: url}); !errors.As(err, &ve) {
			t.Errorf("OpenPostgres(%s) = %v, want the same *eventstore.ValidationError", url, err)
		}
	}
}

// TestThePostgresURLPicksTheSchemaOfMigrateConsumeParkedReapplyAndStatus
// runs, with nothing but a Postgres URL whose search_path names a schema
// of its own (no schema option anywhere, no pool given), Migrate, a todos
// read model through NewConsumers that applies one todo and parks
// another's refused update, ParkedList, Status, and Replay with the
// fixed read model: each works in that schema, and public holds none of
// the test's aggregates. Then Migrate and Replay given a pool, the store
// and an Elasticsearch client (and an Endpoints.Postgres and
// Elasticsearch that lead nowhere) use them, in the pool's schema, and
// leave the pool open.
func TestThePostgresURLPicksTheSchemaOfMigrateConsumeParkedReapplyAndStatus(t *testing.T) {
	p := rigs.NewParkingPipeline(t) // eventpipe.Migrate, given only the URL
	ctx := context.Background()
	if got, err := eventpipe.PostgresSchema(p.EP); err != nil || got != p.Schema {
		t.Fatalf("PostgresSchema = %q, %v; want %s", got, err, p.Schema)
	}
	admin := testenv.Postgres(t) // the URL without search_path
	var tables []string
	rows, _ := admin.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`, p.Schema)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"parked_events", "projection_positions", "todos", pgmigrate.VersionTable} {
		if !slices.Contains(tables, want) {
			t.Fatalf("Migrate left %s without %s: %v", p.Schema, want, tables)
		}
	}

	run := strings.ToLower(testenv.UniqueName(t, "id"))
	a, b := run+"-a", run+"-b"
	p.Todo(t, a, "a2", "poison")
	p.Todo(t, b, "b2")
	p.Consume(t, false) // NewConsumers without DB: OpenPostgres(Endpoints)
	rigs.WaitUntil(t, "b applied, a parked at its refused update", func() (bool, string) {
		evs, err := operator.ParkedList(ctx, operator.ParkedListConfig{Process: eventpipe.Process{Catalog: p.Catalog, Endpoints: p.EP}, Projection: "todos"})
		if err != nil {
			t.Fatal(err)
		}
		rows := p.Rows(t)
		return rows[b] == "b2@2" && rows[a] == "a2@2" && len(evs) == 1 && evs[0].Envelope.AggregateID == a && evs[0].Envelope.Sequence == 3,
			fmt.Sprintf("rows %v, parked %d", rows, len(evs))
	})
	g, r := p.TodosGroup(t)
	if want := (parking.Counts{Events: 1, Aggregates: 1}); g.Parked != want || r.ParkedErr != nil || len(r.Errors) != 0 {
		t.Fatalf("Status: todos group %+v (parked error %v, errors %v), want %+v parked", g, r.ParkedErr, r.Errors, want)
	}

	// The fix: the plain todos read model, rebuilt from the store.
	fixed := eventpipe.NewCatalog()
	if err := fixed.AddDomain(todo.Domain()); err != nil {
		t.Fatal(err)
	}
	if err := fixed.AddReadModel(readmodels.Todos{}); err != nil {
		t.Fatal(err)
	}
	res, err := operator.Replay(ctx, operator.ReplayConfig{Process: eventpipe.Process{Catalog: fixed, Endpoints: p.EP}, ReadModel: "todos"})
	if err != nil {
		t.Fatal(err)
	}
	if rows := p.Rows(t); rows[a] != "poison@3" || rows[b] != "b2@2" || res.Events != 5 {
		t.Fatalf("after Replay (%d events): rows %v, want %s at poison@3 and %s at b2@2", res.Events, rows, a, b)
	}

	// public holds none of it.
	for table, column := range map[string]string{"todos": "todo_id", "projection_positions": "aggregate_id", "parked_events": "aggregate_id"} {
		var n int
		err := admin.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM public.%s WHERE %s = ANY($1)`, table, column), []string{a, b}).Scan(&n)
		if err != nil && !strings.Contains(err.Error(), "does not exist") {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("public.%s holds %d rows of the test's todos", table, n)
		}
	}

	// Given clients are used, and not closed.
	elsewhere := p.EP
	elsewhere.Postgres = "postgres://nobody@127.0.0.1:1/nowhere?search_path=elsewhere"
	elsewhere.Elasticsearch = "http://127.0.0.1:1"
	withSearch := eventpipe.NewCatalog()
	if err := withSearch.AddDomain(todo.Domain()); err != nil {
		t.Fatal(err)
	}
	if err := withSearch.AddReadModel(readmodels.Todos{}); err != nil {
		t.Fatal(err)
	}
	if err := withSearch.AddSearchModel(searchmodels.TodoSearch{}); err != nil {
		t.Fatal(err)
	}
	es := testenv.Elasticsearch(t)
	alias := elastic.Alias(p.EP.TopicPrefix, searchmodels.TodoSearch{}.Name())
	t.Cleanup(func() {
		if index, err := elastic.AliasTarget(context.Background(), es, alias); err == nil && index != "" {
			_, _ = esapi.IndicesDeleteRequest{Index: []string{index}}.Do(context.Background(), es)
		}
	})
	m, err := eventpipe.Migrate(ctx, eventpipe.MigrateConfig{Process: eventpipe.Process{Catalog: withSearch, Endpoints: elsewhere}, DB: p.DB, Search: es})
	if err != nil || m.PostgresSchema != p.Schema || len(m.SearchIndices) != 1 {
		t.Fatalf("Migrate with a pool and a search client = %+v, %v; want schema %s and one search index", m, err, p.Schema)
	}
	store := p.Store.(*ddbstore.Store)
	if _, err := p.DB.Exec(ctx, `UPDATE todos SET title = 'tampered' WHERE todo_id = $1`, b); err != nil {
		t.Fatal(err)
	}
	if _, err := operator.Replay(ctx, operator.ReplayConfig{Process: eventpipe.Process{Catalog: withSearch, Endpoints: elsewhere}, ReadModel: "todos", DB: p.DB, Store: store}); err != nil {
		t.Fatalf("Replay with a pool and a store: %v", err)
	}
	if _, err := operator.Replay(ctx, operator.ReplayConfig{Process: eventpipe.Process{Catalog: withSearch, Endpoints: elsewhere}, ReadModel: searchmodels.TodoSearch{}.Name(), Search: es, Store: store}); err != nil {
		t.Fatalf("Replay of a search model with a search client and a store: %v", err)
	}
	if rows := p.Rows(t); rows[b] != "b2@2" { // p.rows queries p.db: still open
		t.Fatalf("after Replay with the pool: rows %v, want %s back at b2@2", rows, b)
	}
}
