package integration_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestAReadModelOnAnIsolatedPipeline is a user's read-model test against
// the local stack, in one process: its own tables, topics and Postgres
// schema (Isolate), migrated, the command handlers, the relay and the
// todos read model running, a command sent through Kafka, and the row it
// leads to read back. When the test ends its tables and schema are gone.
func TestAReadModelOnAnIsolatedPipeline(t *testing.T) {
	integration.Mark(t)
	var ep eventpipe.Endpoints
	t.Run("pipeline", func(t *testing.T) {
		ep = integration.Isolate(t)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		catalog := eventpipe.Builtin()
		if _, err := eventpipe.Migrate(ctx, eventpipe.MigrateConfig{Process: eventpipe.Process{Catalog: catalog, Endpoints: ep}}); err != nil {
			t.Fatal(err)
		}
		ws, err := eventpipe.NewWriteSide(ctx, eventpipe.WriteSideConfig{Process: eventpipe.Process{Endpoints: ep}, ConsumerGroup: integration.UniqueName(t, "cmds")})
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		relay, err := eventpipe.NewRelay(ctx, eventpipe.RelayConfig{Process: eventpipe.Process{Endpoints: ep}})
		if err != nil {
			t.Fatal(err)
		}
		defer relay.Close()
		consumers, err := eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{Process: eventpipe.Process{Catalog: catalog, Endpoints: ep}, Names: []string{"todos"}})
		if err != nil {
			t.Fatal(err)
		}
		defer consumers.Close()
		done := make(chan error, 3)
		go func() { done <- ws.RunCommandHandlers(ctx) }()
		go func() { done <- relay.Run(ctx) }()
		go func() { done <- consumers.Run(ctx) }()
		defer func() { cancel(); <-done; <-done; <-done }()

		sender, err := eventpipe.NewSender(eventpipe.SenderConfig{Process: eventpipe.Process{Endpoints: ep}})
		if err != nil {
			t.Fatal(err)
		}
		defer sender.Close()
		cmd, err := catalog.NewCommand(todo.CreateTodo, "t1", json.RawMessage(`{"title":"buy milk"}`))
		if err != nil {
			t.Fatal(err)
		}
		res, err := sender.SendAndWait(ctx, cmd)
		if err != nil || res.Status != commands.StatusAccepted {
			t.Fatalf("CreateTodo: %+v, %v", res, err)
		}

		db, err := eventpipe.OpenPostgres(ctx, ep) // the test's schema
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var title string
		integration.Await(t, "the todos read model's row of t1", func() error {
			return db.QueryRow(ctx, `SELECT title FROM todos WHERE todo_id = 't1'`).Scan(&title)
		})
		if title != "buy milk" {
			t.Fatalf("the todos read model holds %q for t1, want \"buy milk\"", title)
		}
	})
	if t.Failed() {
		return
	}
	// The subtest's tables and schema are gone.
	db := integration.DynamoDB(t)
	for _, table := range []string{ep.EventsTable, ep.LeasesTable, ep.AnalyticsTable} {
		_, err := db.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: &table})
		var missing *ddbtypes.ResourceNotFoundException
		if !errors.As(err, &missing) {
			t.Errorf("table %s after the test: %v, want it deleted", table, err)
		}
	}
	schema, err := eventpipe.PostgresSchema(ep)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := integration.Postgres(t).QueryRow(context.Background(), `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&n); err != nil || n != 0 {
		t.Errorf("schema %s after the test: %d, %v; want it dropped", schema, n, err)
	}
}
