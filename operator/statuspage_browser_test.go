package operator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/stack"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/order"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	migrate "github.com/eventpipe/eventpipe/migrations/dynamodb"
	"github.com/eventpipe/eventpipe/operator"
	"github.com/eventpipe/eventpipe/parking"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/relay"
	"github.com/eventpipe/eventpipe/statuspage"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestStatusPageInChromiumShowsWhatStatusReadsAndTheEventsRate puts known
// numbers into a fresh namespace (5 todo and 3 order events on their
// events topics, 2 messages on the todos read model's poison topic, 2
// parked todo events of one aggregate, a relay lease with owner and
// checkpoint, no analytics table), serves the status page on a real
// operator.Status reader sampling every second, and reads the page in
// headless Chromium: every group's numbers equal /status.json's, and the
// ones put there equal what was put there. Then it publishes 7 more todo
// events and reloads until the page has counted them and the chart shows
// their rate, and saves a full-page screenshot to EVENTPIPE_TEST_ARTIFACTS
// (default .ci/logs).
func TestStatusPageInChromiumShowsWhatStatusReadsAndTheEventsRate(t *testing.T) {
	testenv.Integration(t)
	chromium := chromiumPath(t)
	ep := rigs.Endpoints(t)
	ep.Postgres = rigs.MigratedPostgres(t)
	db := testenv.DynamoDB(t)
	ep.LeasesTable, ep.AnalyticsTable = testenv.UniqueName(t, "leases"), testenv.UniqueName(t, "analytics") // the analytics table is never made
	ctx := context.Background()
	if err := migrate.CreateLeasesTable(ctx, db, ep.LeasesTable); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, db, ep.LeasesTable) })

	stream, err := relay.StreamARN(ctx, db, ep.EventsTable)
	if err != nil {
		t.Fatal(err)
	}
	leases := &relay.Leases{Client: db, Table: ep.LeasesTable}
	const shard, owner, checkpoint = "shardId-statuspage-1", "worker-a", "4242"
	if err := leases.Ensure(ctx, stream, shard, ""); err != nil {
		t.Fatal(err)
	}
	list, err := leases.List(ctx, stream)
	if err != nil || len(list) != 1 {
		t.Fatalf("leases %+v, %v", list, err)
	}
	lease, err := leases.Take(ctx, list[0], owner)
	if err == nil {
		_, err = leases.Checkpoint(ctx, lease, checkpoint, false)
	}
	if err != nil {
		t.Fatal(err)
	}

	pool, err := pgxpool.New(ctx, ep.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	lot, err := parking.New(parking.Config{DB: pool})
	if err != nil {
		t.Fatal(err)
	}
	for seq := int64(1); seq <= 2; seq++ {
		e := eventstore.Envelope{EventID: ulid.Make().String(), AggregateType: todo.AggregateType, AggregateID: "t-1", Sequence: seq,
			EventType: todo.TodoUpdated, SchemaVersion: 1, OccurredAt: time.Now().UTC(), Payload: json.RawMessage(`{"title":"x"}`)}
		if err := lot.Park(ctx, "todos", e, "refused by the test"); err != nil {
			t.Fatal(err)
		}
	}

	topics := bus.Topics{Prefix: ep.TopicPrefix}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: ep.KafkaBrokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	publish := func(topic string, n int) {
		t.Helper()
		msgs := make([]*message.Message, n)
		for i := range msgs {
			msgs[i] = message.NewMessage(watermill.NewUUID(), []byte(`{}`))
			msgs[i].Metadata.Set(bus.MetadataPartitionKey, strconv.Itoa(i))
		}
		if err := pub.Publish(topic, msgs...); err != nil {
			t.Fatal(err)
		}
	}
	publish(topics.Events(todo.AggregateType), 5)
	publish(topics.Events(order.AggregateType), 3)
	publish(projections.PoisonTopic(topics, "todos"), 2)

	page, err := statuspage.New(statuspage.Config{Reader: operator.StatusPageReader(operator.StatusConfig{Process: eventpipe.Process{Endpoints: ep}, DB: pool}),
		Interval: time.Second, History: 2 * time.Minute, Refresh: -1})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	page.Mount(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = page.Close() })

	browser := newBrowser(t, chromium)
	todos, todosSearch, orders := ep.TopicPrefix+"projection.todos", ep.TopicPrefix+"projection.todos-search", ep.TopicPrefix+"projection.orders"

	dom, rep := readStatusPage(t, browser, srv.URL)
	for _, c := range []struct {
		where, got, want string
	}{
		{"todos group committed", dom.Groups[todos]["committed"], "0"},
		{"todos group newest", dom.Groups[todos]["newest"], "5"},
		{"todos group lag", dom.Groups[todos]["lag"], "5"},
		{"todos group poisoned", dom.Groups[todos]["poisoned"], "2"},
		{"todos group parked", dom.Groups[todos]["parked"], "2"},
		{"todos group parked aggregates", dom.Groups[todos]["parked-aggregates"], "1"},
		{"todos-search group lag", dom.Groups[todosSearch]["lag"], "5"},
		{"todos-search group parked", dom.Groups[todosSearch]["parked"], "0"},
		{"orders group newest", dom.Groups[orders]["newest"], "3"},
		{"orders group lag", dom.Groups[orders]["lag"], "3"},
		{"todo events newest", dom.Types[todo.AggregateType]["events-newest"], "5"},
		{"order events newest", dom.Types[order.AggregateType]["events-newest"], "3"},
		{"total parked", dom.Top["total-parked"], "2"},
		{"events relay leases", dom.Relays[eventpipe.RelayEvents]["relay-leases"], "1"},
		{"lease owner", dom.Leases[shard]["lease-owner"], owner},
		{"lease checkpoint", dom.Leases[shard]["lease-checkpoint"], checkpoint},
		{"lease finished", dom.Leases[shard]["lease-finished"], "false"},
	} {
		if c.got != c.want {
			t.Errorf("%s: the page shows %q, want %q", c.where, c.got, c.want)
		}
	}
	if !strings.Contains(dom.Relays[eventpipe.RelayAnalytics]["relay-error"], ep.AnalyticsTable) {
		t.Errorf("analytics relay: the page shows %v, want an error naming the missing table %s", dom.Relays[eventpipe.RelayAnalytics], ep.AnalyticsTable)
	}
	if age, err := strconv.Atoi(dom.Leases[shard]["lease-age"]); err != nil || age < 0 || age > 120 {
		t.Errorf("lease age %q seconds", dom.Leases[shard]["lease-age"])
	}
	checkPageAgainstJSON(t, dom, rep)

	publish(topics.Events(todo.AggregateType), 7)
	integration.Await(t, "the page to count the 7 todo events", func() error {
		dom, rep = readStatusPage(t, browser, srv.URL)
		peak, _ := strconv.ParseFloat(dom.Top["chart-peak"], 64)
		if dom.Types[todo.AggregateType]["events-in-history"] != "7" || peak <= 0 || dom.Chart.TotalPoints == 0 {
			return fmt.Errorf("the page counts %q todo events in its history (want 7) with a chart peak of %q events/min over %d points",
				dom.Types[todo.AggregateType]["events-in-history"], dom.Top["chart-peak"], dom.Chart.TotalPoints)
		}
		return nil
	})
	if got := dom.Types[todo.AggregateType]["events-newest"]; got != "12" {
		t.Errorf("todo events newest %q after 7 more, want 12", got)
	}
	// The rate history, integrated, gives back the events published.
	var todoEvents, peak float64
	for _, p := range rep.Rates {
		todoEvents += p.PerMinute[todo.AggregateType] * p.Seconds / 60
		peak = math.Max(peak, p.Total)
	}
	if math.Abs(todoEvents-7) > 1e-6 {
		t.Errorf("the rate history adds up to %.6f todo events, want 7", todoEvents)
	}
	if got, want := dom.Top["chart-peak"], strconv.FormatFloat(peak, 'f', 1, 64); got != want {
		t.Errorf("chart peak %s events/min, /status.json's rates peak at %s", got, want)
	}
	checkPageAgainstJSON(t, dom, rep)

	shot, err := chromedp.Run(browser, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dir := os.Getenv("EVENTPIPE_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(stack.RepoRoot(), ".ci", "logs")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "statuspage.png")
	if err := os.WriteFile(file, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the status page: %s", file)
}

// TestServeMountsTheStatusPage asks the write side's HTTP API, with the
// status page mounted as `serve` mounts it (MountStatusPage as the
// write side's OperatorRoutes), for /status.json and /status: both
// answer with the write side's groups.
func TestServeMountsTheStatusPage(t *testing.T) {
	ep := rigs.Endpoints(t)
	ep.HTTPAddr = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	svc, err := eventpipe.NewWriteSide(context.Background(), eventpipe.WriteSideConfig{Process: eventpipe.Process{Endpoints: ep}, ConsumerGroup: testenv.UniqueName(t, "g"),
		NoAuth: true, OperatorRoutes: operator.MountStatusPage})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	base := rigs.ServeHTTP(t, svc)
	resp, err := http.Get(base + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep statuspage.Report
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil || resp.StatusCode != http.StatusOK || rep.Latest == nil {
		t.Fatalf("GET /status.json: %d, %v", resp.StatusCode, err)
	}
	var commands []string
	for _, g := range rep.Latest.Groups {
		if g.Kind == statuspage.KindCommands {
			commands = append(commands, g.Name)
		}
	}
	if len(commands) != len(eventpipe.Builtin().AggregateTypes()) || len(rep.Throughput) != len(commands) {
		t.Fatalf("command groups %v and throughput %+v, want one each per aggregate type", commands, rep.Throughput)
	}
	page, err := http.Get(base + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer page.Body.Close()
	body, err := io.ReadAll(page.Body)
	if err != nil || page.StatusCode != http.StatusOK || !strings.Contains(string(body), `data-group="`+commands[0]+`"`) {
		t.Fatalf("GET /status: %d %v, no row of group %s", page.StatusCode, err, commands[0])
	}
}

// chromiumPath returns Debian's chromium, failing t when it is missing.
func chromiumPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not installed (%v): the status page's browser test needs Debian's chromium; "+
			"`make test` and .ci/run install it, or run `apt-get install -y chromium`", err)
	}
	return p
}

// newBrowser starts headless chromium for t and returns its tab's context.
func newBrowser(t *testing.T, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1280, 1000))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	browser, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	if err := chromedp.Do(browser); err != nil { // starts chromium, with no timeout of its own
		t.Fatalf("start chromium %s: %v", path, err)
	}
	return browser
}

