package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/analytics/analyticsapi"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/endpoints"
	migrate "github.com/eventpipe/eventpipe/migrations/dynamodb"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// envAnalyticsChild makes the test binary a child process (runAnalyticsChildIfRequested):
// "serve" runs the write side's HTTP API (as `eventpipe serve` does),
// "aggregator" the analytics aggregation consumer (as `eventpipe consume
// analytics` does), both from the endpoints in the environment.
const envAnalyticsChild = "EVENTPIPE_TEST_ANALYTICS_CHILD"

// runAnalyticsChildIfRequested runs, from TestMain, the body of the child
// processes the analytics kill test starts, when the environment asks for
// one; it does not return then.
func runAnalyticsChildIfRequested() {
	mode := os.Getenv(envAnalyticsChild)
	if mode == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ep := endpoints.FromEnv()
	err := func() error {
		switch mode {
		case "serve":
			svc, err := eventpipe.NewWriteSide(ctx, eventpipe.WriteSideConfig{Process: eventpipe.Process{Endpoints: ep}, ConsumerGroup: ep.TopicPrefix + "serve", NoAuth: true})
			if err != nil {
				return err
			}
			defer svc.Close()
			srv, err := svc.NewHTTP()
			if err != nil {
				return err
			}
			return srv.Run(ctx, make(chan string, 1))
		case "aggregator":
			c, err := eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{Process: eventpipe.Process{Endpoints: ep}, Names: []string{eventpipe.AnalyticsAggregator}})
			if err != nil {
				return err
			}
			defer c.Close()
			return c.Run(ctx)
		}
		return fmt.Errorf("unknown child mode %q", mode)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "analytics child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// analyticsRig is the HTTP API on a fresh analytics table, with the
// analytics relay running in the test process.
type analyticsRig struct {
	t   *testing.T
	ep  endpoints.Endpoints
	ddb *dynamodb.Client
}

func newAnalyticsRig(t *testing.T) *analyticsRig {
	t.Helper()
	ctx := context.Background()
	ep := rigs.Endpoints(t)
	ddb := testenv.DynamoDB(t)
	ep.AnalyticsTable = testenv.UniqueName(t, "analytics")
	ep.LeasesTable = testenv.UniqueName(t, "leases")
	ep.HTTPAddr = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	if err := migrate.CreateAnalyticsTable(ctx, ddb, ep.AnalyticsTable); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, ddb, ep.AnalyticsTable) })
	if err := migrate.CreateLeasesTable(ctx, ddb, ep.LeasesTable); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, ddb, ep.LeasesTable) })
	return &analyticsRig{t: t, ep: ep, ddb: ddb}
}

// runRelay runs the analytics table's relay until t ends.
func (r *analyticsRig) runRelay() {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rel, err := eventpipe.NewRelay(ctx, eventpipe.RelayConfig{Process: eventpipe.Process{Endpoints: r.ep}, Stream: eventpipe.RelayAnalytics, DiscoveryInterval: 200 * time.Millisecond})
	if err != nil {
		r.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = rel.Run(ctx) }()
	r.t.Cleanup(func() { cancel(); <-done; rel.Close() })
}

// runAggregator runs the analytics aggregation consumer (as `eventpipe
// consume analytics` does) until t ends.
func (r *analyticsRig) runAggregator() {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	consumers, err := eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{Process: eventpipe.Process{Endpoints: r.ep}, Names: []string{eventpipe.AnalyticsAggregator}})
	if err != nil {
		cancel()
		r.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = consumers.Run(ctx) }()
	r.t.Cleanup(func() { cancel(); <-done; consumers.Close() })
}

