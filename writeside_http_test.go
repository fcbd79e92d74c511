package eventpipe_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/eventpipe/eventpipe/domains/todo/todoapi"
	"github.com/eventpipe/eventpipe/httpapi"
	"github.com/eventpipe/eventpipe/internal/testenv"
)

// startHTTP runs the write side's HTTP API against a fresh events table
// and returns its base URL.
func startHTTP(t *testing.T) string {
	t.Helper()
	ep := testEndpoints(t)
	ep.HTTPAddr = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	svc := newService(t, ep, testenv.UniqueName(t, "g"))
	srv, err := svc.NewHTTP()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ready) }()
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + <-ready
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
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if ifMatch != "" {
		req.Header.Set("If-Match", ifMatch)
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
	return r
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
