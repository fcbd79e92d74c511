package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/migrations/postgres"
)

// schemaConn returns a connection to the stack's Postgres and a fresh
// schema, dropped when t ends.
func schemaConn(t *testing.T) (*pgx.Conn, string) {
	t.Helper()
	pool := testenv.Postgres(t)
	ctx := context.Background()
	schema := "m_" + testenv.UniqueName(t, "s")[len("s-"):]
	schema = pgx.Identifier{schema}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	cfg, err := pgx.ParseConfig(testenv.Endpoints().Postgres)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = schema
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn, schema[1 : len(schema)-1]
}

// TestMigrateCreatesTheReadModelsOnceAndRefusesANewerSchema applies the
// migrations twice (the second run changes nothing and keeps data),
// checks the tables exist in the target schema only, and refuses a
// database migrated past what this binary knows.
func TestMigrateCreatesTheReadModelsOnceAndRefusesANewerSchema(t *testing.T) {
	ctx := context.Background()
	conn, schema := schemaConn(t)
	v, err := postgres.Migrate(ctx, postgres.Config{URL: testenv.Endpoints().Postgres, Schema: schema})
	if err != nil || v < 2 {
		t.Fatalf("Migrate = %d, %v", v, err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO projection_positions (projection, aggregate_type, aggregate_id, seq) VALUES ('p', 't', 'a', 3)`); err != nil {
		t.Fatal(err)
	}
	if v2, err := postgres.Migrate(ctx, postgres.Config{URL: testenv.Endpoints().Postgres, Schema: schema}); err != nil || v2 != v {
		t.Fatalf("second Migrate = %d, %v; want %d, nil", v2, err, v)
	}
	var seq int64
	if err := conn.QueryRow(ctx, `SELECT seq FROM projection_positions WHERE projection = 'p'`).Scan(&seq); err != nil || seq != 3 {
		t.Fatalf("position after re-migrating: %d, %v", seq, err)
	}
	var tables []string
	rows, _ := conn.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`, schema)
	tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"account_transactions", "accounts", "consumer_definitions", postgres.VersionTable, "operator_actions", "orders", "parked_events", "poison_redrives", "projection_catchup", "projection_positions",
		"saga_commands", "saga_inputs", "saga_instances", "saga_outbox", "saga_timeouts", "skipped_events", "todos"}
	if len(tables) != len(want) {
		t.Fatalf("tables in %s: %v, want %v", schema, tables, want)
	}
	for i := range want {
		if tables[i] != want[i] {
			t.Fatalf("tables in %s: %v, want %v", schema, tables, want)
		}
	}
	if _, err := conn.Exec(ctx, "UPDATE "+postgres.VersionTable+" SET version = 99"); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.Migrate(ctx, postgres.Config{URL: testenv.Endpoints().Postgres, Schema: schema}); !errors.Is(err, postgres.ErrNewerSchema) {
		t.Fatalf("Migrate on a newer schema = %v, want ErrNewerSchema", err)
	}
}

func TestMigrateIntoAMissingSchemaFails(t *testing.T) {
	testenv.Postgres(t)
	if _, err := postgres.Migrate(context.Background(), postgres.Config{URL: testenv.Endpoints().Postgres, Schema: "no_such_schema_here"}); err == nil {
		t.Fatal("Migrate into a missing schema succeeded")
	}
}

// TestReadModelVersionTablesOfLongNamesSharingAPrefixStayApart migrates
// two read models whose names share their first 60 bytes into one
// schema, each with its own migrations (two for the first, one for the
// second): cut at Postgres' 63 bytes, their version tables would be one,
// and the second set would find the first's version 2 and be refused as
// newer. Each keeps its own version table and version, a second run
// changes nothing, and a name that fits keeps today's table name.
func TestReadModelVersionTablesOfLongNamesSharingAPrefixStayApart(t *testing.T) {
	ctx := context.Background()
	conn, schema := schemaConn(t)
	prefix := strings.Repeat("orders_by_customer_and_region_", 2) // 60 bytes
	first, second := prefix+"_hourly", prefix+"_daily"
	if got := postgres.ReadModelVersionTable("todo_log"); got != "eventpipe_schema_version_todo_log" {
		t.Fatalf("ReadModelVersionTable(todo_log) = %q, want today's eventpipe_schema_version_todo_log", got)
	}
	tables := map[string]string{}
	for _, name := range []string{first, second} {
		vt := postgres.ReadModelVersionTable(name)
		if len(vt) > 63 || !strings.HasPrefix(vt, postgres.VersionTable+"_orders_by_customer") {
			t.Fatalf("ReadModelVersionTable(%s) = %q (%d bytes), want at most 63 bytes with a readable prefix", name, vt, len(vt))
		}
		tables[name] = vt
	}
	if tables[first] == tables[second] {
		t.Fatalf("both read models got the version table %s", tables[first])
	}
	sets := map[string]fstest.MapFS{
		first: {
			"001_hourly.sql": {Data: []byte("CREATE TABLE hourly (id int);\n")},
			"002_hourly.sql": {Data: []byte("ALTER TABLE hourly ADD COLUMN n int;\n")},
		},
		second: {"001_daily.sql": {Data: []byte("CREATE TABLE daily (id int);\n")}},
	}
	want := map[string]int32{first: 2, second: 1}
	for run := range 2 {
		for _, name := range []string{first, second} {
			v, err := postgres.Migrate(ctx, postgres.Config{URL: testenv.Endpoints().Postgres, Schema: schema, Migrations: sets[name],
				VersionTable: postgres.ReadModelVersionTable(name)})
			if err != nil || v != want[name] {
				t.Fatalf("run %d: Migrate of %s = %d, %v; want %d", run+1, name, v, err, want[name])
			}
		}
	}
	for name, vt := range tables {
		var v int32
		if err := conn.QueryRow(ctx, "SELECT version FROM "+pgx.Identifier{vt}.Sanitize()).Scan(&v); err != nil || v != want[name] {
			t.Errorf("%s records %d (%v), want %d for %s", vt, v, err, want[name], name)
		}
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name IN ('hourly', 'daily')`, schema).Scan(&n); err != nil || n != 2 {
		t.Fatalf("tables hourly and daily in %s: %d (%v), want both", schema, n, err)
	}
}

// TestMigrateRefusesAVersionTablePostgresWouldCut refuses, before
// connecting, a version table longer than 63 bytes.
func TestMigrateRefusesAVersionTablePostgresWouldCut(t *testing.T) {
	_, err := postgres.Migrate(context.Background(), postgres.Config{URL: testenv.Endpoints().Postgres,
		VersionTable: postgres.VersionTable + "_" + strings.Repeat("x", 40)})
	var ve *eventstore.ValidationError
	if !errors.As(err, &ve) || ve.Field != "VersionTable" {
		t.Fatalf("Migrate with a 66-byte version table = %v, want a *eventstore.ValidationError on VersionTable", err)
	}
}
