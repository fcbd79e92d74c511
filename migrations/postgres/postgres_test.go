package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe/internal/testenv"
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
	want := []string{"account_transactions", "accounts", postgres.VersionTable, "orders", "parked_events", "projection_positions",
		"saga_inputs", "saga_instances", "saga_outbox", "saga_timeouts", "todos"}
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
