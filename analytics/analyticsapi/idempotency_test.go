package analyticsapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/analytics/analyticsapi"
	"github.com/eventpipe/eventpipe/httpapi"
)

// post sends body with the given headers and returns the status, the
// headers and the decoded Ingested (of any status).
func (a *api) post(path, body string, headers map[string]string) (int, http.Header, analyticsapi.Ingested) {
	a.t.Helper()
	req, err := http.NewRequest(http.MethodPost, a.url+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var out analyticsapi.Ingested
	if err := json.Unmarshal(b, &out); err != nil {
		a.t.Fatalf("%s: %v in %s", path, err, b)
	}
	return res.StatusCode, res.Header, out
}

// TestPostWithEventIDsAnswersDuplicatesPerEvent posts two events with
// ids, then one of them again with a new one: 201 both times, the
// repeat reported as a duplicate with its index, and three items stored.
func TestPostWithEventIDsAnswersDuplicatesPerEvent(t *testing.T) {
	a := newAPI(t, "")
	id1, id2, id3 := ulid.Make().String(), ulid.Make().String(), ulid.Make().String()
	status, _, first := a.post("/sources/site/events", `{"events":[{"eventId":"`+id1+`","type":"click","sessionId":"s"},{"eventId":"`+id2+`","type":"click","sessionId":"s"}]}`, nil)
	if status != http.StatusCreated || first.Stored != 2 || first.Duplicates != 0 || len(first.Events) != 2 || first.Results[1].EventID != id2 {
		t.Fatalf("first post: %d %+v", status, first)
	}
	status, _, second := a.post("/sources/site/events", `{"events":[{"eventId":"`+id3+`","type":"click","sessionId":"s"},{"eventId":"`+strings.ToLower(id2)+`","type":"click","sessionId":"s"}]}`, nil)
	want := []analyticsapi.EventResult{
		{Index: 0, IngestedEvent: analyticsapi.IngestedEvent{EventID: id3}, Status: analytics.StatusStored},
		{Index: 1, IngestedEvent: analyticsapi.IngestedEvent{EventID: id2, Shard: first.Results[1].Shard}, Status: analytics.StatusDuplicate},
	}
	if status != http.StatusCreated || second.Stored != 1 || second.Duplicates != 1 || len(second.Results) != 2 {
		t.Fatalf("second post: %d %+v", status, second)
	}
	for i, w := range want {
		g := second.Results[i]
		if g.Index != w.Index || g.EventID != w.EventID || g.Status != w.Status || (w.Status == analytics.StatusDuplicate && g.Shard != w.Shard) {
			t.Errorf("result %d: %+v, want %+v", i, g, w)
		}
	}
	if n := a.count(); n != 3 {
		t.Errorf("%d items stored, want 3", n)
	}
}

// TestPostWithAnIdempotencyKey posts a batch without ids under an
// Idempotency-Key twice (the second time with the key quoted, as the
// draft's sf-string): the same 201 body, stored once. The key with
// another body answers 422 and stores nothing; a bad key 400.
func TestPostWithAnIdempotencyKey(t *testing.T) {
	a := newAPI(t, "")
	body := `{"events":[{"type":"page_view","sessionId":"s1","url":"/"},{"type":"click","sessionId":"s1"}]}`
	status, _, first := a.post("/sources/site/events", body, map[string]string{"Idempotency-Key": "k-1"})
	if status != http.StatusCreated || first.Stored != 2 {
		t.Fatalf("first post: %d %+v", status, first)
	}
	status, _, again := a.post("/sources/site/events", strings.ReplaceAll(body, ",", " , "), map[string]string{"Idempotency-Key": `"k-1"`})
	a1, _ := json.Marshal(first)
	a2, _ := json.Marshal(again)
	if status != http.StatusCreated || string(a1) != string(a2) {
		t.Fatalf("replay: %d\n%s\nwant\n%s", status, a2, a1)
	}
	n := a.count()
	if n != 3 { // two events and the key
		t.Fatalf("%d items stored, want 3", n)
	}
	status, _, reused := a.post("/sources/site/events", `{"events":[{"type":"page_view","sessionId":"s2"}]}`, map[string]string{"Idempotency-Key": "k-1"})
	if status != http.StatusUnprocessableEntity || reused.Code != "idempotency_key_reused" {
		t.Errorf("another body under the key: %d %+v, want 422", status, reused)
	}
	status, _, bad := a.post("/sources/site/events", body, map[string]string{"Idempotency-Key": strings.Repeat("k", 300)})
	if status != http.StatusBadRequest || !strings.Contains(bad.Message, "Idempotency-Key") {
		t.Errorf("a 300-byte key: %d %+v, want 400", status, bad)
	}
	if got := a.count(); got != n {
		t.Errorf("the refused posts changed the table from %d to %d items", n, got)
	}
}

// failSecondPut fails the PutItem of the event whose id is fail.
type failSecondPut struct {
	analytics.API
	fail string
}

func (f failSecondPut) PutItem(ctx context.Context, in *ddb.PutItemInput, opt ...func(*ddb.Options)) (*ddb.PutItemOutput, error) {
	if id, ok := in.Item["eventId"].(*types.AttributeValueMemberS); ok && id.Value == f.fail {
		return nil, errors.New("injected failure")
	}
	return f.API.PutItem(ctx, in, opt...)
}

// TestPartialFailureAnswers503WithPerEventResults fails the write of
// one event of three: 503 "partially_stored" with Retry-After and a body
// that says which event failed and which were stored.
func TestPartialFailureAnswers503WithPerEventResults(t *testing.T) {
	a := newAPI(t, "")
	id := []string{ulid.Make().String(), ulid.Make().String(), ulid.Make().String()}
	store, err := analytics.New(analytics.Config{Client: failSecondPut{API: a.db, fail: id[1]}, Table: a.table})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := httpapi.New(httpapi.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := analyticsapi.Mount(srv, analyticsapi.Config{Store: store}); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	flaky := &api{t: t, url: ts.URL, db: a.db, table: a.table}
	body := `{"events":[{"eventId":"` + id[0] + `","type":"click","sessionId":"s"},{"eventId":"` + id[1] + `","type":"click","sessionId":"s"},{"eventId":"` + id[2] + `","type":"click","sessionId":"s"}]}`
	status, h, out := flaky.post("/sources/site/events", body, nil)
	if status != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || out.Code != "partially_stored" ||
		out.Stored != 2 || out.Failed != 1 || len(out.Events) != 2 || out.Results[1].Status != analytics.StatusFailed || out.Results[1].Error == "" ||
		out.Results[0].Status != analytics.StatusStored || out.Results[2].Status != analytics.StatusStored {
		t.Fatalf("partial failure: %d Retry-After %q %+v", status, h.Get("Retry-After"), out)
	}
	status, _, retry := a.post("/sources/site/events", body, nil)
	if status != http.StatusCreated || retry.Stored != 1 || retry.Duplicates != 2 || retry.Results[1].Status != analytics.StatusStored {
		t.Fatalf("the retry: %d %+v", status, retry)
	}
	if n := a.count(); n != 3 {
		t.Errorf("%d items stored, want 3", n)
	}
}
