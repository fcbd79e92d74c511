package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/eventstore"
	migrate "github.com/eventpipe/eventpipe/migrations/dynamodb"
	pgmigrate "github.com/eventpipe/eventpipe/migrations/postgres"
	"github.com/eventpipe/eventpipe/operator"
	"github.com/eventpipe/eventpipe/sagas"
	"github.com/eventpipe/eventpipe/sagas/transfersaga"
)

// TestSagasCLIListShowRetryAndAbortAStuckTransfer seeds the saga tables
// with a transfer whose credit was sent a minute ago and never answered,
// and a completed one, then runs `eventpipe sagas`: list shows the first
// stuck at its credit and the second completed (and --state selects);
// show prints its state, inputs, commands with the event store's answers
// and its timeout; retry re-sends the credit under its own id; abort
// cancels the credit (a refusal recorded in the event store) and leaves
// the instance compensating; a second retry re-publishes the recorded
// answer, a second abort is refused; each action is in operator_actions.
func TestSagasCLIListShowRetryAndAbortAStuckTransfer(t *testing.T) {
	ctx := context.Background()
	schema, url := testenv.PostgresSchema(t, "sagascli")
	if _, err := pgmigrate.Migrate(ctx, pgmigrate.Config{URL: testenv.Endpoints().Postgres, Schema: schema}); err != nil {
		t.Fatal(err)
	}
	table := testenv.UniqueName(t, "events")
	client := testenv.DynamoDB(t)
	if err := migrate.CreateEventsTable(ctx, client, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, client, table) })
	t.Setenv(endpoints.EnvTopicPrefix, testenv.UniqueName(t, "ns")+".")
	t.Setenv(endpoints.EnvPostgres, url)
	t.Setenv(endpoints.EnvEventsTable, table)
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	debit := sagas.CommandID(transfersaga.Name, "tr-cli", transfersaga.StepDebit)
	credit := sagas.CommandID(transfersaga.Name, "tr-cli", transfersaga.StepCredit)
	body := func(id, account string, amount int64) []byte {
		cmd, err := commands.NewJSON(bankaccount.RecordTransaction, bankaccount.AggregateType, account, bankaccount.TransactionAcceptedData{Desc: "cli", Amount: amount})
		if err != nil {
			t.Fatal(err)
		}
		cmd.ID = id
		b, err := json.Marshal(cmd)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO saga_instances (saga, instance, state, version, created_at, updated_at) VALUES
			('transfer', 'tr-cli', '{"from":"a","to":"b","amount":50,"step":"credit"}', 2, now() - interval '2 minutes', now() - interval '1 minute'),
			('transfer', 'tr-done', '{"from":"a","to":"b","amount":5,"step":"complete"}', 3, now() - interval '3 minutes', now() - interval '3 minutes')`, nil},
		{`UPDATE saga_instances SET outcome = 'completed' WHERE instance = 'tr-done'`, nil},
		{`INSERT INTO saga_commands (saga, command_id, instance, aggregate_type, aggregate_id, body, created_at) VALUES
			('transfer', $1, 'tr-cli', 'bankaccount', 'a', $3, now() - interval '2 minutes'),
			('transfer', $2, 'tr-cli', 'bankaccount', 'b', $4, now() - interval '1 minute')`,
			[]any{debit, credit, body(debit, "a", -50), body(credit, "b", 50)}},
		{`INSERT INTO saga_inputs (saga, input_id, instance, handled_at) VALUES
			('transfer', 'event:e-cli', 'tr-cli', now() - interval '2 minutes'), ('transfer', 'result:' || $1, 'tr-cli', now() - interval '1 minute')`, []any{debit}},
		{`INSERT INTO saga_timeouts (saga, instance, name, due_at) VALUES ('transfer', 'tr-cli', 'deadline', now() + interval '10 minutes')`, nil},
	} {
		if _, err := db.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}

	run := func(args ...string) (string, error) {
		t.Helper()
		var out bytes.Buffer
		cmd := sagasCommand()
		cmd.SetArgs(args)
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		err := cmd.ExecuteContext(ctx)
		return out.String(), err
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("sagas %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	wantLines := func(what, out string, res ...string) {
		t.Helper()
		for _, re := range res {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("%s: no line matching %s in:\n%s", what, re, out)
			}
		}
	}

	out := must("list")
	t.Logf("sagas list:\n%s", out)
	wantLines("list", out, `(?m)^SAGA\s+INSTANCE\s+STATUS\s+AGE\s+UPDATED\s+PENDING\s+NEXT TIMEOUT$`,
		`(?m)^transfer\s+tr-done\s+completed\s+3m\d+s\s+3m\d+s ago\s+-\s+-$`,
		`(?m)^transfer\s+tr-cli\s+stuck\s+2m\d+s\s+1m\d+s ago\s+credit \(sent 1m\d+s ago, stuck\)\s+deadline in 9m\d+s$`)
	out = must("list", "transfer", "--state", "completed")
	if strings.Contains(out, "tr-cli") || !strings.Contains(out, "tr-done") {
		t.Errorf("list --state completed:\n%s", out)
	}
	if out, err := run("list", "nosuch"); err == nil {
		t.Errorf("list of an unknown saga: %s", out)
	}

	out = must("show", "transfer", "tr-cli")
	wantLines("show", out, `(?m)^status:\s+stuck$`, `"step": "credit"`, `(?m)^\s+\S+\s+event:e-cli$`, `(?m)^\s+\S+\s+result:transfer\.tr-cli\.debit$`,
		`(?m)^\s+debit\s+transfer\.tr-cli\.debit\s+RecordTransaction\s+bankaccount/a\s+2m\d+s ago\s+yes\s+none$`,
		`(?m)^\s+credit\s+transfer\.tr-cli\.credit\s+RecordTransaction\s+bankaccount/b\s+1m\d+s ago\s+no \(stuck\)\s+none$`,
		`(?m)^\s+deadline due \S+ \(in 9m\d+s\)$`)
	if _, err := run("show", "transfer", "tr-nosuch"); !errors.Is(err, sagas.ErrNoInstance) {
		t.Errorf("show of no instance: %v", err)
	}

	out = must("retry", "transfer", "tr-cli", "--actor", "cli-test")
	wantLines("retry", out, `(?m)^transfer tr-cli: command re-sent transfer\.tr-cli\.credit \(command → bankaccount/b\)$`)
	out = must("retry", "transfer", "tr-done", "--actor", "cli-test")
	wantLines("retry of a finished instance", out, `(?m)^transfer tr-done: nothing stuck$`)

	if out, err := run("abort", "transfer", "tr-cli"); err == nil {
		t.Errorf("abort without --reason: %s", out)
	}
	out = must("abort", "transfer", "tr-cli", "--reason", "customer asked", "--actor", "cli-test")
	wantLines("abort", out, `(?m)^transfer tr-cli: queued cancel transfer\.tr-cli\.credit → bankaccount/b$`, `(?m)^transfer tr-cli: aborting;`)
	out = must("show", "transfer", "tr-cli")
	t.Logf("sagas show after the abort:\n%s", out)
	wantLines("show after the abort", out, `(?m)^aborted:\s+\S+ by cli-test: customer asked$`, `"aborted": "customer asked"`,
		`(?m)^\s+credit\s+transfer\.tr-cli\.credit\s+.*rejected: transfer aborted: customer asked \(version 0\)$`)
	out = must("retry", "transfer", "tr-cli", "--actor", "cli-test")
	wantLines("retry after the abort", out, `(?m)^transfer tr-cli: answer re-published transfer\.tr-cli\.credit`)
	if _, err := run("abort", "transfer", "tr-cli", "--reason", "again"); !errors.Is(err, sagas.ErrFinished) {
		t.Errorf("second abort: %v", err)
	}

	acts, err := operator.OperatorActions(ctx, operator.OperatorActionsConfig{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range acts {
		got = append([]string{a.Action + " " + a.Target}, got...)
	}
	want := []string{"saga retry transfer tr-cli", "saga retry transfer tr-done", "saga abort transfer tr-cli", "saga retry transfer tr-cli", "saga abort transfer tr-cli"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("operator actions %q, want %q", got, want)
	}
	var refused *eventstore.RefusedCommandError
	st, err := eventpipe.OpenStore(ctx, eventpipe.EndpointsFromEnv(), catalog, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CommandResult(ctx, eventstore.Ref{Type: bankaccount.AggregateType, ID: "b"}, credit); !errors.As(err, &refused) {
		t.Errorf("the cancelled credit's record: %v", err)
	}
}
