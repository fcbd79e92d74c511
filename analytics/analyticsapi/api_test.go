package analyticsapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/analytics/analyticsapi"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/httpapi"
	"github.com/eventpipe/eventpipe/httpapi/auth"
	migrations "github.com/eventpipe/eventpipe/migrations/dynamodb"
	"github.com/eventpipe/eventpipe/privacy"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// api is a test server with the analytics API on a fresh table.
type api struct {
	t     *testing.T
	url   string
	db    *ddb.Client
	table string
}

// newAPI serves the analytics API on table (a fresh one when empty) with
// a body limit of 4 KiB; a request's X-Subject header, when set, is its
// authenticated subject.
func newAPI(t *testing.T, table string) *api {
	t.Helper()
	return newAPIWith(t, table, nil)
}

// newAPIWith is newAPI with keys sealing the users' personal fields
// (nil: none).
func newAPIWith(t *testing.T, table string, keys *privacy.KeyStore) *api {
	t.Helper()
	db := testenv.DynamoDB(t)
	if table == "" {
		table = testenv.UniqueName(t, "analytics")
		if err := migrations.CreateAnalyticsTable(context.Background(), db, table); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { testenv.DeleteTable(t, db, table) })
	}
	store, err := analytics.New(analytics.Config{Client: db, Table: table, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := httpapi.New(httpapi.Config{MaxBodyBytes: 4 << 10, Middleware: func(next http.Handler) http.Handler {
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
	if err := analyticsapi.Mount(srv, analyticsapi.Config{Store: store}); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &api{t: t, url: ts.URL, db: db, table: table}
}

// do sends a request and decodes a JSON answer into out (when not nil);
// it returns the status and the raw body.
func (a *api) do(method, path, body string, out any) (int, string) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.url+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	if out != nil && res.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			a.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return res.StatusCode, string(b)
}

func (a *api) put(items ...map[string]types.AttributeValue) {
	a.t.Helper()
	for _, it := range items {
		if _, err := a.db.PutItem(context.Background(), &ddb.PutItemInput{TableName: aws.String(a.table), Item: it}); err != nil {
			a.t.Fatal(err)
		}
	}
}

func (a *api) count() int32 {
	a.t.Helper()
	out, err := a.db.Scan(context.Background(), &ddb.ScanInput{TableName: aws.String(a.table), Select: types.SelectCount, ConsistentRead: aws.Bool(true)})
	if err != nil {
		a.t.Fatal(err)
	}
	return out.Count
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// TestPostSingleEventAndBatchThenReadTheSessionsEvents posts one event
// and a batch of three and reads the session's four events back in
// order.
func TestPostSingleEventAndBatchThenReadTheSessionsEvents(t *testing.T) {
	a := newAPI(t, "")
	var one, three analyticsapi.Ingested
	created := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	status, body := a.do("POST", "/sources/my-site/events",
		`{"type":"page_view","sessionId":"s1","url":"/","createdAt":"`+created+`","properties":{"utm":"x"}}`, &one)
	if status != http.StatusCreated || len(one.Events) != 1 || one.Events[0].EventID == "" {
		t.Fatalf("single event: %d %s", status, body)
	}
	if got := one.Events[0].CreatedAt.Format(time.RFC3339); got != created {
		t.Errorf("createdAt %s, want %s", got, created)
	}
	status, body = a.do("POST", "/sources/my-site/events", `{"events":[
		{"type":"click","sessionId":"s1","userId":"u1","properties":{"buttonId":"cta"}},
		{"type":"page_view","sessionId":"s2","url":"/other"},
		{"type":"signup","sessionId":"s1","userId":"u1","url":"/pricing","referrer":"https://example.com","userAgent":"ua"}]}`, &three)
	if status != http.StatusCreated || len(three.Events) != 3 {
		t.Fatalf("batch: %d %s", status, body)
	}
	var events analyticsapi.Events
	if status, body := a.do("GET", "/sources/my-site/sessions/s1/events", "", &events); status != http.StatusOK {
		t.Fatalf("GET events: %d %s", status, body)
	}
	var got []string
	for _, e := range events.Events {
		got = append(got, e.Type+" "+e.EventID)
	}
	want := []string{"page_view " + one.Events[0].EventID, "click " + three.Events[0].EventID, "signup " + three.Events[2].EventID}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("session s1 events %v, want %v", got, want)
	}
	if p := events.Events[1].Properties["buttonId"]; p != "cta" {
		t.Errorf("properties %v, want buttonId cta", events.Events[1].Properties)
	}
}

// TestPostRefusesBadBodiesAndStoresNothing checks the 400s (with the
// field and the event's index in the message) and the 413.
func TestPostRefusesBadBodiesAndStoresNothing(t *testing.T) {
	a := newAPI(t, "")
	cases := []struct {
		name, path, body string
		status           int
		code, mentions   string
	}{
		{"malformed JSON", "/sources/site/events", `{"type":`, 400, "malformed_json", ""},
		{"not an object", "/sources/site/events", `[1]`, 400, "malformed_json", "object"},
		{"unknown field", "/sources/site/events", `{"type":"click","sessionId":"s","colour":"red"}`, 400, "malformed_json", "colour"},
		{"unknown field in a batch", "/sources/site/events", `{"events":[{"type":"click","sessionId":"s"},{"type":"click","sessionId":"s","x":1}]}`, 400, "malformed_json", "event 1"},
		{"batch with more fields", "/sources/site/events", `{"events":[],"type":"click"}`, 400, "malformed_json", "events"},
		{"missing sessionId", "/sources/site/events", `{"type":"click"}`, 400, "invalid", "sessionId"},
		{"missing sessionId in a batch", "/sources/site/events", `{"events":[{"type":"click","sessionId":"s"},{"type":"click","sessionId":"s"},{"type":"click"}]}`, 400, "invalid", "event 2: invalid sessionId"},
		{"empty batch", "/sources/site/events", `{"events":[]}`, 400, "invalid", "events"},
		{"eventId not a ULID", "/sources/site/events", `{"eventId":"evt-1","type":"click","sessionId":"s"}`, 400, "invalid", "eventId"},
		{"eventId not a ULID in a batch", "/sources/site/events", `{"events":[{"type":"click","sessionId":"s"},{"eventId":"01ARZ3NDEKTSV4RRFFQ69G5FAU","type":"click","sessionId":"s"}]}`, 400, "invalid", "event 1: invalid eventId"},
		{"bad createdAt", "/sources/site/events", `{"type":"click","sessionId":"s","createdAt":"yesterday"}`, 400, "invalid", "createdAt"},
		{"far-future createdAt", "/sources/site/events", `{"type":"click","sessionId":"s","createdAt":"2999-01-01T00:00:00Z"}`, 400, "invalid", "createdAt"},
		{"source with #", "/sources/a%23b/events", `{"type":"click","sessionId":"s"}`, 400, "invalid", "sourceId"},
		{"body over the limit", "/sources/site/events", `{"type":"click","sessionId":"s","url":"` + strings.Repeat("x", 5000) + `"}`, 413, "body_too_large", ""},
	}
	for _, c := range cases {
		status, body := a.do("POST", c.path, c.body, nil)
		var e httpapi.Error
		_ = json.Unmarshal([]byte(body), &e)
		if status != c.status || e.Code != c.code || !strings.Contains(e.Message, c.mentions) {
			t.Errorf("%s: %d %s, want %d %s mentioning %q", c.name, status, body, c.status, c.code, c.mentions)
		}
	}
	if got := a.count(); got != 0 {
		t.Errorf("table holds %d items after refused posts", got)
	}
}

// TestGetSessionsAndAggregations reads hand-written items over HTTP
// (AP3–AP7), including the 404 of an unknown session and the 400s of bad
// parameters.
func TestGetSessionsAndAggregations(t *testing.T) {
	a := newAPI(t, "")
	for _, id := range []string{"01A", "01B", "01C"} {
		a.put(map[string]types.AttributeValue{
			"pk": s("SOURCE#site"), "sk": s("SESSION#" + id), "gsi1pk": s("USER#u1"), "gsi1sk": s("SESSION#" + id),
			"userId": s("u1"), "eventCount": n(3), "entryUrl": s("/"), "duration": n(60),
		})
	}
	for h := range 3 {
		a.put(map[string]types.AttributeValue{
			"pk": s("SOURCE#site"), "sk": s("AGG#hourly#2026-05-12T0" + strconv.Itoa(h) + ":00:00Z"),
			"events": n(int64(10 + h)), "pageViews": n(1), "sessions": n(1),
		})
	}
	a.put(map[string]types.AttributeValue{"pk": s("SOURCE#site"), "sk": s("AGG#daily#2026-05-12"), "events": n(33)})

	var sess analytics.Session
	if status, body := a.do("GET", "/sources/site/sessions/01B", "", &sess); status != 200 || sess.EventCount != 3 || sess.UserID != "u1" {
		t.Errorf("GET session: %d %s", status, body)
	}
	if status, body := a.do("GET", "/sources/site/sessions/nope", "", nil); status != 404 || !strings.Contains(body, "not_found") {
		t.Errorf("GET unknown session: %d %s, want 404", status, body)
	}
	for _, path := range []string{"/sources/site/sessions?limit=2", "/users/u1/sessions?limit=2"} {
		var first, second analyticsapi.Sessions
		a.do("GET", path, "", &first)
		a.do("GET", path+"&cursor="+url.QueryEscape(first.Next), "", &second)
		if len(first.Sessions) != 2 || first.Sessions[0].SessionID != "01C" || first.Next == "" ||
			len(second.Sessions) != 1 || second.Sessions[0].SessionID != "01A" || second.Next != "" {
			t.Errorf("%s: pages %+v then %+v, want 01C 01B then 01A", path, first, second)
		}
	}
	var page analyticsapi.Aggregations
	if status, body := a.do("GET", "/sources/site/aggregations?period=hourly&limit=2", "", &page); status != 200 ||
		len(page.Aggregations) != 2 || page.Aggregations[0].Bucket != "2026-05-12T02:00:00Z" || page.Next == "" {
		t.Errorf("GET hourly aggregations: %d %s", status, body)
	}
	var between analyticsapi.Aggregations
	if status, body := a.do("GET", "/sources/site/aggregations?period=hourly&from=2026-05-12T00:30:00Z&to=2026-05-12T01:00:00Z", "", &between); status != 200 ||
		len(between.Aggregations) != 2 || between.Aggregations[0].Events != 10 || between.Aggregations[1].Events != 11 {
		t.Errorf("GET hourly range: %d %s", status, body)
	}
	if status, body := a.do("GET", "/sources/site/aggregations?period=daily&from=2026-05-12&to=2026-05-12", "", &between); status != 200 ||
		len(between.Aggregations) != 1 || between.Aggregations[0].Events != 33 {
		t.Errorf("GET daily range: %d %s", status, body)
	}
	for path, field := range map[string]string{
		"/sources/site/aggregations?period=weekly":                                       "period",
		"/sources/site/aggregations":                                                     "period",
		"/sources/site/aggregations?period=hourly&limit=x":                               "limit",
		"/sources/site/aggregations?period=hourly&cursor=%21%21":                         "cursor",
		"/sources/site/aggregations?period=hourly&from=2026-05-12":                       "to",
		"/sources/site/aggregations?period=hourly&from=2026-05-13&to=2026-05-12":         "to",
		"/sources/site/aggregations?period=hourly&from=x&to=2026-05-12":                  "from",
		"/sources/site/aggregations?period=hourly&from=2026-05-12&to=2026-05-13&limit=1": "cursor",
		"/sources/site/sessions?limit=0":                                                 "limit",
		"/sources/site/sessions?limit=5000":                                              "limit",
		"/sources/site/sessions?cursor=bm9wZQ":                                           "cursor",
		"/users/u%231/sessions":                                                          "userId",
		"/sources/a%23b/sessions/s/events":                                               "sourceId",
	} {
		status, body := a.do("GET", path, "", nil)
		if status != 400 || !strings.Contains(body, "invalid "+field) {
			t.Errorf("GET %s: %d %s, want 400 naming %s", path, status, body, field)
		}
	}
}

// TestDynamoDBFailuresAnswer503 serves a table that does not exist.
func TestDynamoDBFailuresAnswer503(t *testing.T) {
	a := newAPI(t, testenv.UniqueName(t, "missing"))
	for _, req := range [][2]string{
		{"GET", "/sources/site/sessions/s1"},
		{"GET", "/sources/site/sessions"},
		{"POST", "/sources/site/events"},
	} {
		status, body := a.do(req[0], req[1], `{"type":"click","sessionId":"s1"}`, nil)
		if status != http.StatusServiceUnavailable || !strings.Contains(body, "unavailable") {
			t.Errorf("%s %s: %d %s, want 503", req[0], req[1], status, body)
		}
	}
}

// TestAForgottenUsersEventsAreGoneAndRefused: with keys, a signed-in
// user's event reads back clear; once the user is forgotten it reads
// "[forgotten]", and a new event of theirs is answered 410 Gone with
// nothing stored, while another user's is still taken.
func TestAForgottenUsersEventsAreGoneAndRefused(t *testing.T) {
	keys := integration.KeyStore(t)
	a := newAPIWith(t, "", keys)
	if status, body := a.do("POST", "/sources/site/events", `{"type":"page_view","sessionId":"s1","userId":"u1","url":"/u1-private-page"}`, nil); status != http.StatusCreated {
		t.Fatalf("POST: %d %s", status, body)
	}
	var evs analyticsapi.Events
	if status, body := a.do("GET", "/sources/site/sessions/s1/events", "", &evs); status != http.StatusOK || len(evs.Events) != 1 || evs.Events[0].URL != "/u1-private-page" {
		t.Fatalf("the session's events: %d %s", status, body)
	}
	if _, err := keys.Forget(context.Background(), "u1"); err != nil {
		t.Fatal(err)
	}
	if status, body := a.do("GET", "/sources/site/sessions/s1/events", "", &evs); status != http.StatusOK || len(evs.Events) != 1 || evs.Events[0].URL != privacy.ForgottenText {
		t.Fatalf("the session's events after the forget: %d %s", status, body)
	}
	before := a.count()
	status, body := a.do("POST", "/sources/site/events", `{"events":[{"type":"page_view","sessionId":"s3","userId":"u2","url":"/u2"},{"type":"page_view","sessionId":"s2","userId":"u1","url":"/again"}]}`, nil)
	if status != http.StatusGone || !strings.Contains(body, `"forgotten"`) || !strings.Contains(body, "event 1") {
		t.Fatalf("POST for a forgotten user: %d %s, want 410 naming event 1", status, body)
	}
	if after := a.count(); after != before {
		t.Fatalf("the refused batch stored %d items", after-before)
	}
	if status, body := a.do("POST", "/sources/site/events", `{"type":"page_view","sessionId":"s3","userId":"u2","url":"/u2"}`, nil); status != http.StatusCreated {
		t.Fatalf("POST for another user: %d %s", status, body)
	}
}
