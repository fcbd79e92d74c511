package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestTodoLogRunsAsALibraryUsersReadModel builds this example as its own
// program and runs it as a user would, against the real stack, with
// nothing but the public test kit (testkit/integration): `migrate`
// creates eventpipe's tables and the example's own; `send` publishes todo
// commands through the bus (the test runs the command handlers and the
// relay in-process); `consume` first catches up on the history written
// before it started, then follows the live events while it is killed with
// SIGKILL mid-stream and restarted; in the end todo_log holds every event
// exactly once, and `replay` rebuilds the same table from the store.
func TestTodoLogRunsAsALibraryUsersReadModel(t *testing.T) {
	// The test's own tables, topics and Postgres schema on the local
	// stack (it fails when a service is down, skips under -short).
	ep := integration.Isolate(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bin := filepath.Join(t.TempDir(), "todolog")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as the eventpipe binary is built: one build cache
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	env := integration.Environ(ep) // the program reads the same endpoints
	program := func(args ...string) *exec.Cmd {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		return cmd
	}
	runProgram := func(args ...string) {
		t.Helper()
		if out, err := program(args...).CombinedOutput(); err != nil {
			t.Fatalf("todolog %v: %v\n%s", args, err, out)
		}
	}

	runProgram("migrate")
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
	done := make(chan error, 2)
	go func() { done <- ws.RunCommandHandlers(ctx) }()
	go func() { done <- relay.Run(ctx) }()
	defer func() { cancel(); <-done; <-done }()

	db, err := pgx.Connect(ctx, ep.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	rows := func() int64 {
		var n int64
		if err := db.QueryRow(ctx, `SELECT count(*) FROM todo_log`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitRows := func(want int64) {
		t.Helper()
		integration.AwaitProgress(t, "rows of todo_log", rows, want)
		if got := rows(); got != want {
			t.Fatalf("todo_log has %d rows, want %d", got, want)
		}
	}
	metricsAddr := "127.0.0.1:" + fmt.Sprint(integration.FreePort(t))
	metricsURL := "http://" + metricsAddr + "/metrics"
	// History first: ten todos exist before the read model ever ran.
	runProgram("send", "-n", "10", "-id", "hist")
	// The consumer is a child process, ready once its /metrics answers;
	// it is killed with SIGKILL and restarted below, and killed when the
	// test ends.
	consumer := integration.StartChild(t, integration.ChildConfig{
		Program: bin, Args: []string{"consume", "-metrics-addr", metricsAddr}, Env: env,
		Ready: func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
			if err != nil {
				return err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			return resp.Body.Close()
		},
	})
	waitRows(10)

	// Live: batches of commands flow, one after another, until the
	// consumer was killed mid-stream three times.
	const history, perBatch, updates = 10, 5, 4
	stopSending, sendDone := make(chan struct{}), make(chan error, 1)
	batches := 0
	go func() {
		for b := 0; ; b++ {
			select {
			case <-stopSending:
				batches = b
				sendDone <- nil
				return
			default:
			}
			out, err := program("send", "-n", fmt.Sprint(perBatch), "-id", fmt.Sprintf("live%d", b), "-updates", fmt.Sprint(updates)).CombinedOutput()
			if err != nil {
				batches = b
				sendDone <- fmt.Errorf("%w\n%s", err, out)
				return
			}
		}
	}()
	var atKill []int64
	for k := 0; k < 3; k++ {
		before := rows()
		integration.Await(t, fmt.Sprintf("kill %d: rows applied by the consumer", k+1), func() error {
			if n := rows(); n == before {
				return fmt.Errorf("still %d rows", n)
			}
			return nil
		})
		time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
		consumer.Kill()
		atKill = append(atKill, rows())
		consumer.Start()
	}
	close(stopSending)
	if err := <-sendDone; err != nil {
		t.Fatalf("send: %v", err)
	}
	total := int64(history + batches*perBatch*(updates+1))
	waitRows(total)
	t.Logf("rows at each kill: %v; %d in the end", atKill, total)
	for k, n := range atKill {
		if n >= total {
			t.Errorf("kill %d landed after every event was applied (%d rows)", k+1, n)
		}
	}

	// Its metrics are served like the built-in read models'.
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `eventpipe_projection_last_event_age_seconds{projection="todo_log"}`) {
		t.Errorf("the consumer's /metrics lacks the todo_log projection's metrics:\n%.2000s", body)
	}

	// Exactly once: every stored event is one row, and nothing else is.
	store, err := eventpipe.OpenStore(ctx, ep, eventpipe.Builtin(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range todoIDs(history, batches, perBatch) {
		evs, err := store.Load(ctx, eventstore.Ref{Type: todo.AggregateType, ID: id}, 0)
		if err != nil {
			t.Fatal(err)
		}
		var n, maxSeq int64
		if err := db.QueryRow(ctx, `SELECT count(*), coalesce(max(seq), 0) FROM todo_log WHERE todo_id = $1`, id).Scan(&n, &maxSeq); err != nil {
			t.Fatal(err)
		}
		if n != int64(len(evs)) || maxSeq != int64(len(evs)) {
			t.Errorf("%s: %d rows up to seq %d, want %d", id, n, maxSeq, len(evs))
		}
	}

	// Replay rebuilds the same table from the store.
	consumer.Kill()
	digest := func() string {
		var d string
		if err := db.QueryRow(ctx, `SELECT md5(string_agg(todo_id || '/' || seq || '/' || event_type || '/' || title, ',' ORDER BY todo_id, seq)) FROM todo_log`).Scan(&d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	before := digest()
	if _, err := db.Exec(ctx, `UPDATE todo_log SET title = 'tampered' WHERE seq = 1`); err != nil {
		t.Fatal(err)
	}
	runProgram("replay")
	if after := digest(); after != before || rows() != total {
		t.Fatalf("after replay: %d rows, digest %s; want %d rows, digest %s", rows(), after, total, before)
	}
}

func todoIDs(history, batches, perBatch int) []string {
	var ids []string
	for i := range history {
		ids = append(ids, fmt.Sprintf("hist-%03d", i))
	}
	for b := range batches {
		for i := range perBatch {
			ids = append(ids, fmt.Sprintf("live%d-%03d", b, i))
		}
	}
	return ids
}