// eventItems counts the raw event items of the table (strongly
// consistent), and those of ids when ids is not nil.
func (r *analyticsRig) eventItems(ids map[string]bool) (all, of int) {
	r.t.Helper()
	p := dynamodb.NewScanPaginator(r.ddb, &dynamodb.ScanInput{
		TableName: aws.String(r.ep.AnalyticsTable), ConsistentRead: aws.Bool(true),
		FilterExpression:          aws.String("begins_with(sk, :e)"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":e": &ddbtypes.AttributeValueMemberS{Value: analytics.SKEventPrefix}},
		ProjectionExpression:      aws.String("eventId"),
	})
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		if err != nil {
			r.t.Fatalf("scan: %v", err)
		}
		for _, it := range out.Items {
			all++
			if v, ok := it["eventId"].(*ddbtypes.AttributeValueMemberS); ok && ids[v.Value] {
				of++
			}
		}
	}
	return all, of
}

// counted sums the events of source's aggregations of period.
func (r *analyticsRig) counted(source string, period analytics.Period) int64 {
	r.t.Helper()
	store, err := analytics.New(analytics.Config{Client: r.ddb, Table: r.ep.AnalyticsTable})
	if err != nil {
		r.t.Fatal(err)
	}
	var n int64
	cursor := ""
	for {
		aggs, next, err := store.Aggregations(context.Background(), source, period, analytics.MaxPageSize, cursor)
		if err != nil {
			r.t.Fatal(err)
		}
		for _, a := range aggs {
			n += a.Events
		}
		if cursor = next; cursor == "" {
			return n
		}
	}
}

// waitCounted waits until the hourly and daily aggregations of source
// count want events (failing when their counts stop moving for
// integration.HangAfter), then 3 s more, and fails unless they count
// exactly want.
func (r *analyticsRig) waitCounted(source string, want int64) {
	r.t.Helper()
	integration.AwaitProgress(r.t, fmt.Sprintf("events of %s counted by the daily and hourly aggregations, %d each", source, want), func() int64 {
		return min(r.counted(source, analytics.Daily), want) + min(r.counted(source, analytics.Hourly), want)
	}, 2*want)
	time.Sleep(3 * time.Second) // a copy would arrive now
	if d, h := r.counted(source, analytics.Daily), r.counted(source, analytics.Hourly); d != want || h != want {
		t := r.t
		t.Errorf("the aggregations count %d daily and %d hourly events, want exactly %d", d, h, want)
	}
}

// clientBatch is n events with client ids in sessions of 10, session
// ids prefixed with tag.
func clientBatch(tag string, n int) []map[string]any {
	events := make([]map[string]any, n)
	for i := range events {
		events[i] = map[string]any{"eventId": ulid.Make().String(), "type": "page_view", "sessionId": fmt.Sprintf("%s-s%d", tag, i/10), "url": "/p/" + strconv.Itoa(i)}
	}
	return events
}

func idsOf(events []map[string]any) map[string]bool {
	ids := map[string]bool{}
	for _, e := range events {
		ids[e["eventId"].(string)] = true
	}
	return ids
}

// postEvents posts {"events": events} with key as Idempotency-Key (when
// not empty) on a connection of its own; it returns the status and the
// decoded answer, or the transport error.
func postEvents(base, source, key string, events []map[string]any) (int, analyticsapi.Ingested, error) {
	var out analyticsapi.Ingested
	body, err := json.Marshal(map[string]any{"events": events})
	if err != nil {
		return 0, out, err
	}
	req, err := http.NewRequest(http.MethodPost, base+"/sources/"+source+"/events", bytes.NewReader(body))
	if err != nil {
		return 0, out, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(analyticsapi.HeaderIdempotencyKey, key)
	}
	// Bounded only against a hang: a loaded machine's serve may take long
	// to answer a batch, and the test asserts what it answers, not when.
	client := &http.Client{Timeout: integration.HangAfter(), Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return 0, out, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, out, err
	}
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out, nil
}

