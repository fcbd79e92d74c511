package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/domains/todo/todoapi"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/httpapi"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

const (
	// envHTTPChild makes the test binary serve the write side's HTTP API
	// (on endpoints.EnvHTTPAddr) instead of running tests.
	envHTTPChild = "EVENTPIPE_TEST_HTTP_CHILD"
	// envHTTPKillKey names an Idempotency-Key: the HTTP child kills
	// itself with SIGKILL when the handler of a request with that key
	// starts its success answer, after the command was appended and
	// before a byte of the answer is sent.
	envHTTPKillKey = "EVENTPIPE_TEST_HTTP_KILL_KEY"
)

// runHTTPChildIfRequested serves the write side's HTTP API in this
// process when a test started it as a child.
func runHTTPChildIfRequested() {
	if os.Getenv(envHTTPChild) == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := serveHTTPChild(ctx, os.Getenv(envHTTPKillKey))
	if err != nil {
		fmt.Fprintln(os.Stderr, "http child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func serveHTTPChild(ctx context.Context, killKey string) error {
	ep := endpoints.FromEnv()
	svc, err := eventpipe.NewWriteSide(ctx, eventpipe.WriteSideConfig{Process: eventpipe.Process{Endpoints: ep}, ConsumerGroup: os.Getenv(envHTTPChild), NoAuth: true})
	if err != nil {
		return err
	}
	defer svc.Close()
	srv, err := svc.NewHTTP()
	if err != nil {
		return err
	}
	h := srv.Handler()
	if killKey != "" {
		next := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(httpapi.IdempotencyKeyHeader) == killKey {
				w = killOnSuccess{w}
			}
			next.ServeHTTP(w, r)
		})
	}
	l, err := net.Listen("tcp", ep.HTTPAddr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); _ = hs.Close() }()
	if err := hs.Serve(l); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// killOnSuccess kills the process when a success status is written: the
// command was appended, the client gets no answer.
type killOnSuccess struct{ http.ResponseWriter }

func (k killOnSuccess) WriteHeader(status int) {
	if status < 300 {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	k.ResponseWriter.WriteHeader(status)
}

// startHTTPChild serves the HTTP API of ep's table in a child process
// (killing itself on killKey's answer when set), waits until /healthz
// answers, and returns the child (killed when t ends).
func startHTTPChild(t *testing.T, ep endpoints.Endpoints, addr, killKey string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHTTPChild+"="+testenv.UniqueName(t, "g"),
		endpoints.EnvEventsTable+"="+ep.EventsTable, endpoints.EnvKeysTable+"="+ep.KeysTable, endpoints.EnvTopicPrefix+"="+ep.TopicPrefix,
		endpoints.EnvHTTPAddr+"="+addr, envHTTPKillKey+"="+killKey, "EVENTPIPE_LOG_LEVEL=warn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	integration.Await(t, "the HTTP child on "+addr+" to be ready", func() error {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/healthz: %s", resp.Status)
		}
		return nil
	})
	return cmd
}

// answer is one HTTP answer as a client sees it.
type answer struct {
	status   int
	body     string
	etag     string
	location string
}

