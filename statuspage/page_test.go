package statuspage

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/buildinfo"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// fakeReader returns a fixed snapshot whose todo events topic grows by
// step on every reading.
type fakeReader struct {
	step  int64
	calls atomic.Int64
	// cancelled counts readings that saw their context end.
	cancelled atomic.Int64
	block     bool // wait for the context to end before returning
}

func (f *fakeReader) ReadStatus(ctx context.Context) Snapshot {
	n := f.calls.Add(1)
	if f.block {
		<-ctx.Done()
		f.cancelled.Add(1)
	}
	return Snapshot{
		Groups: []Group{
			{Name: "g.commands.todo", Kind: KindCommands, Topics: []string{"commands.todo"}, Committed: 3, Newest: 3, PoisonTopic: "poison.g", Poisoned: 1},
			{Name: "projection.todos", Kind: KindProjection, Topics: []string{"events.todo"}, Committed: 2, Newest: 9, Lag: 7, Parked: &Parked{Events: 2, Aggregates: 1}},
			{Name: "projection.orders", Kind: KindProjection, Topics: []string{"events.order"}},
		},
		Relays: []Relay{{Name: "events", Stream: "arn:stream", Leases: []Lease{{Shard: "shard-1", Owner: "worker-a", Checkpoint: "42", UpdatedAt: time.Now().Add(-3 * time.Second)}}},
			{Name: "analytics", Err: "no table"}},
		Sagas:  []Saga{{Name: "transfer", Running: 2, Finished: map[string]int64{"completed": 3, "failed": 1}, Timeouts: 1}},
		Events: []EventsTopic{{AggregateType: "todo", Topic: "events.todo", Newest: n * f.step}, {AggregateType: "order", Topic: "events.order"}},
		Errors: []string{"relay analytics leases: no table"},
		Took:   5 * time.Millisecond,
	}
}

func get(t *testing.T, p *Page, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}

func TestPageSamplesFromTheFirstRequestAndServesTheRatesAsJSONAndHTML(t *testing.T) {
	r := &fakeReader{step: 10}
	p, err := New(Config{Reader: r, Interval: 20 * time.Millisecond, History: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	time.Sleep(60 * time.Millisecond)
	if n := r.calls.Load(); n != 0 {
		t.Fatalf("read %d times before any request", n)
	}
	var rep Report
	integration.AwaitProgress(t, "samples", func() int64 {
		rec := get(t, p, "/status.json")
		if rec.Code != http.StatusOK {
			t.Fatalf("GET /status.json: %d %s", rec.Code, rec.Body)
		}
		rep = Report{}
		if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		return int64(rep.Samples)
	}, 3)
	if len(rep.Rates) != rep.Samples-1 || rep.Latest == nil || len(rep.Latest.Groups) != 3 {
		t.Fatalf("report %+v", rep)
	}
	var todo Throughput
	for _, tp := range rep.Throughput {
		if tp.AggregateType == "todo" {
			todo = tp
		}
	}
	// Each reading moved the todo topic by 10: the history counts 10 per
	// pair of samples, and the rate is 10 over the time between them.
	last := rep.Rates[len(rep.Rates)-1]
	if todo.InHistory != int64(10*len(rep.Rates)) || todo.PerMinute != last.PerMinute["todo"] || todo.PerMinute != 10*60/last.Seconds {
		t.Fatalf("todo throughput %+v, last rate point %+v", todo, last)
	}

	rec := get(t, p, "/status")
	body := rec.Body.String()
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("GET /status: %d %s", rec.Code, rec.Header())
	}
	for _, want := range []string{
		`<tr data-group="projection.todos" data-kind="projection">`,
		`data-metric="lag">7<`,
		`<span data-metric="parked">2</span> (<span data-metric="parked-aggregates">1</span>)`,
		`data-metric="lease-owner">worker-a<`,
		`data-metric="lease-checkpoint"><code>42</code>`,
		`data-metric="relay-error">could not read: no table<`,
		`<span data-metric="finished-outcome" data-outcome="completed">3</span> completed`,
		`<polyline data-series="total"`,
		`<polyline data-series="todo"`,
		`<meta http-equiv="refresh" content="1">`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if strings.Contains(body, "ZgotmplZ") {
		t.Errorf("the template refused a value:\n%s", body)
	}
}

func TestCloseStopsTheSamplerAndCancelsTheReadingUnderWay(t *testing.T) {
	r := &fakeReader{block: true}
	p, err := New(Config{Reader: r, Interval: time.Millisecond, History: time.Second, Logger: nil})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status.json", nil).WithContext(ctx))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("GET /status.json while the first reading hangs: %d, want 503", rec.Code)
	}
	var wg sync.WaitGroup
	for range 3 { // Close is safe to call concurrently and again
		wg.Go(func() { _ = p.Close() })
	}
	wg.Wait()
	if r.calls.Load() != 1 || r.cancelled.Load() != 1 {
		t.Fatalf("%d readings, %d cancelled; want the one under way cancelled", r.calls.Load(), r.cancelled.Load())
	}
	if rec := get(t, p, "/status"); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `id="no-sample"`) {
		t.Fatalf("GET /status after Close: %d %s", rec.Code, rec.Body)
	}
	if n := r.calls.Load(); n != 1 {
		t.Fatalf("a closed page read again (%d readings)", n)
	}
}

