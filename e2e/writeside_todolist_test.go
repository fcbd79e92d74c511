package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/todo/todoapi"
	"github.com/eventpipe/eventpipe/endpoints"
	pgmigrate "github.com/eventpipe/eventpipe/migrations/postgres"
)

// readModelSchema creates a fresh Postgres schema, dropped when t ends,
// applies the read-model migrations to it when migrated is set, and
// returns ep with its Postgres URL pointing there (search_path).
func readModelSchema(t *testing.T, ep endpoints.Endpoints, migrated bool) endpoints.Endpoints {
	t.Helper()
	schema, url := testenv.PostgresSchema(t, "api")
	if migrated {
		if _, err := pgmigrate.Migrate(context.Background(), pgmigrate.Config{URL: ep.Postgres, Schema: schema}); err != nil {
			t.Fatal(err)
		}
	}
	ep.Postgres = url
	return ep
}

// listServer serves the HTTP API with its read models in a fresh Postgres
// schema, migrated or not.
func listServer(t *testing.T, migrated bool) (base string, db *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	ep := readModelSchema(t, rigs.Endpoints(t), migrated)
	ep.HTTPAddr = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	conn, err := pgx.Connect(ctx, ep.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	svc := rigs.NewService(t, ep, testenv.UniqueName(t, "g"))
	srv, err := svc.NewHTTP()
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- srv.Run(runCtx, ready) }()
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + <-ready, conn
}

func getPage(t *testing.T, url string) (int, todoapi.Page) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var page todoapi.Page
	if res.StatusCode == http.StatusOK {
		if err := json.NewDecoder(res.Body).Decode(&page); err != nil {
			t.Fatal(err)
		}
	}
	return res.StatusCode, page
}

// TestTodoListReadsTheReadModelInPages lists live todos from the read
// model two at a time, skips deleted ones, rejects a bad limit with 400,
// and answers 503 when the read model's tables are missing.
func TestTodoListReadsTheReadModelInPages(t *testing.T) {
	base, db := listServer(t, true)
	if _, err := db.Exec(context.Background(), `INSERT INTO todos (todo_id, title, message, completed, deleted, version, created_at, updated_at) VALUES
		('a', 'one', '', false, false, 1, now(), now()), ('b', 'two', 'Make coffee', true, false, 2, now(), now()),
		('c', 'gone', '', false, true, 3, now(), now()), ('d', 'three', '', false, false, 1, now(), now())`); err != nil {
		t.Fatal(err)
	}
	status, first := getPage(t, base+"/todo?limit=2")
	if status != 200 || len(first.Items) != 2 || first.Items[0].ID != "a" || first.Items[1].ID != "b" || !first.Items[1].Completed || first.Items[1].Message != "Make coffee" || first.Next != "b" {
		t.Fatalf("first page: %d %+v", status, first)
	}
	status, second := getPage(t, base+"/todo?limit=2&after="+first.Next)
	if status != 200 || len(second.Items) != 1 || second.Items[0].ID != "d" || second.Next != "" {
		t.Fatalf("second page: %d %+v", status, second)
	}
	for _, bad := range []string{"0", "1001", "x"} {
		if status, _ := getPage(t, base+"/todo?limit="+bad); status != http.StatusBadRequest {
			t.Errorf("limit=%s: %d, want 400", bad, status)
		}
	}
	unmigrated, _ := listServer(t, false)
	if status, _ := getPage(t, unmigrated+"/todo"); status != http.StatusServiceUnavailable {
		t.Fatalf("without read-model tables: %d, want 503", status)
	}
}
