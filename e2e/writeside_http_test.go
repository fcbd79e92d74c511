package e2e_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/todo/todoapi"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/httpapi"
	"github.com/eventpipe/eventpipe/operator"
)

// startHTTP runs the write side's HTTP API against a fresh events table
// and returns its base URL.
func startHTTP(t *testing.T) string {
	t.Helper()
	base, _ := startHTTPOn(t)
	return base
}

// startHTTPOn is startHTTP that also returns the endpoints (the table).
func startHTTPOn(t *testing.T) (string, endpoints.Endpoints) {
	t.Helper()
	ep := rigs.Endpoints(t)
	ep.HTTPAddr = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	return rigs.ServeHTTP(t, rigs.NewService(t, ep, testenv.UniqueName(t, "g"))), ep
}

type reply struct {
	status int
	etag   string
	todo   todoapi.View
	err    httpapi.Error
}

func call(t *testing.T, method, url, ifMatch, body string) reply {
	t.Helper()
	return callWith(t, method, url, ifMatch, body, "")
}

// callWith is call with a Content-Type header when contentType is set.
func callWith(t *testing.T, method, url, ifMatch, body, contentType string) reply {
	t.Helper()
	r, _ := callHeaders(t, method, url, body, map[string]string{"Content-Type": contentType, "If-Match": ifMatch})
	return r
}

// callHeaders sends a request with the headers that are not empty and
// returns its reply and the response's headers.
func callHeaders(t *testing.T, method, url, body string, headers map[string]string) (reply, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, etag: resp.Header.Get("ETag")}
	if resp.StatusCode < 300 {
		_ = json.Unmarshal(b, &r.todo)
	} else {
		_ = json.Unmarshal(b, &r.err)
	}
	return r, resp.Header
}

// TestTodoAPIStatusCodes walks the todo API through every
// status code it answers with.
func TestTodoAPIStatusCodes(t *testing.T) {
	base := startHTTP(t)
	steps := []struct {
		name              string
		method, path, ifm string
		body              string
		status            int
		etag, code, title string
	}{
		{"create", "POST", "/todo", "", `{"id":"a1","title":"buy milk"}`, 201, `"1"`, "", "buy milk"},
		{"create again", "POST", "/todo", "", `{"id":"a1","title":"again"}`, 409, "", "conflict", ""},
		{"get", "GET", "/todo/a1", "", "", 200, `"1"`, "", "buy milk"},
		{"get unknown", "GET", "/todo/zz", "", "", 404, "", "not_found", ""},
		{"update without If-Match", "PUT", "/todo/a1", "", `{"title":"x"}`, 428, "", "if_match_required", ""},
		{"update bad If-Match", "PUT", "/todo/a1", `"abc"`, `{"title":"x"}`, 400, "", "invalid_if_match", ""},
		{"update stale", "PUT", "/todo/a1", `"0"`, `{"title":"x"}`, 409, "", "conflict", ""},
		{"update unknown", "POST", "/todo/zz", `"1"`, `{"title":"x"}`, 404, "", "not_found", ""},
		{"update malformed", "PUT", "/todo/a1", `"1"`, `{"title":`, 400, "", "malformed_json", ""},
		{"update empty title", "PUT", "/todo/a1", `"1"`, `{"title":""}`, 400, "", "invalid", ""},
		{"update too large", "PUT", "/todo/a1", `"1"`, `{"title":"` + strings.Repeat("x", 70_000) + `"}`, 413, "", "body_too_large", ""},
		{"update", "PUT", "/todo/a1", `"1"`, `{"title":"buy oat milk","completed":true}`, 200, `"2"`, "", "buy oat milk"},
		{"update by POST", "POST", "/todo/a1", `"2"`, `{"title":"buy soy milk"}`, 200, `"3"`, "", "buy soy milk"},
		{"delete without If-Match", "DELETE", "/todo/a1", "", "", 428, "", "if_match_required", ""},
		{"delete stale", "DELETE", "/todo/a1", `"2"`, "", 409, "", "conflict", ""},
		{"delete", "DELETE", "/todo/a1", `"3"`, "", 204, `"4"`, "", ""},
		{"get deleted", "GET", "/todo/a1", "", "", 404, "", "not_found", ""},
		{"delete deleted", "DELETE", "/todo/a1", `"4"`, "", 404, "", "not_found", ""},
		{"create deleted id", "POST", "/todo", "", `{"id":"a1","title":"again"}`, 409, "", "conflict", ""},
		{"reserved id", "GET", "/todo/a%23b", "", "", 400, "", "invalid", ""},
	}
	for _, s := range steps {
		r := call(t, s.method, base+s.path, s.ifm, s.body)
		if r.status != s.status || (s.etag != "" && r.etag != s.etag) || (s.code != "" && r.err.Code != s.code) || (s.title != "" && r.todo.Title != s.title) {
			t.Errorf("%s: %s %s → %d etag %s %+v %+v; want %d etag %s code %q", s.name, s.method, s.path, r.status, r.etag, r.todo, r.err, s.status, s.etag, s.code)
		}
	}
}