func TestValidateNamesTheWrongField(t *testing.T) {
	r := ReaderFunc(func(context.Context) Snapshot { return Snapshot{} })
	for _, tc := range []struct {
		cfg         Config
		field, want string
	}{
		{Config{}, "Reader", "is nil"},
		{Config{Reader: r, Interval: -time.Second}, "Interval", "is negative"},
		{Config{Reader: r, Interval: time.Minute, History: time.Second}, "History", "(1s) is shorter than Interval (1m0s)"},
		{Config{Reader: r, Interval: time.Millisecond, History: 24 * time.Hour}, "History", "holds more than 100000 samples"},
		{Config{Reader: r, ReadTimeout: -time.Second}, "ReadTimeout", "is negative"},
		{Config{Reader: r, Access: Access{Mode: "JWT"}}, "Access.Mode", `is "JWT"`},
	} {
		_, err := New(tc.cfg)
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field || !strings.Contains(ve.Reason, tc.want) {
			t.Errorf("New(%+v) = %v, want an *eventstore.ValidationError on %s saying %q", tc.cfg, err, tc.field, tc.want)
		}
	}
}

func TestRatesSkipSamplesWithoutOffsetsAndCountNoEventsWhenAnOffsetGoesBack(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(sec int, todo int64, read bool) Sample {
		s := Sample{At: t0.Add(time.Duration(sec) * time.Second)}
		if read {
			s.Events = []EventsTopic{{AggregateType: "todo", Newest: todo}}
		}
		return s
	}
	points, counted := rates([]Sample{
		at(0, 100, true),
		at(10, 130, true), // +30 in 10s: 180/min
		at(20, 0, false),  // offsets not read: no point on either side
		at(30, 160, true),
		at(40, 5, true), // topic made again: no events, not negative
		at(70, 35, true),
	})
	want := []float64{180, 0, 60}
	if len(points) != len(want) {
		t.Fatalf("points %+v, want %d", points, len(want))
	}
	for i, p := range points {
		if p.Total != want[i] || p.PerMinute["todo"] != want[i] {
			t.Errorf("point %d: %+v, want %v per minute", i, p, want[i])
		}
	}
	if counted["todo"] != 60 {
		t.Fatalf("counted %v, want 60 todo events", counted)
	}
}

func TestRingKeepsTheNewestValuesOldestFirst(t *testing.T) {
	r := newRing[int](3)
	if v := r.values(); len(v) != 0 {
		t.Fatalf("empty ring: %v", v)
	}
	for i := 1; i <= 7; i++ {
		r.push(i)
	}
	if v := r.values(); len(v) != 3 || v[0] != 5 || v[1] != 6 || v[2] != 7 {
		t.Fatalf("values %v, want [5 6 7]", v)
	}
}

