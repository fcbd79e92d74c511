package statuspage

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		rec := get(t, p, "/status.json")
		if rec.Code != http.StatusOK {
			t.Fatalf("GET /status.json: %d %s", rec.Code, rec.Body)
		}
		rep = Report{}
		if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Samples >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d samples after 5s", rep.Samples)
		}
	}
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
		cfg  Config
		want string
	}{
		{Config{}, "Config.Reader is nil"},
		{Config{Reader: r, Interval: -time.Second}, "Config.Interval is negative"},
		{Config{Reader: r, Interval: time.Minute, History: time.Second}, "Config.History (1s) is shorter than Config.Interval (1m0s)"},
		{Config{Reader: r, Interval: time.Millisecond, History: 24 * time.Hour}, "holds more than 100000 samples"},
		{Config{Reader: r, ReadTimeout: -time.Second}, "Config.ReadTimeout is negative"},
	} {
		_, err := New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error saying %q", tc.cfg, err, tc.want)
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