// send sends a request with an Idempotency-Key (when key is not empty)
// and If-Match (when ifMatch is not empty); err is the transport's.
func send(method, url, key, ifMatch, body string) (answer, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	if key != "" {
		req.Header.Set(httpapi.IdempotencyKeyHeader, key)
	}
	if ifMatch != "" {
		req.Header.Set("If-Match", ifMatch)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{status: resp.StatusCode, body: string(b), etag: resp.Header.Get("ETag"), location: resp.Header.Get("Location")}, nil
}

func mustSend(t *testing.T, method, url, key, ifMatch, body string) answer {
	t.Helper()
	a, err := send(method, url, key, ifMatch, body)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (a answer) code() string {
	var e httpapi.Error
	_ = json.Unmarshal([]byte(a.body), &e)
	return e.Code
}

func (a answer) todo(t *testing.T) todoapi.View {
	t.Helper()
	var v todoapi.View
	if err := json.Unmarshal([]byte(a.body), &v); err != nil {
		t.Fatalf("answer %d %q: %v", a.status, a.body, err)
	}
	return v
}

// tableItems returns the events table's items, read consistently.
func tableItems(t *testing.T, ep endpoints.Endpoints) []map[string]ddbtypes.AttributeValue {
	t.Helper()
	out, err := testenv.DynamoDB(t).Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(ep.EventsTable), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Items
}

func attrS(it map[string]ddbtypes.AttributeValue, name string) string {
	if s, ok := it[name].(*ddbtypes.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

// todoEvents counts the todo events in the table (EVENT# items of todo
// partitions), by partition.
func todoEvents(t *testing.T, ep endpoints.Endpoints) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, it := range tableItems(t, ep) {
		pk := attrS(it, "pk")
		if strings.HasPrefix(pk, "AGGREGATE#"+todo.AggregateType+"#") && strings.HasPrefix(attrS(it, "sk"), "EVENT#") {
			out[strings.TrimPrefix(pk, "AGGREGATE#"+todo.AggregateType+"#")]++
		}
	}
	return out
}

// TestTodoAPIIdempotencyKeyReplaysTheFirstAnswer sends each write twice
// with the same Idempotency-Key and body (the second time spaced and
// ordered differently): the retry gets the first answer byte for byte,
// with its ETag and Location, and writes nothing; a create without an id
// creates one todo, whose id the key derives. Updates and deletes replay
// too, instead of answering 409 for the If-Match they made stale.
func TestTodoAPIIdempotencyKeyReplaysTheFirstAnswer(t *testing.T) {
	base, ep := startHTTPOn(t)
	first := mustSend(t, "POST", base+"/todo", "create-1", "", `{"title":"buy milk","message":"oat"}`)
	if first.status != 201 || first.etag != `"1"` || first.location == "" {
		t.Fatalf("create: %+v", first)
	}
	items := len(tableItems(t, ep))
	again := mustSend(t, "POST", base+"/todo", `"create-1"`, "", "{ \"message\": \"oat\",\n  \"title\": \"buy milk\", \"completed\": false }")
	if again != first {
		t.Fatalf("retry answered %+v, first %+v", again, first)
	}
	if n := len(tableItems(t, ep)); n != items {
		t.Fatalf("the retry changed the table from %d to %d items", items, n)
	}
	id := first.todo(t).ID
	if evs := todoEvents(t, ep); len(evs) != 1 || evs[id] != 1 {
		t.Fatalf("todo events by todo: %v, want one event of %s", evs, id)
	}
	// Another key makes another todo; no key makes a fresh one each time.
	if other := mustSend(t, "POST", base+"/todo", "create-2", "", `{"title":"buy milk","message":"oat"}`); other.status != 201 || other.todo(t).ID == id {
		t.Fatalf("another key: %+v", other)
	}

	for _, step := range []struct {
		name, method, key, ifMatch, body string
		status                           int
		etag                             string
	}{
		{"update", "PUT", "update-1", `"1"`, `{"title":"buy oat milk"}`, 200, `"2"`},
		{"update by POST", "POST", "update-2", `"2"`, `{"title":"buy soy milk","completed":true}`, 200, `"3"`},
		{"delete", "DELETE", "delete-1", `"3"`, ``, 204, `"4"`},
	} {
		a := mustSend(t, step.method, base+"/todo/"+id, step.key, step.ifMatch, step.body)
		if a.status != step.status || a.etag != step.etag {
			t.Fatalf("%s: %+v, want %d %s", step.name, a, step.status, step.etag)
		}
		items := len(tableItems(t, ep))
		if b := mustSend(t, step.method, base+"/todo/"+id, step.key, step.ifMatch, step.body); b != a {
			t.Fatalf("%s retried: %+v, first %+v", step.name, b, a)
		}
		if n := len(tableItems(t, ep)); n != items {
			t.Fatalf("%s retried: the table went from %d to %d items", step.name, items, n)
		}
	}
	if evs := todoEvents(t, ep); evs[id] != 4 {
		t.Fatalf("todo %s has %d events, want 4 (create, two updates, delete)", id, evs[id])
	}
}

// TestTodoAPIIdempotencyKeyReusedForAnotherRequestIs422AndWritesNothing
// reuses a key for another body, path or method: 422 naming the reuse,
// and the events table keeps its items.
func TestTodoAPIIdempotencyKeyReusedForAnotherRequestIs422AndWritesNothing(t *testing.T) {
	base, ep := startHTTPOn(t)
	first := mustSend(t, "POST", base+"/todo", "k1", "", `{"title":"buy milk"}`)
	if first.status != 201 {
		t.Fatalf("create: %+v", first)
	}
	id := first.todo(t).ID
	before := len(tableItems(t, ep))
	for _, c := range []struct{ name, method, path, ifMatch, body string }{
		{"other title", "POST", "/todo", "", `{"title":"buy bread"}`},
		{"an id", "POST", "/todo", "", `{"id":"other","title":"buy milk"}`},
		{"completed", "POST", "/todo", "", `{"title":"buy milk","completed":true}`},
		{"other path", "PUT", "/todo/" + id, `"1"`, `{"title":"buy milk"}`},
		{"other method", "DELETE", "/todo/" + id, `"1"`, ``},
	} {
		a := mustSend(t, c.method, base+c.path, "k1", c.ifMatch, c.body)
		if a.status != 422 || a.code() != todoapi.CodeKeyReused || !strings.Contains(a.body, "k1") {
			t.Errorf("%s: %+v, want 422 %s", c.name, a, todoapi.CodeKeyReused)
		}
		if n := len(tableItems(t, ep)); n != before {
			t.Fatalf("%s: the events table went from %d to %d items", c.name, before, n)
		}
	}
	if a := mustSend(t, "POST", base+"/todo", "k1", "", `{"title":"buy milk"}`); a != first {
		t.Fatalf("the first request retried after the reuses: %+v, first %+v", a, first)
	}
}

// TestTodoAPIInvalidIdempotencyKeyIs400AndWritesNothing sends keys the
// API refuses before anything is claimed or dispatched.
func TestTodoAPIInvalidIdempotencyKeyIs400AndWritesNothing(t *testing.T) {
	base, ep := startHTTPOn(t)
	if a := mustSend(t, "POST", base+"/todo", "", "", `{"id":"a1","title":"buy milk"}`); a.status != 201 {
		t.Fatalf("create: %+v", a)
	}
	before := len(tableItems(t, ep))
	for _, c := range []struct{ name, method, path, ifMatch, key, body string }{
		{"empty quoted", "POST", "/todo", "", `""`, `{"title":"x"}`},
		{"too long", "POST", "/todo", "", strings.Repeat("k", 256), `{"title":"x"}`},
		{"unterminated", "POST", "/todo", "", `"abc`, `{"title":"x"}`},
		{"bad escape", "POST", "/todo", "", `"a\qb"`, `{"title":"x"}`},
		{"tab", "POST", "/todo", "", "a\tb", `{"title":"x"}`},
		{"not ASCII", "POST", "/todo", "", "clé", `{"title":"x"}`},
		{"update", "PUT", "/todo/a1", `"1"`, `"x"y`, `{"title":"x"}`},
		{"delete", "DELETE", "/todo/a1", `"1"`, strings.Repeat("k", 300), ``},
	} {
		a := mustSend(t, c.method, base+c.path, c.key, c.ifMatch, c.body)
		if a.status != 400 || a.code() != todoapi.CodeInvalidKey {
			t.Errorf("%s: %+v, want 400 %s", c.name, a, todoapi.CodeInvalidKey)
		}
		if n := len(tableItems(t, ep)); n != before {
			t.Fatalf("%s: the events table went from %d to %d items", c.name, before, n)
		}
	}
	// A body the API refuses with a valid key is 400 before the key is
	// claimed, and writes nothing either.
	if a := mustSend(t, "POST", base+"/todo", "k-bad-body", "", `{"title":`); a.status != 400 {
		t.Fatalf("malformed body with a key: %+v", a)
	}
	if n := len(tableItems(t, ep)); n != before {
		t.Fatalf("malformed body with a key: the events table went from %d to %d items", before, n)
	}
}

// TestTodoAPIIdempotencyKeyRacingRequestsCreateOneTodo sends one create
// with one key from many goroutines at once: each answer is the create's
// 201 (the same) or 409 idempotency_key_in_use while it runs, and one
// todo with one event exists.
func TestTodoAPIIdempotencyKeyRacingRequestsCreateOneTodo(t *testing.T) {
	base, ep := startHTTPOn(t)
	const n = 16
	answers := make([]answer, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			a, err := send("POST", base+"/todo", "race-1", "", `{"title":"once"}`)
			if err != nil {
				t.Error(err)
			}
			answers[i] = a
		}()
	}
	close(start)
	wg.Wait()
	var created []answer
	inUse := 0
	for _, a := range answers {
		switch {
		case a.status == 201:
			created = append(created, a)
		case a.status == 409 && a.code() == todoapi.CodeKeyInUse:
			inUse++
		default:
			t.Errorf("answer %+v", a)
		}
	}
	if len(created) == 0 {
		t.Fatalf("no request created the todo: %+v", answers)
	}
	for _, a := range created[1:] {
		if a != created[0] {
			t.Fatalf("two different 201s: %+v and %+v", a, created[0])
		}
	}
	t.Logf("%d answered 201, %d answered 409 %s", len(created), inUse, todoapi.CodeKeyInUse)
	if evs := todoEvents(t, ep); len(evs) != 1 {
		t.Fatalf("todo events by todo: %v, want one todo", evs)
	}
	if a := mustSend(t, "POST", base+"/todo", "race-1", "", `{"title":"once"}`); a != created[0] {
		t.Fatalf("retry after the race: %+v, want %+v", a, created[0])
	}
}

// TestTodoAPIIdempotencyKeyAnswerSurvivesAKillBetweenAppendAndAnswer
// serves the HTTP API from a child process that kills itself with
// SIGKILL when a request with a given key starts its success answer: the
// command is appended (the test finds its COMMAND# record and its event),
// the client sees its connection dropped without an answer. A new child
// then answers the retry with the same key with what the first attempt
// would have answered, and no command ran twice. It does so for a create
// without an id (the key derives the id) and for an update.
func TestTodoAPIIdempotencyKeyAnswerSurvivesAKillBetweenAppendAndAnswer(t *testing.T) {
	ep := rigs.Endpoints(t)
	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	base := "http://" + addr
	// records returns the accepted commands' records of Idempotency-Key
	// commands on todos, as "<todo id> <command id>".
	records := func() map[string]bool {
		out := map[string]bool{}
		for _, it := range tableItems(t, ep) {
			pk, sk := attrS(it, "pk"), attrS(it, "sk")
			_, refused := it["status"] // a refusal's record has a status
			if strings.HasPrefix(sk, "COMMAND#"+httpapi.IdempotencyCommandPrefix) && strings.HasPrefix(pk, "AGGREGATE#"+todo.AggregateType+"#") && !refused {
				out[strings.TrimPrefix(pk, "AGGREGATE#"+todo.AggregateType+"#")+" "+strings.TrimPrefix(sk, "COMMAND#")] = true
			}
		}
		return out
	}
	// killed sends the request to a child that is killed before it
	// answers, checks the command was recorded meanwhile (returning the
	// records added), and sends it again to a new child.
	var live *exec.Cmd // the child serving after a kill
	killed := func(key, method, path, ifMatch, body string) (retry answer, added []string) {
		t.Helper()
		if live != nil { // frees the address
			_ = live.Process.Kill()
			_, _ = live.Process.Wait()
		}
		before := records()
		child := startHTTPChild(t, ep, addr, key)
		a, err := send(method, base+path, key, ifMatch, body)
		if err == nil {
			t.Fatalf("%s %s answered %+v: the child was not killed", method, path, a)
		}
		st, werr := child.Process.Wait()
		if werr != nil {
			t.Fatal(werr)
		}
		if ws, ok := st.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("child ended with %v, want SIGKILL", st)
		}
		for r := range records() {
			if !before[r] {
				added = append(added, r)
			}
		}
		// The kill landed between the append and the answer: the client
		// has no answer, and the key's command is recorded as accepted.
		if len(added) != 1 {
			t.Fatalf("%s %s: command records added before the kill: %v, want one (the kill did not land after the append)", method, path, added)
		}
		t.Logf("%s %s with key %s: connection dropped (%v), child killed by SIGKILL, command recorded: %s", method, path, key, err, added[0])
		live = startHTTPChild(t, ep, addr, "") // a new serve, without the kill
		return mustSend(t, method, base+path, key, ifMatch, body), added
	}

	// The create: killed after its append.
	create, recorded := killed("kill-create", "POST", "/todo", "", `{"title":"survive","message":"kill -9"}`)
	if create.status != 201 || create.etag != `"1"` {
		t.Fatalf("retried create: %+v", create)
	}
	v := create.todo(t)
	if create.location != "/todo/"+v.ID || v.Title != "survive" || v.Message != "kill -9" || v.Version != 1 {
		t.Fatalf("retried create: %+v %+v", create, v)
	}
	if !strings.HasPrefix(recorded[0], v.ID+" ") {
		t.Fatalf("command recorded as %q, the retry names todo %s", recorded, v.ID)
	}
	if evs := todoEvents(t, ep); len(evs) != 1 || evs[v.ID] != 1 {
		t.Fatalf("todo events by todo: %v, want one event of %s", evs, v.ID)
	}
	// Asked again, the live child answers the same.
	if again := mustSend(t, "POST", base+"/todo", "kill-create", "", `{"title":"survive","message":"kill -9"}`); again != create {
		t.Fatalf("second retry %+v, first retry %+v", again, create)
	}

	// The update: killed after its append; without the key the retry
	// would be a 409 for its own stale If-Match.
	update, added := killed("kill-update", "PUT", "/todo/"+v.ID, `"1"`, `{"title":"survived","completed":true}`)
	if update.status != 200 || update.etag != `"2"` {
		t.Fatalf("retried update: %+v", update)
	}
	if u := update.todo(t); u.ID != v.ID || u.Title != "survived" || !u.Completed || u.Version != 2 {
		t.Fatalf("retried update: %+v", u)
	}
	if evs := todoEvents(t, ep); evs[v.ID] != 2 {
		t.Fatalf("todo %s has %d events, want 2", v.ID, evs[v.ID])
	}
	if !strings.HasPrefix(added[0], v.ID+" ") {
		t.Fatalf("the update's command record %v is not on todo %s", added, v.ID)
	}
}
