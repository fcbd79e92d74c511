package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/order"
	migrate "github.com/eventpipe/eventpipe/migrations/dynamodb"
	"github.com/eventpipe/eventpipe/operator"
	"github.com/eventpipe/eventpipe/projections/elastic"
	"github.com/eventpipe/eventpipe/projections/searchmodels"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestSearchModelsFollowCommandsEndToEnd runs the whole pipeline into
// Elasticsearch: todo commands over HTTP and order commands through the
// dispatcher, the store, the relay, Kafka and both search models
// (eventpipe.NewConsumers). Every document reaches its aggregate's version;
// the search endpoints answer what the commands imply; bad search input is
// a 400 that changes nothing; and a replay from scratch (operator.Replay)
// swaps in documents equal to the live ones.
func TestSearchModelsFollowCommandsEndToEnd(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ep := rigs.Endpoints(t)
	ep.Postgres = rigs.MigratedPostgres(t) // parked_events: the search models park by default
	ep.LeasesTable = testenv.UniqueName(t, "leases")
	ep.HTTPAddr = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	if err := migrate.CreateLeasesTable(ctx, testenv.DynamoDB(t), ep.LeasesTable); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, testenv.DynamoDB(t), ep.LeasesTable) })
	es := testenv.Elasticsearch(t)
	t.Cleanup(func() {
		_, _ = esapi.IndicesDeleteRequest{Index: []string{strings.ToLower(ep.TopicPrefix) + "*"}}.Do(context.Background(), es)
	})
	var running []chan error
	run := func(f func(context.Context) error) {
		done := make(chan error, 1)
		running = append(running, done)
		go func() { done <- f(ctx) }()
	}
	defer func() {
		cancel()
		for _, done := range running {
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("stopped with %v", err)
			}
		}
	}()
	svc := rigs.NewService(t, ep, testenv.UniqueName(t, "g"))
	srv, err := svc.NewHTTP()
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	run(func(ctx context.Context) error { return srv.Run(ctx, ready) })
	base := "http://" + <-ready
	rl, err := eventpipe.NewRelay(ctx, eventpipe.RelayConfig{Process: eventpipe.Process{Endpoints: ep}, DiscoveryInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	run(rl.Run)
	models := []string{searchmodels.TodoSearch{}.Name(), searchmodels.OrderSearch{}.Name()}
	cons, err := eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{Process: eventpipe.Process{Endpoints: ep}, Names: models})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	run(cons.Run)

	// Todos over HTTP: created, some updated, some deleted.
	rng := rand.New(rand.NewPCG(21, 22))
	words := []string{"milk", "bread", "report", "garden", "invoice", "piano"}
	type todoState struct {
		title, message string
		version        int64
		deleted        bool
	}
	todos := map[string]*todoState{}
	for i := range 30 {
		id := fmt.Sprintf("todo-%02d", i)
		st := &todoState{title: words[rng.IntN(len(words))] + " list", message: "remember the " + words[rng.IntN(len(words))], version: 1}
		body, _ := json.Marshal(map[string]string{"id": id, "title": st.title, "message": st.message})
		if r := call(t, "POST", base+"/todo", "", string(body)); r.status != http.StatusCreated {
			t.Fatalf("create %s: %d %+v", id, r.status, r.err)
		}
		for range rng.IntN(3) {
			st.title = words[rng.IntN(len(words))] + " again"
			body, _ := json.Marshal(map[string]string{"title": st.title, "message": st.message})
			if r := call(t, "PUT", base+"/todo/"+id, strconv.Quote(strconv.FormatInt(st.version, 10)), string(body)); r.status != http.StatusOK {
				t.Fatalf("update %s: %d %+v", id, r.status, r.err)
			}
			st.version++
		}
		if rng.IntN(5) == 0 {
			if r := call(t, "DELETE", base+"/todo/"+id, strconv.Quote(strconv.FormatInt(st.version, 10)), ""); r.status != http.StatusNoContent {
				t.Fatalf("delete %s: %d %+v", id, r.status, r.err)
			}
			st.version, st.deleted = st.version+1, true
		}
		todos[id] = st
	}
	// Orders through the dispatcher, each taken to a random step.
	type orderState struct {
		status  order.Status
		total   int64
		version int64
	}
	orders := map[string]*orderState{}
	dispatch := func(typ, id string, payload any) {
		t.Helper()
		b, _ := json.Marshal(payload)
		cmd, err := svc.Catalog().NewCommand(typ, id, b)
		if err != nil {
			t.Fatal(err)
		}
		res, err := svc.Dispatcher.Dispatch(ctx, cmd)
		if err != nil || res.Status != commands.StatusAccepted {
			t.Fatalf("%s %s: %+v %v", typ, id, res, err)
		}
		orders[id].version = res.Version
	}
	for i := range 40 {
		id := fmt.Sprintf("order-%02d", i)
		st := &orderState{status: order.StatusPlaced, total: int64(500 * (1 + rng.IntN(20)))}
		orders[id] = st
		dispatch(order.PlaceOrder, id, order.OrderPlacedData{Customer: "c" + strconv.Itoa(i%4), Total: st.total})
		switch rng.IntN(4) {
		case 1:
			dispatch(order.ProcessPayment, id, order.PaymentProcessedData{Amount: st.total})
			st.status = order.StatusPaid
		case 2:
			dispatch(order.ProcessPayment, id, order.PaymentProcessedData{Amount: st.total})
			dispatch(order.ShipOrder, id, order.OrderShippedData{TrackingNumber: "T" + id})
			st.status = order.StatusShipped
		case 3:
			dispatch(order.ProcessPayment, id, order.PaymentProcessedData{Amount: st.total})
			dispatch(order.RefundOrder, id, order.OrderRefundedData{Amount: st.total})
			st.status = order.StatusRefunded
		}
	}

	todoAlias := elastic.Alias(ep.TopicPrefix, models[0])
	orderAlias := elastic.Alias(ep.TopicPrefix, models[1])
	wantVersions := func(alias string, want map[string]int64) {
		t.Helper()
		var got map[string]testenv.SearchDocument
		integration.AwaitProgress(t, alias+": documents at the versions of their aggregates", func() int64 {
			got = testenv.SearchDocuments(t, es, alias)
			var n int64
			for id, v := range want {
				if got[id].Version == v {
					n++
				}
			}
			return n
		}, int64(len(want)))
		if len(got) != len(want) {
			t.Fatalf("%s: %d documents, want %d", alias, len(got), len(want))
		}
	}
	todoVersions, orderVersions := map[string]int64{}, map[string]int64{}
	for id, st := range todos {
		todoVersions[id] = st.version
	}
	for id, st := range orders {
		orderVersions[id] = st.version
	}
	wantVersions(todoAlias, todoVersions)
	wantVersions(orderAlias, orderVersions)

	// GET /todo/search?q=<word> finds the live todos with the word.
	for _, word := range words {
		var want []string
		for id, st := range todos {
			if !st.deleted && (strings.Contains(st.title, word) || strings.Contains(st.message, word)) {
				want = append(want, id)
			}
		}
		var res searchmodels.TodoResult
		getJSON(t, base+"/todo/search?size=100&q="+word, http.StatusOK, &res)
		var got []string
		for _, d := range res.Todos {
			got = append(got, d.ID)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) || res.Total != int64(len(want)) {
			t.Errorf("search %q: %v (total %d), want %v", word, got, res.Total, want)
		}
	}
	// GET /todo/{id}?read=search answers from the index, ETag = sequence.
	for id, st := range todos {
		r := call(t, "GET", base+"/todo/"+id+"?read=search", "", "")
		if st.deleted {
			if r.status != http.StatusNotFound {
				t.Errorf("read=search of deleted %s: %d, want 404", id, r.status)
			}
			continue
		}
		if r.status != http.StatusOK || r.etag != strconv.Quote(strconv.FormatInt(st.version, 10)) || r.todo.Title != st.title {
			t.Errorf("read=search of %s: %d ETag %s %+v, want ETag %d and title %q", id, r.status, r.etag, r.todo, st.version, st.title)
		}
	}
	// GET /orders/search with a status and a minimum total, and its counts.
	const minTotal = 5000
	wantByStatus := map[string]int64{}
	var wantPaid []string
	for id, st := range orders {
		wantByStatus[string(st.status)]++
		if st.status == order.StatusPaid && st.total >= minTotal {
			wantPaid = append(wantPaid, id)
		}
	}
	var all searchmodels.OrderResult
	getJSON(t, base+"/orders/search?size=100", http.StatusOK, &all)
	if all.Total != 40 || !maps.Equal(all.ByStatus, wantByStatus) {
		t.Errorf("all orders: total %d by status %v, want 40 and %v", all.Total, all.ByStatus, wantByStatus)
	}
	var paid searchmodels.OrderResult
	getJSON(t, base+"/orders/search?status=paid&min_total="+strconv.Itoa(minTotal)+"&size=100", http.StatusOK, &paid)
	var gotPaid []string
	for _, o := range paid.Orders {
		gotPaid = append(gotPaid, o.ID)
	}
	slices.Sort(gotPaid)
	slices.Sort(wantPaid)
	if !slices.Equal(gotPaid, wantPaid) || paid.ByStatus["paid"] != int64(len(wantPaid)) {
		t.Errorf("paid orders of %d or more: %v by status %v, want %v", minTotal, gotPaid, paid.ByStatus, wantPaid)
	}

	// Bad input: a 400 naming the parameter, and nothing changes.
	before := testenv.SearchDocuments(t, es, todoAlias)
	for _, path := range []string{
		"/todo/search", "/todo/search?q=milk&size=-1", "/todo/search?q=milk&from=x", "/todo/search?q=milk&sort=title",
		"/orders/search?status=lost", "/orders/search?min_total=ten", "/orders/search?min_total=-5", "/orders/search?color=red",
		"/todo/todo-01?read=elsewhere",
	} {
		var e struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		getJSON(t, base+path, http.StatusBadRequest, &e)
		if e.Code == "" || e.Message == "" {
			t.Errorf("GET %s: 400 without a code and message: %+v", path, e)
		}
	}
	if after := testenv.SearchDocuments(t, es, todoAlias); !maps.Equal(after, before) {
		t.Errorf("bad search requests changed the todos index")
	}

	// A replay from scratch swaps in documents equal to the live ones.
	oldIndex, err := elastic.AliasTarget(ctx, es, todoAlias)
	if err != nil {
		t.Fatal(err)
	}
	res, err := operator.Replay(ctx, operator.ReplayConfig{Process: eventpipe.Process{Endpoints: ep}, ReadModel: models[0]})
	if err != nil {
		t.Fatal(err)
	}
	newIndex, err := elastic.AliasTarget(ctx, es, todoAlias)
	if err != nil || newIndex == oldIndex {
		t.Fatalf("the alias still points to %s after the replay (%v)", newIndex, err)
	}
	if after := testenv.SearchDocuments(t, es, todoAlias); !maps.Equal(after, before) {
		t.Errorf("the replayed todos index differs from the live one (%d documents, live %d)", len(after), len(before))
	}
	t.Logf("replayed %s: %d events into %s", models[0], res.Events, newIndex)
}

// getJSON GETs url, checks the status and decodes the body into v.
func getJSON(t *testing.T, u string, status int, v any) {
	t.Helper()
	if _, err := url.Parse(u); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("GET %s: %d, want %d: %s", u, resp.StatusCode, status, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v: %s", u, err, b)
	}
}
