package todoapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/eventpipe/eventpipe/domains/todo/todoapi"
	"github.com/eventpipe/eventpipe/httpapi"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
	"github.com/eventpipe/eventpipe/projections/readmodels"
	"github.com/eventpipe/eventpipe/projections/searchmodels"
)

// esRequest is what a fake Elasticsearch saw of one request.
type esRequest struct{ path, query string }

// TestReadFromSearchSendsTheIDAsOnePathSegment reads todos whose ids
// hold URL syntax through GET /todo/{id}?read=search, with the real
// search-model client, against a server standing in for Elasticsearch:
// each id reaches it as the one document id of GET /<alias>/_doc/<id>,
// with no query of its own; an id the store would refuse is 400 and
// never reaches it.
func TestReadFromSearchSendsTheIDAsOnePathSegment(t *testing.T) {
	var mu sync.Mutex
	var seen []esRequest
	es := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, esRequest{path: r.URL.EscapedPath(), query: r.URL.RawQuery})
		mu.Unlock()
		parts := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
		id, _ := url.PathUnescape(parts[len(parts)-1])
		w.Header().Set("X-Elastic-Product", "Elasticsearch")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"_index": "todos-1", "_id": id, "found": true,
			"_source": searchmodels.TodoDoc{ID: id, Title: "t", Sequence: 1}})
	}))
	t.Cleanup(es.Close)
	client, err := esclient.NewClient(es.URL, esclient.Security{})
	if err != nil {
		t.Fatal(err)
	}
	m := newMemStore()
	srv, err := httpapi.New(httpapi.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	err = todoapi.Mount(srv, todoapi.Config{Commands: m, States: m, Records: m,
		List:   func(context.Context, readmodels.TodoList) ([]readmodels.Todo, error) { return nil, nil },
		Search: searchmodels.TodoIndex{Client: client, Alias: "todos"}})
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(srv.Handler())
	t.Cleanup(api.Close)

	get := func(escapedID string) (int, string) {
		t.Helper()
		res, err := http.Get(api.URL + "/todo/" + escapedID + "?read=search")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	for _, id := range []string{"x?refresh=true", "a/b", "50%", "sp ace&x=1"} {
		mu.Lock()
		seen = nil
		mu.Unlock()
		status, body := get(url.PathEscape(id))
		var v todoapi.View
		if status != http.StatusOK || json.Unmarshal([]byte(body), &v) != nil || v.ID != id {
			t.Errorf("read=search of %q: %d %s, want 200 with that id", id, status, body)
		}
		mu.Lock()
		want := esRequest{path: "/todos/_doc/" + url.PathEscape(id)}
		if len(seen) != 1 || seen[0] != want {
			t.Errorf("read=search of %q reached Elasticsearch as %+v, want one %+v", id, seen, want)
		}
		mu.Unlock()
	}

	mu.Lock()
	seen = nil
	mu.Unlock()
	for _, escapedID := range []string{"a%23b", "a%00b", strings.Repeat("x", 257)} {
		if status, body := get(escapedID); status != http.StatusBadRequest || !strings.Contains(body, "aggregate_id") {
			t.Errorf("read=search of %q: %d %s, want 400 naming aggregate_id", escapedID, status, body)
		}
	}
	mu.Lock()
	if len(seen) != 0 {
		t.Errorf("invalid ids reached Elasticsearch: %+v", seen)
	}
	mu.Unlock()
}
