package eventpipe_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe/analytics/analyticsapi"
	"github.com/eventpipe/eventpipe/internal/testenv"
	migrate "github.com/eventpipe/eventpipe/migrations/dynamodb"
)

// TestServeMountsTheAnalyticsAPI runs the write side's HTTP server (as
// `eventpipe serve` does) on a fresh analytics table: a batch posted to
// /sources/{id}/events is read back per session across the shards, and a
// bad event is a 400 that stores nothing.
func TestServeMountsTheAnalyticsAPI(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ep := testEndpoints(t)
	ep.AnalyticsTable = testenv.UniqueName(t, "analytics")
	ep.HTTPAddr = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	ddb := testenv.DynamoDB(t)
	if err := migrate.CreateAnalyticsTable(ctx, ddb, ep.AnalyticsTable); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, ddb, ep.AnalyticsTable) })
	svc := newService(t, ep, testenv.UniqueName(t, "g"))
	srv, err := svc.NewHTTP()
	if err != nil {
		t.Fatal(err)
	}
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() { done <- srv.Run(ctx, ready) }()
	defer func() { cancel(); <-done }()
	base := "http://" + <-ready

	post := func(body string) *http.Response {
		t.Helper()
		resp, err := http.Post(base+"/sources/my-site/events", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := post(`{"events":[{"type":"page_view","sessionId":"s1","url":"/"},{"type":"page_view","sessionId":"s2","url":"/blog"},
		{"type":"click","sessionId":"s1","properties":{"buttonId":"cta"}},{"type":"page_view","sessionId":"s1","url":"/pricing"}]}`); r.StatusCode != http.StatusCreated {
		t.Fatalf("POST a batch: %d", r.StatusCode)
	}
	if r := post(`{"events":[{"type":"page_view","sessionId":"s3"},{"type":"page_view"}]}`); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("POST a batch with an event without sessionId: %d, want 400", r.StatusCode)
	}
	var s1 analyticsapi.Events
	getJSON(t, base+"/sources/my-site/sessions/s1/events", http.StatusOK, &s1)
	var urls []string
	for _, e := range s1.Events {
		urls = append(urls, e.Type+" "+e.URL)
	}
	if got := strings.Join(urls, ","); got != "page_view /,click ,page_view /pricing" {
		t.Errorf("session s1's events: %q", got)
	}
	var s3 analyticsapi.Events
	getJSON(t, base+"/sources/my-site/sessions/s3/events", http.StatusOK, &s3)
	if len(s3.Events) != 0 {
		t.Errorf("the refused batch stored %d events of session s3", len(s3.Events))
	}
}
