package analyticsapi_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/analytics/analyticsapi"
)

// TestSessionEventsPageWithALimitAndACursor posts more events of one
// session than a page holds (spread over the shards, between events of
// another session) and reads them back page by page: every page at most
// the limit, the pages together every event of the session once, in
// order; a bad limit or a cursor this listing did not return is 400.
func TestSessionEventsPageWithALimitAndACursor(t *testing.T) {
	a := newAPI(t, "")
	const total, limit = 23, 5
	start := time.Now().Add(-time.Hour).UTC()
	var batch []string
	for i := range total {
		at := start.Add(time.Duration(i) * time.Second).Format(time.RFC3339)
		batch = append(batch,
			fmt.Sprintf(`{"type":"page_view","sessionId":"s1","url":"/p%02d","createdAt":%q}`, i, at),
			fmt.Sprintf(`{"type":"page_view","sessionId":"s2","url":"/other%02d","createdAt":%q}`, i, at))
	}
	var posted analyticsapi.Ingested
	if status, body := a.do("POST", "/sources/site/events", `{"events":[`+strings.Join(batch, ",")+`]}`, &posted); status != http.StatusCreated {
		t.Fatalf("POST: %d %s", status, body)
	}

	var urls, ids []string
	cursor, pages := "", 0
	for {
		path := fmt.Sprintf("/sources/site/sessions/s1/events?limit=%d", limit)
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		var page analyticsapi.Events
		if status, body := a.do("GET", path, "", &page); status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, status, body)
		}
		if pages++; pages > total {
			t.Fatalf("more than %d pages: the cursor does not advance", total)
		}
		if len(page.Events) > limit {
			t.Fatalf("page %d has %d events, limit %d", pages, len(page.Events), limit)
		}
		for _, e := range page.Events {
			if e.SessionID != "s1" {
				t.Fatalf("page %d holds an event of session %s", pages, e.SessionID)
			}
			urls, ids = append(urls, e.URL), append(ids, e.EventID)
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	var want []string
	for i := range total {
		want = append(want, fmt.Sprintf("/p%02d", i))
	}
	if got := strings.Join(urls, ","); got != strings.Join(want, ",") {
		t.Errorf("the pages' events:\n got %s\nwant %s", got, strings.Join(want, ","))
	}
	for i := 1; i < len(ids); i++ {
		if ids[i-1] >= ids[i] {
			t.Errorf("event ids out of order or repeated at %d: %s then %s", i, ids[i-1], ids[i])
		}
	}
	if wantPages := (total + limit - 1) / limit; pages != wantPages {
		t.Errorf("%d pages, want %d", pages, wantPages)
	}

	// A cursor of another session's listing, or of the sessions listing,
	// is not one of this listing.
	var other analyticsapi.Events
	if status, body := a.do("GET", "/sources/site/sessions/s2/events?limit=1", "", &other); status != http.StatusOK || other.Next == "" {
		t.Fatalf("GET s2's first event: %d %s", status, body)
	}
	for path, field := range map[string]string{
		"/sources/site/sessions/s1/events?limit=0":                               "limit",
		"/sources/site/sessions/s1/events?limit=-1":                              "limit",
		"/sources/site/sessions/s1/events?limit=x":                               "limit",
		"/sources/site/sessions/s1/events?limit=1001":                            "limit",
		"/sources/site/sessions/s1/events?cursor=%21%21":                         "cursor",
		"/sources/site/sessions/s1/events?cursor=bm9wZQ":                         "cursor",
		"/sources/site/sessions/s1/events?cursor=" + url.QueryEscape(other.Next): "cursor",
	} {
		status, body := a.do("GET", path, "", nil)
		if status != http.StatusBadRequest || !strings.Contains(body, "invalid "+field) {
			t.Errorf("GET %s: %d %s, want 400 naming %s", path, status, body, field)
		}
	}
}