// TestAnalyticsEventIDsAreStoredAndCountedOnceHoweverPostedAndBatched
// posts a batch of 60 events with client ids to the write side's HTTP
// API five times, then the same events re-batched (chunks of 7, shuffled,
// posted concurrently), with the analytics relay and the aggregation
// consumer running: the table holds each event once, the first post
// answers 60 stored and every later one 60 duplicates with the same ids
// and shards, and the hourly and daily aggregations count each event
// once. A batch with an eventId that is not a ULID is a 400 that stores
// nothing.
func TestAnalyticsEventIDsAreStoredAndCountedOnceHoweverPostedAndBatched(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	const source = "retry-site"
	r := newAnalyticsRig(t)
	base := rigs.ServeHTTP(t, rigs.NewService(t, r.ep, testenv.UniqueName(t, "g")))
	r.runRelay()
	r.runAggregator()

	events := clientBatch("a", 60)
	var first analyticsapi.Ingested
	for post := range 5 {
		status, out, err := postEvents(base, source, "", events)
		if err != nil || status != http.StatusCreated {
			t.Fatalf("post %d: %d %v %+v", post+1, status, err, out)
		}
		wantStored, wantDup := 60, 0
		if post > 0 {
			wantStored, wantDup = 0, 60
		}
		if out.Stored != wantStored || out.Duplicates != wantDup || out.Failed != 0 || len(out.Results) != 60 || len(out.Events) != 60 {
			t.Fatalf("post %d: stored %d duplicates %d failed %d (%d results, %d events); want %d, %d, 0", post+1, out.Stored, out.Duplicates, out.Failed, len(out.Results), len(out.Events), wantStored, wantDup)
		}
		if post == 0 {
			first = out
			continue
		}
		for i, res := range out.Results {
			if f := first.Results[i]; res.Index != i || res.EventID != events[i]["eventId"] || res.EventID != f.EventID || res.Shard != f.Shard || !res.CreatedAt.Equal(f.CreatedAt) {
				t.Fatalf("post %d, event %d: %+v; the first post answered %+v", post+1, i, res, f)
			}
		}
	}
	// The same events again, batched differently and concurrently.
	order := rand.Perm(len(events))
	var chunks [][]map[string]any
	for start := 0; start < len(order); start += 7 {
		var chunk []map[string]any
		for _, i := range order[start:min(start+7, len(order))] {
			chunk = append(chunk, events[i])
		}
		chunks = append(chunks, chunk, chunk[:len(chunk)/2+1])
	}
	var pw sync.WaitGroup
	var dups atomic.Int64
	for _, chunk := range chunks {
		pw.Add(1)
		go func() {
			defer pw.Done()
			status, out, err := postEvents(base, source, "", chunk)
			if err != nil || status != http.StatusCreated || out.Duplicates != len(chunk) {
				t.Errorf("re-batched post of %d: %d %v %+v", len(chunk), status, err, out)
			}
			dups.Add(int64(out.Duplicates))
		}()
	}
	pw.Wait()
	all, of := r.eventItems(idsOf(events))
	if all != 60 || of != 60 {
		t.Fatalf("the table holds %d event items, %d of the batch; want 60 and 60", all, of)
	}
	t.Logf("5 posts of the batch and %d re-batched posts: 60 event items, %d duplicates reported", len(chunks), dups.Load()+4*60)

	// An eventId that is not a ULID refuses the batch.
	bad := clientBatch("bad", 3)
	bad[1]["eventId"] = "not-a-ulid"
	if status, out, err := postEvents(base, source, "", bad); err != nil || status != http.StatusBadRequest || !bytes.Contains([]byte(out.Message), []byte("eventId")) {
		t.Errorf("a batch with a bad eventId: %d %v %+v; want 400 naming eventId", status, err, out)
	}
	if all, _ := r.eventItems(nil); all != 60 {
		t.Errorf("the refused batch changed the table to %d event items", all)
	}
	r.waitCounted(source, 60)
}

// killProxy forwards the child's DynamoDB requests to DynamoDB and, when
// armed, kills the child with SIGKILL right after the armed number of
// PutItem answers came back to it: a kill in the middle of a POST, some
// of its events written and some not.
type killProxy struct {
	mu      sync.Mutex
	child   *exec.Cmd
	killAt  int // PutItems to let through; 0: disarmed
	puts    int
	killed  chan int // the puts let through, per kill
	forward http.RoundTripper
}