// accessPage serves the fake reader's snapshot with access; it has its
// first sample once it returns.
func accessPage(t *testing.T, access Access) *Page {
	t.Helper()
	p, err := New(Config{Reader: &fakeReader{step: 1}, Interval: time.Hour, History: time.Hour, Access: access})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func TestPageShowsTheAccessPolicy(t *testing.T) {
	access := Access{Mode: AccessJWT, Issuer: "https://issuer.example", Audience: "eventpipe-api",
		Rules: []AccessRule{
			{Subjects: []string{"alice"}, Scopes: []string{"todo:write"}, Commands: []string{"CreateTodo", "UpdateTodo"}, Read: []string{"todo"}},
			{Subjects: []string{"*"}, Commands: []string{"*"}, Read: []string{"*"}, Write: []string{"analytics"}},
			{Subjects: []string{"*"}, On: "own", Commands: []string{"UpdateTodo"}},
			{Scopes: []string{"shop"}, Sources: []string{"shop-a", "shop-b"}, Read: []string{"analytics"}},
			{Subjects: []string{"root"}, Admin: true},
		},
		Operator:    "on the API's listener, behind its authentication",
		BusCommands: "signatures required, unsigned commands refused (producer keys: billing)"}
	p := accessPage(t, access)
	access.Rules[0].Subjects[0] = "mallory" // the page keeps its own copy

	rec := get(t, p, "/status")
	body := rec.Body.String()
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /status: %d %s", rec.Code, body)
	}
	for _, want := range []string{
		`<h2 id="access">Access</h2>`,
		`<b data-metric="access-mode" data-mode="jwt">jwt</b>`,
		`<code data-metric="access-issuer">https://issuer.example</code>`,
		`<code data-metric="access-audience">eventpipe-api</code>`,
		`<span data-metric="access-operator">on the API&#39;s listener, behind its authentication</span>`,
		`<tr data-rule="0">`,
		`<td data-metric="rule-who">subject <code>alice</code>; scope <code>todo:write</code></td>`,
		`<td data-metric="rule-commands"><code>CreateTodo</code>, <code>UpdateTodo</code></td>`,
		`<td data-metric="rule-read"><code>todo</code></td>`,
		`<td data-metric="rule-write"><span class="muted">–</span></td>`,
		`<tr data-rule="1">`,
		`<td data-metric="rule-who">any authenticated identity</td>`,
		`<td data-metric="rule-commands">every command type</td>`,
		`<td data-metric="rule-read">every resource</td>`,
		`<td data-metric="rule-write"><code>analytics</code></td>`,
		`<td data-metric="rule-on">everything</td>`,
		`<td data-metric="rule-on">only what the identity owns</td>`,
		`<td data-metric="rule-on">only the analytics sources <code>shop-a</code>, <code>shop-b</code></td>`,
		`<tr data-rule="4">`,
		`<span data-metric="access-bus-commands">signatures required, unsigned commands refused (producer keys: billing)</span>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	// After the summary cards, before the throughput.
	if cards, sec, tp := strings.Index(body, `class="cards"`), strings.Index(body, `id="access"`), strings.Index(body, `id="throughput"`); !(cards < sec && sec < tp) {
		t.Errorf("access section at %d, want between the cards (%d) and the throughput (%d)", sec, cards, tp)
	}
	for _, unwanted := range []string{"mallory", "access-warning", "ZgotmplZ"} {
		if strings.Contains(body, unwanted) {
			t.Errorf("page has %s", unwanted)
		}
	}
}

func TestPageWarnsThatAnOpenAPIIsOpenToAnyone(t *testing.T) {
	p := accessPage(t, Access{Mode: AccessOpen, Operator: "on its own listener 127.0.0.1:9090, without authentication (keep it on loopback or a private network)"})
	body := get(t, p, "/status").Body.String()
	for _, want := range []string{
		`<b class="errors" data-metric="access-mode" data-mode="open">open</b>`,
		`<span class="errors" data-metric="access-warning">no authentication: anyone who reaches the API can send every command and read everything</span>`,
		`<span data-metric="access-operator">on its own listener 127.0.0.1:9090, without authentication (keep it on loopback or a private network)</span>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if strings.Contains(body, `id="access-table"`) || strings.Contains(body, "access-issuer") {
		t.Errorf("an open API's page shows a policy:\n%s", body)
	}
}

func TestPageWithoutAccessHasNoAccessSection(t *testing.T) {
	p := accessPage(t, Access{})
	body := get(t, p, "/status").Body.String()
	if !strings.Contains(body, `id="groups"`) {
		t.Fatalf("no page:\n%s", body)
	}
	for _, unwanted := range []string{`id="access"`, "access-mode", ">Access<"} {
		if strings.Contains(body, unwanted) {
			t.Errorf("page has %s", unwanted)
		}
	}
	rec := get(t, p, "/status.json")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /status.json: %d %s", rec.Code, rec.Body)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	if a, ok := raw["access"]; ok {
		t.Fatalf("status.json has access %s", a)
	}
}