// statusDOM is what the page shows, read from its data-metric
// attributes: by group, aggregate type, relay stream, lease shard and
// saga, and the page-wide ones in Top.
type statusDOM struct {
	SampledAt string                       `json:"sampledAt"`
	Top       map[string]string            `json:"top"`
	Groups    map[string]map[string]string `json:"groups"`
	Types     map[string]map[string]string `json:"types"`
	Relays    map[string]map[string]string `json:"relays"`
	Leases    map[string]map[string]string `json:"leases"`
	Sagas     map[string]map[string]string `json:"sagas"`
	Chart     struct {
		Points      string `json:"points"`
		TotalPoints int    `json:"totalPoints"`
	} `json:"chart"`
}

const readDOM = `(() => {
  const metrics = (root) => {
    const m = {};
    for (const el of root.querySelectorAll('[data-metric]')) m[el.dataset.metric] = el.textContent.trim();
    return m;
  };
  const by = (selector, key) => {
    const out = {};
    for (const el of document.querySelectorAll(selector)) out[el.dataset[key]] = metrics(el);
    return out;
  };
  const top = {};
  for (const el of document.querySelectorAll('[data-metric]')) {
    if (!el.closest('tr, .relay')) top[el.dataset.metric] = el.textContent.trim();
  }
  const relays = {};
  for (const el of document.querySelectorAll('.relay[data-relay]')) {
    const m = {};
    for (const x of el.querySelectorAll('p [data-metric]')) m[x.dataset.metric] = x.textContent.trim();
    relays[el.dataset.relay] = m;
  }
  const chart = document.getElementById('throughput-chart');
  const total = document.querySelector('polyline[data-series="total"]');
  const pts = total ? total.getAttribute('points').trim() : '';
  return {
    sampledAt: document.getElementById('sampled-at').getAttribute('datetime'),
    top, relays,
    groups: by('tr[data-group]', 'group'),
    types: by('tr[data-aggregate-type]', 'aggregateType'),
    leases: by('tr[data-shard]', 'shard'),
    sagas: by('tr[data-saga]', 'saga'),
    chart: {points: chart ? chart.dataset.points : '', totalPoints: pts ? pts.split(' ').length : 0},
  };
})()`