// TestTwoClientsRacingWithTheSameIfMatch: one wins with 200, every other
// gets 409, and the todo moved exactly one version.
func TestTwoClientsRacingWithTheSameIfMatch(t *testing.T) {
	base := startHTTP(t)
	if r := call(t, "POST", base+"/todo", "", `{"id":"race","title":"v1"}`); r.status != 201 {
		t.Fatalf("create: %+v", r)
	}
	for round := 0; round < 5; round++ {
		cur := call(t, "GET", base+"/todo/race", "", "")
		var wg sync.WaitGroup
		codes := make([]int, 2)
		for i := range codes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[i] = call(t, "PUT", base+"/todo/race", cur.etag, `{"title":"client `+strconv.Itoa(i)+`"}`).status
			}()
		}
		wg.Wait()
		won, lost := 0, 0
		for _, c := range codes {
			switch c {
			case 200:
				won++
			case 409:
				lost++
			}
		}
		after := call(t, "GET", base+"/todo/race", "", "")
		if won != 1 || lost != 1 || after.todo.Version != cur.todo.Version+1 {
			t.Fatalf("round %d: codes %v, version %d → %d", round, codes, cur.todo.Version, after.todo.Version)
		}
	}
}

// TestTodoAPIBadInputWritesNothing sends the todo API every kind of bad
// request — malformed or null bodies, invalid fields, a reserved
// character, a body over the limit, stale or malformed If-Match, unknown
// and deleted todos, a create of an existing id — and counts the events
// table's items before and after: a synchronous request that is not
// accepted writes nothing, not even a refusal record (its command id is
// the server's own and can never be sent again).
func TestTodoAPIBadInputWritesNothing(t *testing.T) {
	base, ep := startHTTPOn(t)
	db := testenv.DynamoDB(t)
	count := func() int32 {
		out, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(ep.EventsTable), Select: "COUNT", ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return out.Count
	}
	if r := call(t, "POST", base+"/todo", "", `{"id":"a1","title":"buy milk"}`); r.status != 201 {
		t.Fatalf("create: %d %+v", r.status, r.err)
	}
	before := count()
	if before == 0 {
		t.Fatal("the accepted create wrote nothing")
	}
	for _, s := range []struct {
		name, method, path, ifm, body string
		status                        int
	}{
		{"null body", "POST", "/todo", "", `null`, 400},
		{"empty body", "POST", "/todo", "", ``, 400},
		{"malformed", "POST", "/todo", "", `{"title":`, 400},
		{"array", "POST", "/todo", "", `[1,2]`, 400},
		{"empty title", "POST", "/todo", "", `{"title":""}`, 400},
		{"reserved id", "POST", "/todo", "", `{"id":"a#b","title":"x"}`, 400},
		{"too large", "POST", "/todo", "", `{"title":"` + strings.Repeat("x", 70_000) + `"}`, 413},
		{"create existing", "POST", "/todo", "", `{"id":"a1","title":"again"}`, 409},
		{"update stale", "PUT", "/todo/a1", `"0"`, `{"title":"x"}`, 409},
		{"update null", "PUT", "/todo/a1", `"1"`, `null`, 400},
		{"update bad If-Match", "PUT", "/todo/a1", `"abc"`, `{"title":"x"}`, 400},
		{"update unknown", "PUT", "/todo/zz", `"1"`, `{"title":"x"}`, 404},
		{"delete unknown", "DELETE", "/todo/zz", `"1"`, ``, 404},
		{"delete stale", "DELETE", "/todo/a1", `"7"`, ``, 409},
	} {
		if r := call(t, s.method, base+s.path, s.ifm, s.body); r.status != s.status {
			t.Errorf("%s: %s %s → %d %+v, want %d", s.name, s.method, s.path, r.status, r.err, s.status)
		}
		if n := count(); n != before {
			t.Fatalf("%s: the events table went from %d to %d items", s.name, before, n)
		}
	}
}

// TestOperatorSurfaceMovesToItsOwnListener runs the write side with an
// operator address and the status page as its OperatorRoutes (as serve
// does): /metrics, /status and /status.json answer there and
// are 404 on the API's listener, which still serves the API and /healthz;
// without one, the API's listener serves them as before.
func TestOperatorSurfaceMovesToItsOwnListener(t *testing.T) {
	ep := rigs.Endpoints(t)
	ep.HTTPAddr = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	operatorAddr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	svc, err := eventpipe.NewWriteSide(context.Background(), eventpipe.WriteSideConfig{Process: eventpipe.Process{Endpoints: ep}, ConsumerGroup: testenv.UniqueName(t, "g"),
		OperatorAddr: operatorAddr, OperatorRoutes: operator.MountStatusPage, NoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	get := func(addr, path string) int {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return -1
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	rigs.WaitFor(t, "both listeners", func() bool { return get(ep.HTTPAddr, "/healthz") == 200 && get(operatorAddr, "/healthz") == 200 })
	for path, want := range map[string][2]int{ // API, operatorAddr
		"/metrics":     {404, 200},
		"/status":      {404, 200},
		"/status.json": {404, 200},
		"/todo/a1":     {404, 404}, // the API's answer: no such todo; the operatorAddr's: no such route
	} {
		if got := [2]int{get(ep.HTTPAddr, path), get(operatorAddr, path)}; got != want {
			t.Errorf("GET %s: API %d, operatorAddr %d; want %d, %d", path, got[0], got[1], want[0], want[1])
		}
	}
	if r := call(t, "POST", "http://"+ep.HTTPAddr+"/todo", "", `{"id":"a1","title":"x"}`); r.status != 201 {
		t.Errorf("the API on its listener: POST /todo %d %+v", r.status, r.err)
	}
	if _, err := eventpipe.NewWriteSide(context.Background(), eventpipe.WriteSideConfig{Process: eventpipe.Process{Endpoints: ep}, OperatorAddr: ep.HTTPAddr}); err == nil {
		t.Error("an operatorAddr address equal to the API's was accepted")
	}
}
