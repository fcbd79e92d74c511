package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/analytics/analyticsapi"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestServeMountsTheAnalyticsAPI runs the write side's HTTP server (as
// `eventpipe serve` does) on a fresh analytics table: a batch posted to
// /sources/{id}/events is read back per session across the shards, a
// bad event is a 400 that stores nothing, and with the analytics relay and
// the aggregation consumer running, the session and the hourly counts
// follow over the same API.
func TestServeMountsTheAnalyticsAPI(t *testing.T) {
	r := newAnalyticsRig(t)
	ep := r.ep
	base := rigs.ServeHTTP(t, rigs.NewService(t, ep, testenv.UniqueName(t, "g")))

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

	// The analytics relay and the aggregation consumer, as `eventpipe
	// relay` and `eventpipe consume analytics` run them, turn the events
	// into sessions and aggregations that the same API reads.
	r.runRelay()
	r.runAggregator()

	var session analytics.Session
	integration.AwaitProgress(t, "events of session s1", func() int64 {
		resp, err := http.Get(base + "/sources/my-site/sessions/s1")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusOK {
			_ = json.NewDecoder(resp.Body).Decode(&session)
		}
		resp.Body.Close()
		return int64(session.EventCount)
	}, 3)
	if session.EventCount != 3 || session.EntryURL != "/" || session.ExitURL != "/pricing" {
		t.Errorf("session s1 = %+v, want 3 events from / to /pricing", session)
	}
	var hourly analyticsapi.Aggregations
	var events, pageViews, sessions int64
	integration.AwaitProgress(t, "events in the hourly aggregations", func() int64 {
		getJSON(t, base+"/sources/my-site/aggregations?period=hourly", http.StatusOK, &hourly)
		events, pageViews, sessions = 0, 0, 0
		for _, a := range hourly.Aggregations {
			events, pageViews, sessions = events+a.Events, pageViews+a.PageViews, sessions+a.Sessions
		}
		return events
	}, 4)
	if events != 4 || pageViews != 3 || sessions != 2 {
		t.Errorf("hourly aggregations %+v: %d events, %d page views, %d sessions; want 4, 3, 2", hourly.Aggregations, events, pageViews, sessions)
	}
}

// TestAnalyticsAndOrderAPIsBadInputWritesNothing sends the analytics
// ingestion and the order API every kind of bad request — malformed,
// null and oversized bodies, events without a type or session, a bad
// timestamp, an empty batch, an invalid source id, bad query parameters —
// and counts the items of the analytics and events tables before and
// after: each is refused with a 4xx and nothing is stored.
func TestAnalyticsAndOrderAPIsBadInputWritesNothing(t *testing.T) {
	ctx := context.Background()
	r := newAnalyticsRig(t)
	ep, ddb := r.ep, r.ddb
	base := rigs.ServeHTTP(t, rigs.NewService(t, ep, testenv.UniqueName(t, "g")))
	count := func(table string) int32 {
		out, err := ddb.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), Select: "COUNT", ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return out.Count
	}
	if r := call(t, "POST", base+"/sources/site/events", "", `{"type":"page_view","sessionId":"s1","url":"/"}`); r.status != http.StatusCreated {
		t.Fatalf("a good event: %+v", r)
	}
	analyticsBefore, eventsBefore := count(ep.AnalyticsTable), count(ep.EventsTable)
	if analyticsBefore == 0 {
		t.Fatal("the good event stored nothing")
	}
	huge := `{"events":[` + strings.Repeat(`{"type":"page_view","sessionId":"s1","url":"/`+strings.Repeat("x", 1000)+`"},`, 2000) + `{"type":"page_view","sessionId":"s1"}]}`
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/sources/site/events", `null`},
		{"POST", "/sources/site/events", `{`},
		{"POST", "/sources/site/events", `[]`},
		{"POST", "/sources/site/events", `{"events":[]}`},
		{"POST", "/sources/site/events", `{"sessionId":"s1"}`},
		{"POST", "/sources/site/events", `{"type":"page_view"}`},
		{"POST", "/sources/site/events", `{"type":"page_view","sessionId":"s1","timestamp":"yesterday"}`},
		{"POST", "/sources/site/events", `{"events":[{"type":"page_view","sessionId":"s2"},{"type":"page_view","sessionId":""}]}`},
		{"POST", "/sources/site/events", huge},
		{"POST", "/sources/" + strings.Repeat("s", 300) + "/events", `{"type":"page_view","sessionId":"s1"}`},
		{"POST", "/sources/si%23te/events", `{"type":"page_view","sessionId":"s1"}`},
		{"GET", "/sources/site/aggregations?period=weekly", ""},
		{"GET", "/orders/rollups?period=yearly", ""},
		{"GET", "/orders/rollups?period=hourly&from=tomorrow", ""},
		{"GET", "/orders/search?min_total=lots", ""},
		{"POST", "/orders/search", `{"q":"x"}`},
	} {
		r := call(t, c.method, base+c.path, "", c.body)
		if r.status < 400 || r.status >= 500 {
			t.Errorf("%s %s %.60s: %d; want a 4xx refusal", c.method, c.path, c.body, r.status)
		}
	}
	if n, m := count(ep.AnalyticsTable), count(ep.EventsTable); n != analyticsBefore || m != eventsBefore {
		t.Fatalf("bad requests changed the tables: analytics %d → %d items, events %d → %d", analyticsBefore, n, eventsBefore, m)
	}
}