// readStatusPage loads /status in the browser and reads it, and gets
// /status.json of the same sample (it tries again when a sample was
// taken in between).
func readStatusPage(t *testing.T, browser context.Context, base string) (statusDOM, statuspage.Report) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(browser, 30*time.Second)
		dom, err := chromedp.Run(ctx, func(ctx context.Context, tg *chromedp.Target) (statusDOM, error) {
			if _, err := chromedp.Navigate(base+"/status")(ctx, tg); err != nil {
				return statusDOM{}, err
			}
			return chromedp.Evaluate[statusDOM](readDOM)(ctx, tg)
		})
		cancel()
		if err != nil {
			t.Fatalf("read /status in chromium: %v", err)
		}
		resp, err := http.Get(base + "/status.json")
		if err != nil {
			t.Fatal(err)
		}
		var rep statuspage.Report
		err = json.NewDecoder(resp.Body).Decode(&rep)
		resp.Body.Close()
		if err != nil || rep.Latest == nil {
			t.Fatalf("GET /status.json: %d, %v", resp.StatusCode, err)
		}
		at, err := time.Parse(time.RFC3339Nano, dom.SampledAt)
		if err != nil {
			t.Fatalf("sampled-at %q: %v", dom.SampledAt, err)
		}
		if at.Equal(rep.Latest.At.Truncate(time.Millisecond)) {
			return dom, rep
		}
		if attempt == 10 {
			t.Fatalf("the page's sample (%s) is never /status.json's (%s)", at, rep.Latest.At)
		}
	}
}