func (p *killProxy) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := p.forward.RoundTrip(req)
	if err != nil || req.Header.Get("X-Amz-Target") != "DynamoDB_20120810.PutItem" {
		return resp, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.killAt == 0 {
		return resp, err
	}
	if p.puts++; p.puts == p.killAt {
		_ = p.child.Process.Signal(syscall.SIGKILL)
		p.killAt = 0
		p.killed <- p.puts
	}
	return resp, err
}

func (p *killProxy) arm(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.killAt, p.puts = n, 0
}

// TestAnalyticsKilledServeStoresAndCountsRetriedBatchesOnce is issue
// 27's kill test. `serve` (the write side's HTTP API) runs as a child
// process whose DynamoDB requests pass through a proxy in the test; the
// aggregation consumer runs as another child. Each of five rounds posts
// a batch of 60 events — with client eventIds, or (round 3) without ids
// under an Idempotency-Key — and the proxy SIGKILLs serve after a random
// 5–40 of the batch's PutItem calls were answered, twice per round (the
// first post and the first retry). Each kill must land mid-request: the
// client sees the connection dropped, and the table holds some but not
// all of the batch. The batch is then posted until it is answered 201,
// and the aggregator, once it has counted events, is killed at a random
// moment while the relay delivers the events just stored (most of its
// kills must find events stored but not counted yet). In the end each round's 60 events are stored
// once (the key round's ids are those of its 201, which a replay answers
// identically) and the aggregations count 300 events exactly; the key
// with another body answers 422 and stores nothing.
func TestAnalyticsKilledServeStoresAndCountsRetriedBatchesOnce(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	const (
		source = "kill-site"
		rounds = 5
		batch  = 60
		keyRnd = 2
	)
	r := newAnalyticsRig(t)
	proxy := &killProxy{killed: make(chan int, 1), forward: http.DefaultTransport}
	target, err := url.Parse(r.ep.DynamoDB)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = proxy
	rp.ErrorLog = log.New(io.Discard, "", 0) // the requests of a killed child end mid-way
	ps := httptest.NewServer(rp)
	defer ps.Close()

	childEnv := func(mode, dynamo string) []string {
		return append(os.Environ(), envAnalyticsChild+"="+mode, "EVENTPIPE_LOG_LEVEL=warn",
			endpoints.EnvDynamoDB+"="+dynamo, endpoints.EnvHTTPAddr+"="+r.ep.HTTPAddr,
			endpoints.EnvEventsTable+"="+r.ep.EventsTable, endpoints.EnvAnalyticsTable+"="+r.ep.AnalyticsTable,
			endpoints.EnvKeysTable+"="+r.ep.KeysTable, endpoints.EnvTopicPrefix+"="+r.ep.TopicPrefix)
	}
	start := func(mode, dynamo string) *exec.Cmd {
		cmd := exec.Command(os.Args[0])
		cmd.Env = childEnv(mode, dynamo)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	var (
		children sync.Mutex
		serve    *exec.Cmd
		agg      *exec.Cmd
	)
	startServe := func() {
		children.Lock()
		defer children.Unlock()
		proxy.mu.Lock()
		serve = start("serve", ps.URL)
		proxy.child = serve
		proxy.mu.Unlock()
	}
	startServe()
	agg = start("aggregator", r.ep.DynamoDB)
	t.Cleanup(func() {
		children.Lock()
		defer children.Unlock()
		for _, c := range []*exec.Cmd{serve, agg} {
			_ = c.Process.Kill()
			_, _ = c.Process.Wait()
		}
	})
	r.runRelay()
	base := "http://" + r.ep.HTTPAddr

	type killNote struct {
		round, putsLetThrough, itemsOfBatch int
		clientErr                           string
	}
	var kills []killNote
	var aggKills [][2]int64 // events counted, event items stored
	var lastAggKill int64
	// postUntilCreated posts until 201 (serve may be restarting).
	postUntilCreated := func(key string, events []map[string]any) analyticsapi.Ingested {
		t.Helper()
		var created analyticsapi.Ingested
		integration.Await(t, "a 201 to the post", func() error {
			status, out, err := postEvents(base, source, key, events)
			if err == nil && status == http.StatusCreated {
				created = out
				return nil
			}
			if err == nil && status != http.StatusServiceUnavailable {
				t.Fatalf("post: %d %+v", status, out)
			}
			return fmt.Errorf("%d %v %+v", status, err, out)
		})
		return created
	}
	var keyAnswer analyticsapi.Ingested
	var keyEvents []map[string]any
	keyName := "order-" + ulid.Make().String()
	for round := range rounds {
		events := clientBatch("r"+strconv.Itoa(round), batch)
		key := ""
		if round == keyRnd {
			key = keyName
			for _, e := range events {
				delete(e, "eventId")
			}
			keyEvents = events
		}
		for attempt := range 2 {
			// Wait until serve answers, then arm the proxy and post.
			postUntilCreated("", []map[string]any{{"eventId": ulid.Make().String(), "type": "ping", "sessionId": "warmup-" + strconv.Itoa(round*2+attempt)}})
			proxy.arm(5 + rand.IntN(36))
			status, out, err := postEvents(base, source, key, events)
			if err == nil {
				t.Fatalf("round %d, attempt %d: the post was answered %d %+v; the kill should have dropped it", round, attempt, status, out)
			}
			let := <-proxy.killed
			children.Lock()
			_, _ = serve.Process.Wait()
			children.Unlock()
			n := 0
			if key == "" {
				_, n = r.eventItems(idsOf(events))
			} else {
				n = r.sessionItems(source, "r"+strconv.Itoa(round)+"-")
			}
			kills = append(kills, killNote{round: round, putsLetThrough: let, itemsOfBatch: n, clientErr: err.Error()})
			if attempt == 0 && (n == 0 || n >= batch) {
				t.Errorf("round %d: killed with %d of the batch's %d events stored; want some but not all", round, n, batch)
			}
			startServe()
		}
		// Once the running aggregator has counted events, the batch is
		// posted until 201, and the aggregator killed at a random moment
		// while the events just stored come in.
		integration.Await(t, fmt.Sprintf("round %d: the running aggregator to count events", round), func() error {
			if n := r.counted(source, analytics.Daily); n <= lastAggKill {
				return fmt.Errorf("%d events counted, as at the last kill", n)
			}
			return nil
		})
		out := postUntilCreated(key, events)
		time.Sleep(time.Duration(rand.IntN(150)) * time.Millisecond)
		children.Lock()
		_ = agg.Process.Signal(syscall.SIGKILL)
		_, _ = agg.Process.Wait()
		lastAggKill = r.counted(source, analytics.Daily)
		stored, _ := r.eventItems(nil)
		aggKills = append(aggKills, [2]int64{lastAggKill, int64(stored)})
		agg = start("aggregator", r.ep.DynamoDB)
		children.Unlock()
		if out.Stored+out.Duplicates != batch || out.Failed != 0 {
			t.Fatalf("round %d: the 201 has %d stored, %d duplicates, %d failed", round, out.Stored, out.Duplicates, out.Failed)
		}
		ids := map[string]bool{}
		for _, res := range out.Results {
			ids[res.EventID] = true
		}
		if key == "" && out.Duplicates == 0 {
			t.Errorf("round %d: the retry after two kills found no duplicates", round)
		}
		if key != "" {
			keyAnswer = out
		}
		if _, n := r.eventItems(ids); n != batch || len(ids) != batch {
			t.Fatalf("round %d: %d of the 201's %d ids are stored", round, n, len(ids))
		}
	}
	t.Logf("serve kills (round, PutItems answered, the batch's items stored then, what the client saw): %+v", kills)
	t.Logf("aggregator kills at [events counted, event items stored]: %v", aggKills)
	inFlight := 0
	for _, k := range aggKills {
		if k[0] < k[1] {
			inFlight++
		}
	}
	if inFlight*2 <= len(aggKills) {
		t.Errorf("only %d of %d aggregator kills found events stored but not counted yet: %v", inFlight, len(aggKills), aggKills)
	}

	// The key round: a replay answers as the 201 did; another body under
	// the key is a 422 and stores nothing.
	status, replay, err := postEvents(base, source, keyName, keyEvents)
	if err != nil || status != http.StatusCreated {
		t.Fatalf("replay of the key: %d %v", status, err)
	}
	a, b := mustJSON(t, keyAnswer.Results), mustJSON(t, replay.Results)
	if a != b {
		t.Errorf("the replay answered\n%s\nthe 201 after the kills\n%s", b, a)
	}
	before, _ := r.eventItems(nil)
	other := append([]map[string]any{{"type": "click", "sessionId": "r2-s0"}}, keyEvents[1:]...)
	if status, out, err := postEvents(base, source, keyName, other); err != nil || status != http.StatusUnprocessableEntity || out.Code != "idempotency_key_reused" {
		t.Errorf("the key with another body: %d %v %+v; want 422 idempotency_key_reused", status, err, out)
	}
	if after, _ := r.eventItems(nil); after != before {
		t.Errorf("the 422 changed the table from %d to %d event items", before, after)
	}
	warmups := 2 * rounds
	if all, _ := r.eventItems(nil); all != rounds*batch+warmups {
		t.Fatalf("the table holds %d event items, want %d (%d batches of %d and %d pings)", all, rounds*batch+warmups, rounds, batch, warmups)
	}
	r.waitCounted(source, int64(rounds*batch+warmups))
	// The aggregations can be complete while a session is not yet: the
	// aggregator writes a batch's sessions after its aggregations, and the
	// last kill may land between the two; the restarted aggregator
	// completes the session once the group has let it in again (after
	// the killed member's session timeout). So wait for every session,
	// then check that none counts more.
	sessionCounts := func() (wrong []string) {
		for round := range rounds {
			for s := range batch / 10 {
				var sess analytics.Session
				getJSONRetry(t, fmt.Sprintf("%s/sources/%s/sessions/r%d-s%d", base, source, round, s), &sess)
				if sess.EventCount != 10 {
					wrong = append(wrong, fmt.Sprintf("r%d-s%d counts %d", round, s, sess.EventCount))
				}
			}
		}
		return wrong
	}
	integration.Await(t, "every session at 10 events", func() error {
		if wrong := sessionCounts(); len(wrong) > 0 {
			return fmt.Errorf("sessions differ from 10 events each: %v", wrong)
		}
		return nil
	})
	time.Sleep(3 * time.Second) // a copy would arrive now
	if wrong := sessionCounts(); len(wrong) > 0 {
		t.Errorf("sessions differ from 10 events each: %v", wrong)
	}
}

// sessionItems counts the event items of source whose session id
// starts with prefix (the key round's events, whose ids the test does
// not know before the 201).
func (r *analyticsRig) sessionItems(source, prefix string) int {
	r.t.Helper()
	n := 0
	p := dynamodb.NewScanPaginator(r.ddb, &dynamodb.ScanInput{
		TableName: aws.String(r.ep.AnalyticsTable), ConsistentRead: aws.Bool(true),
		FilterExpression: aws.String("begins_with(sk, :e) AND begins_with(sessionId, :s) AND sourceId = :src"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":e": &ddbtypes.AttributeValueMemberS{Value: analytics.SKEventPrefix}, ":s": &ddbtypes.AttributeValueMemberS{Value: prefix},
			":src": &ddbtypes.AttributeValueMemberS{Value: source},
		},
		Select: ddbtypes.SelectCount,
	})
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		if err != nil {
			r.t.Fatalf("scan: %v", err)
		}
		n += int(out.Count)
	}
	return n
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// getJSONRetry GETs u until it answers 200 (a session the aggregator
// has not written yet is a 404) and decodes it into v.
func getJSONRetry(t *testing.T, u string, v any) {
	t.Helper()
	integration.Await(t, "GET "+u+" to answer 200", func() error {
		resp, err := http.Get(u)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", u, resp.Status)
		}
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
		return nil
	})
}
