package todoapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/domains/todo/todoapi"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/httpapi"
	"github.com/eventpipe/eventpipe/httpapi/auth"
	"github.com/eventpipe/eventpipe/projections/readmodels"
)

// memStore is an in-memory dispatcher and command record store: a create
// is accepted once per todo id and recorded under its command id, as the
// event store does it.
type memStore struct {
	mu       sync.Mutex
	versions map[string]int64                   // todo id -> version
	records  map[string]eventstore.AppendResult // ref + command id -> accepted
	refusals map[string]eventstore.Refusal      // ref + command id -> refusal
	commands []commands.Command                 // dispatched
	gate     chan struct{}                      // when set, alice's dispatch signals entered and waits for it
	entered  chan struct{}
}

func newMemStore() *memStore {
	return &memStore{versions: map[string]int64{}, records: map[string]eventstore.AppendResult{}, refusals: map[string]eventstore.Refusal{}}
}

func (m *memStore) DispatchFresh(_ context.Context, cmd commands.Command) (commands.Result, error) {
	if m.gate != nil && cmd.Actor == "alice" {
		m.entered <- struct{}{}
		<-m.gate
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.commands = append(m.commands, cmd)
	res := commands.Result{CommandID: cmd.ID, AggregateType: cmd.AggregateType, AggregateID: cmd.AggregateID}
	if cmd.ExpectedVersion != nil && *cmd.ExpectedVersion != m.versions[cmd.AggregateID] {
		res.Status, res.Reason = commands.StatusConflict, "stale"
		return res, nil
	}
	m.versions[cmd.AggregateID]++
	res.Status, res.Version = commands.StatusAccepted, m.versions[cmd.AggregateID]
	m.records[todo.AggregateType+"/"+cmd.AggregateID+" "+cmd.ID] = eventstore.AppendResult{LastSeq: res.Version, Duplicate: true}
	return res, nil
}

func (m *memStore) CommandResult(_ context.Context, ref eventstore.Ref, id string) (eventstore.AppendResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.records[ref.String()+" "+id]; ok {
		return r, nil
	}
	return eventstore.AppendResult{}, fmt.Errorf("command %s on %s: %w", id, ref, eventstore.ErrCommandNotFound)
}

func (m *memStore) RecordRefusal(_ context.Context, ref eventstore.Ref, id string, r eventstore.Refusal) (eventstore.AppendResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := ref.String() + " " + id
	if prior, ok := m.refusals[k]; ok {
		return eventstore.AppendResult{}, &eventstore.RefusedCommandError{Aggregate: ref, CommandID: id, Refusal: prior}
	}
	m.refusals[k] = r
	return eventstore.AppendResult{}, nil
}

func (m *memStore) Get(context.Context, string) (eventstore.State[todo.Todo], error) {
	return eventstore.State[todo.Todo]{}, eventstore.ErrAggregateNotFound
}

// serve mounts the API on m, with the request's X-Subject header as its
// authenticated subject (none without it).
func serve(t *testing.T, m *memStore) *httptest.Server {
	t.Helper()
	srv, err := httpapi.New(httpapi.Config{Addr: "127.0.0.1:0", Middleware: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if s := r.Header.Get("X-Subject"); s != "" {
				r = r.WithContext(auth.WithIdentity(r.Context(), auth.Identity{Subject: s}))
			}
			next.ServeHTTP(w, r)
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	err = todoapi.Mount(srv, todoapi.Config{Commands: m, States: m, Records: m,
		List: func(context.Context, readmodels.TodoList) ([]readmodels.Todo, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

func post(t *testing.T, url, subject, key, body string) (int, todoapi.View, httpapi.Error) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/todo", strings.NewReader(body))
	req.Header.Set(httpapi.IdempotencyKeyHeader, key)
	if subject != "" {
		req.Header.Set("X-Subject", subject)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v todoapi.View
	var e httpapi.Error
	if resp.StatusCode < 300 {
		_ = json.NewDecoder(resp.Body).Decode(&v)
	} else {
		_ = json.NewDecoder(resp.Body).Decode(&e)
	}
	return resp.StatusCode, v, e
}

func TestIdempotencyKeysOfTwoSubjectsDoNotCollide(t *testing.T) {
	m := newMemStore()
	ts := serve(t, m)
	_, alice, _ := post(t, ts.URL, "alice", "k", `{"title":"a"}`)
	_, bob, _ := post(t, ts.URL, "bob", "k", `{"title":"b"}`) // another body: not a reuse, another subject
	_, anon, _ := post(t, ts.URL, "", "k", `{"title":"c"}`)
	if alice.ID == "" || alice.ID == bob.ID || alice.ID == anon.ID || bob.ID == anon.ID {
		t.Fatalf("todos %q %q %q: the subjects' keys collide", alice.ID, bob.ID, anon.ID)
	}
	if st, again, _ := post(t, ts.URL, "alice", "k", `{"title":"a"}`); st != 201 || again != alice {
		t.Fatalf("alice's retry: %d %+v, want %+v", st, again, alice)
	}
	if st, _, e := post(t, ts.URL, "bob", "k", `{"title":"a"}`); st != 422 || e.Code != todoapi.CodeKeyReused {
		t.Fatalf("bob reusing his key for alice's body: %d %+v", st, e)
	}
	if len(m.commands) != 3 {
		t.Fatalf("%d commands dispatched, want 3", len(m.commands))
	}
	for _, c := range m.commands {
		if !strings.HasPrefix(c.ID, httpapi.IdempotencyCommandPrefix) || c.CorrelationID != c.ID {
			t.Fatalf("command %+v: want an id derived from the key, also its correlation id", c)
		}
	}
}

func TestIdempotencyKeyInFlightIs409(t *testing.T) {
	m := newMemStore()
	m.gate, m.entered = make(chan struct{}), make(chan struct{}, 2)
	ts := serve(t, m)
	first := make(chan int)
	go func() {
		st, _, _ := post(t, ts.URL, "alice", "k", `{"title":"a"}`)
		first <- st
	}()
	<-m.entered // the first request is dispatching
	if st, _, e := post(t, ts.URL, "alice", "k", `{"title":"a"}`); st != 409 || e.Code != todoapi.CodeKeyInUse {
		t.Fatalf("same key in flight: %d %+v, want 409 %s", st, e, todoapi.CodeKeyInUse)
	}
	if st, _, e := post(t, ts.URL, "bob", "k", `{"title":"a"}`); st != 201 {
		t.Fatalf("another subject's key while alice's is in flight: %d %+v", st, e)
	}
	close(m.gate)
	if st := <-first; st != 201 {
		t.Fatalf("first request: %d", st)
	}
	if st, _, _ := post(t, ts.URL, "alice", "k", `{"title":"a"}`); st != 201 {
		t.Fatalf("retry after the first answered: %d", st)
	}
}