// checkPageAgainstJSON compares every number of the page with the same
// sample's /status.json.
func checkPageAgainstJSON(t *testing.T, dom statusDOM, rep statuspage.Report) {
	t.Helper()
	s := rep.Latest
	var lag, poisoned, parked int64
	if len(dom.Groups) != len(s.Groups) {
		t.Errorf("the page shows %d groups, /status.json %d", len(dom.Groups), len(s.Groups))
	}
	for _, g := range s.Groups {
		lag, poisoned = lag+g.Lag, poisoned+g.Poisoned
		want := map[string]string{"topics": strconv.Itoa(len(g.Topics)), "committed": itoa(g.Committed), "newest": itoa(g.Newest),
			"lag": itoa(g.Lag), "poisoned": itoa(g.Poisoned)}
		switch {
		case g.Kind == statuspage.KindProjection && g.Parked != nil:
			want["parked"], want["parked-aggregates"] = itoa(g.Parked.Events), itoa(g.Parked.Aggregates)
			parked += g.Parked.Events
		case g.Kind == statuspage.KindProjection:
			want["parked"] = "?"
		}
		if g.Build != "" {
			want["build"] = g.Build
		}
		if len(g.DefinitionChanges) > 0 {
			want["definition-changes"] = strings.Join(g.DefinitionChanges, "; ")
		}
		if got := dom.Groups[g.Name]; !maps.Equal(got, want) {
			t.Errorf("group %s: the page shows %v, /status.json %v", g.Name, got, want)
		}
	}
	for _, tp := range rep.Throughput {
		want := map[string]string{"events-newest": itoa(tp.Newest), "events-per-minute": strconv.FormatFloat(tp.PerMinute, 'f', 1, 64),
			"events-in-history": itoa(tp.InHistory)}
		if got := dom.Types[tp.AggregateType]; !maps.Equal(got, want) {
			t.Errorf("aggregate type %s: the page shows %v, /status.json %v", tp.AggregateType, got, want)
		}
	}
	for _, rel := range s.Relays {
		want := map[string]string{"relay-leases": strconv.Itoa(len(rel.Leases)), "relay-poisoned": itoa(rel.Poisoned)}
		if rel.Err != "" {
			want["relay-error"] = "could not read: " + rel.Err
		}
		if got := dom.Relays[rel.Name]; !maps.Equal(got, want) {
			t.Errorf("relay %s: the page shows %v, /status.json %v", rel.Name, got, want)
		}
	}
	for _, sg := range s.Sagas {
		got := dom.Sagas[sg.Name]
		if sg.Err != "" {
			if !strings.Contains(got["saga-error"], sg.Err) {
				t.Errorf("saga %s: the page shows %v, /status.json the error %s", sg.Name, got, sg.Err)
			}
			continue
		}
		var finished int64
		for _, n := range sg.Finished {
			finished += n
		}
		for k, v := range map[string]int64{"running": sg.Running, "finished": finished, "timeouts": sg.Timeouts, "overdue": sg.Overdue, "effects": sg.Effects} {
			if got[k] != itoa(v) {
				t.Errorf("saga %s %s: the page shows %q, /status.json %d", sg.Name, k, got[k], v)
			}
		}
	}
	for k, v := range map[string]string{"total-lag": itoa(lag), "total-poisoned": itoa(poisoned), "total-parked": itoa(parked),
		"errors": strconv.Itoa(len(s.Errors)), "samples": strconv.Itoa(rep.Samples), "chart-points": strconv.Itoa(len(rep.Rates)),
		"build-version": rep.Build.Version, "build-go": rep.Build.GoVersion} {
		if dom.Top[k] != v {
			t.Errorf("%s: the page shows %q, /status.json %s", k, dom.Top[k], v)
		}
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
