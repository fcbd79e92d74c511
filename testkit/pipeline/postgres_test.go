package pipeline_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/domains/transfer"
	"github.com/eventpipe/eventpipe/eventstore"
	pgmigrate "github.com/eventpipe/eventpipe/migrations/postgres"
	"github.com/eventpipe/eventpipe/testkit/integration"
	"github.com/eventpipe/eventpipe/testkit/pipeline"
)

// migratedPool returns a pool on a fresh, migrated Postgres schema of t.
func migratedPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	schema, url := testenv.PostgresSchema(t, "pipeline")
	if _, err := pgmigrate.Migrate(context.Background(), pgmigrate.Config{URL: url, Schema: schema, Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestCommandsReachThePostgresReadModelsAndTheSaga runs the in-process
// pipeline with the todos and accounts read models and the transfer
// saga on a real Postgres: commands sent on the pipeline's bus end up in the
// read models, and a transfer requested there is carried out by the saga
// through the same pipeline.
func TestCommandsReachThePostgresReadModelsAndTheSaga(t *testing.T) {
	testenv.Integration(t)
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	db := migratedPool(t)
	p, err := pipeline.Start(ctx, pipeline.Config{DB: db, Consumers: []string{"todos", "accounts", eventpipe.SagaConsumer("transfer")}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	send := func(c commands.Command, want commands.Status) {
		t.Helper()
		res, err := p.Sender.SendAndWait(ctx, c)
		if err != nil || res.Status != want {
			t.Fatalf("%s on %s: %+v, %v; want %s", c.Type, c.AggregateID, res, err, want)
		}
	}
	v := func(n int64) *int64 { return &n }
	create := command(t, todo.CreateTodo, todo.AggregateType, "t1", todo.TodoData{Title: "in one process"})
	create.ExpectedVersion = v(0)
	send(create, commands.StatusAccepted)
	update := command(t, todo.UpdateTodo, todo.AggregateType, "t1", todo.TodoData{Title: "in one process, with SQL", Completed: true})
	update.ExpectedVersion = v(1)
	send(update, commands.StatusAccepted)
	stale := command(t, todo.UpdateTodo, todo.AggregateType, "t1", todo.TodoData{Title: "stale"})
	stale.ExpectedVersion = v(1)
	send(stale, commands.StatusConflict)

	for _, acc := range []string{"a", "b"} {
		send(command(t, bankaccount.OpenAccount, bankaccount.AggregateType, acc, struct{}{}), commands.StatusAccepted)
	}
	send(command(t, bankaccount.RecordTransaction, bankaccount.AggregateType, "a", bankaccount.TransactionAcceptedData{Desc: "salary", Amount: 500}), commands.StatusAccepted)
	send(command(t, transfer.RequestTransfer, transfer.AggregateType, "tr1", transfer.RequestedData{From: "a", To: "b", Amount: 200}), commands.StatusAccepted)

	// The read models and the saga caught up, and so did the commands
	// the saga sent and their events.
	if err := p.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	var title string
	var completed bool
	var version int64
	err = db.QueryRow(ctx, `SELECT title, completed, version FROM todos WHERE todo_id = 't1'`).Scan(&title, &completed, &version)
	if err != nil || version != 2 || title != "in one process, with SQL" || !completed {
		t.Fatalf("todo row %q completed=%v at version %d, %v; want the update at version 2", title, completed, version, err)
	}
	st, err := p.Store.State(ctx, eventstore.Ref{Type: transfer.AggregateType, ID: "tr1"})
	if err != nil {
		t.Fatal(err)
	}
	var tr transfer.Transfer
	if err := json.Unmarshal(st.Data, &tr); err != nil {
		t.Fatal(err)
	}
	if tr.Status != transfer.StatusCompleted {
		t.Fatalf("transfer tr1 %q, want completed", tr.Status)
	}
	balances := map[string]int64{}
	for _, acc := range []string{"a", "b"} {
		var b int64
		if err := db.QueryRow(ctx, `SELECT balance FROM accounts WHERE account_id = $1`, acc).Scan(&b); err != nil {
			t.Fatalf("account %s in the accounts read model: %v", acc, err)
		}
		balances[acc] = b
	}
	if balances["a"] != 300 || balances["b"] != 200 {
		t.Fatalf("balances %v after the transfer, want a 300 and b 200", balances)
	}
	if err := p.Err(); err != nil {
		t.Fatalf("the pipeline stopped: %v", err)
	}
}