func TestPageShowsTheAccessBeforeTheFirstSample(t *testing.T) {
	r := &fakeReader{block: true}
	p, err := New(Config{Reader: r, Interval: time.Hour, History: time.Hour, Access: Access{Mode: AccessOpen}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status", nil).WithContext(ctx))
	body := rec.Body.String()
	if !strings.Contains(body, `id="no-sample"`) || !strings.Contains(body, `data-metric="access-mode" data-mode="open"`) {
		t.Fatalf("page without a sample:\n%s", body)
	}
}

func TestStatusJSONCarriesTheAccess(t *testing.T) {
	access := Access{Mode: AccessJWT, Issuer: "https://issuer.example", Audience: "eventpipe-api",
		Rules:    []AccessRule{{Scopes: []string{"ops"}, Read: []string{"status", "metrics"}}},
		Operator: "on the API's listener, behind its authentication"}
	p := accessPage(t, access)
	rec := get(t, p, "/status.json")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /status.json: %d %s", rec.Code, rec.Body)
	}
	var raw struct {
		Access json.RawMessage `json:"access"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	const want = `{"mode":"jwt","issuer":"https://issuer.example","audience":"eventpipe-api","rules":[{"scopes":["ops"],"read":["status","metrics"]}],"operator":"on the API's listener, behind its authentication"}`
	// Compared as values: the keys' order does not matter.
	var got, wantV any
	if err := json.Unmarshal(raw.Access, &got); err != nil {
		t.Fatalf("access %s: %v", raw.Access, err)
	}
	if err := json.Unmarshal([]byte(want), &wantV); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, wantV) {
		t.Fatalf("access %s, want %s", raw.Access, want)
	}
	var rep Report
	if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Access == nil || rep.Access.Mode != AccessJWT || len(rep.Access.Rules) != 1 || rep.Access.Rules[0].Read[1] != "metrics" {
		t.Fatalf("report access %+v", rep.Access)
	}
}

// actionsReader is a reader whose snapshot carries operator actions.
type actionsReader struct{ actions []OperatorAction }

func (a actionsReader) ReadStatus(context.Context) Snapshot {
	return Snapshot{OperatorActions: a.actions}
}

// TestPageShowsTheOperatorActions: the latest actions (who, what, on
// what, why, with what result) are a table of the page, newest first as
// read, and a page without any says so.
func TestPageShowsTheOperatorActions(t *testing.T) {
	at := time.Date(2026, 11, 25, 16, 30, 0, 0, time.UTC)
	actions := []OperatorAction{
		{ID: 7, At: at, Actor: "alice", Action: "parked skip", Target: "todos todo/t1 #3", Reason: "bad import", Result: "skipped #3, re-applied 2"},
		{ID: 6, At: at.Add(-time.Hour), Actor: "bob", Action: "poison redrive", Target: "poison.eventpipe-commands 0/4", Result: "redriven 1"},
	}
	p, err := New(Config{Reader: actionsReader{actions}, Interval: time.Hour, History: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	body := get(t, p, "/status").Body.String()
	seven, six := strings.Index(body, `data-action="7"`), strings.Index(body, `data-action="6"`)
	if seven < 0 || six < seven {
		t.Fatalf("the actions are not rows, newest first:\n%s", body)
	}
	for _, want := range []string{"2026-11-25T16:30:00Z", `<td data-metric="action-actor">alice</td>`, `<td data-metric="action-kind">parked skip</td>`,
		"<td>todos todo/t1 #3</td>", "<td>bad import</td>", "<td>skipped #3, re-applied 2</td>", `<td data-metric="action-actor">bob</td>`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}

	empty, err := New(Config{Reader: actionsReader{}, Interval: time.Hour, History: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = empty.Close() })
	if body := get(t, empty, "/status").Body.String(); !strings.Contains(body, "No operator actions recorded.") || strings.Contains(body, "operator-actions-table") {
		t.Errorf("a page without actions:\n%s", body)
	}
}

// TestPageShowsTheBuildThatServesIt: the page and /status.json name the
// build (Config.Build), before the first sample too; without one it is
// this process's.
func TestPageShowsTheBuildThatServesIt(t *testing.T) {
	build := buildinfo.Info{Version: "v1.2.3", Commit: "0123456789abcdef0123", Modified: true, GoVersion: "go1.99.1", Platform: "linux/amd64"}
	p, err := New(Config{Reader: &fakeReader{block: true}, Interval: time.Hour, History: time.Hour, Build: build})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status", nil).WithContext(ctx))
	body := rec.Body.String()
	for _, want := range []string{`data-metric="build-version">v1.2.3<`, `data-metric="build-commit" title="0123456789abcdef0123">0123456789ab<`,
		`data-metric="build-modified"`, `data-metric="build-go">go1.99.1<`} {
		if !strings.Contains(body, want) {
			t.Fatalf("page without %s:\n%s", want, body)
		}
	}
	sampled, err := New(Config{Reader: &fakeReader{}, Interval: time.Hour, History: time.Hour, Build: build})
	if err != nil {
		t.Fatal(err)
	}
	defer sampled.Close()
	rec = get(t, sampled, "/status.json")
	var rep Report
	if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
		t.Fatalf("status.json %s: %v", rec.Body, err)
	}
	if rep.Build != build {
		t.Fatalf("status.json build %+v, want %+v", rep.Build, build)
	}

	own, err := New(Config{Reader: &fakeReader{}})
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	if own.cfg.Build != buildinfo.Read() {
		t.Fatalf("default Build %+v, want this process's %+v", own.cfg.Build, buildinfo.Read())
	}
}
