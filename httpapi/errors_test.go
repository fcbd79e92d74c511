package httpapi_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe/httpapi"
)

// TestEveryAnswerHasARequestIDAndA5xxNamesItNotTheCause: every answer
// carries X-Request-Id, ids differ between requests, a 5xx of
// WriteServerError or WriteError repeats it in the body, and
// WriteServerError's body has none of the error's text, which the log
// line of that id has.
func TestEveryAnswerHasARequestIDAndA5xxNamesItNotTheCause(t *testing.T) {
	var logs bytes.Buffer
	srv, err := httpapi.New(httpapi.Config{Addr: "127.0.0.1:0", Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	const cause = "ResourceNotFoundException: table secret-events"
	srv.Mux.HandleFunc("GET /fail", func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteServerError(w, r, http.StatusServiceUnavailable, "unavailable", errors.New(cause))
	})
	srv.Mux.HandleFunc("GET /curated", func(w http.ResponseWriter, _ *http.Request) {
		httpapi.WriteError(w, http.StatusServiceUnavailable, "search_unavailable", "the search model cannot be read now")
	})
	get := func(path string) (*httptest.ResponseRecorder, httpapi.Error) {
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var e httpapi.Error
		_ = json.Unmarshal(rec.Body.Bytes(), &e)
		return rec, e
	}
	ok1, _ := get("/healthz")
	ok2, _ := get("/healthz")
	if id1, id2 := ok1.Header().Get(httpapi.HeaderRequestID), ok2.Header().Get(httpapi.HeaderRequestID); id1 == "" || id1 == id2 {
		t.Errorf("X-Request-Id of two answers: %q and %q; want two ids", id1, id2)
	}
	rec, e := get("/fail")
	id := rec.Header().Get(httpapi.HeaderRequestID)
	if rec.Code != http.StatusServiceUnavailable || e.RequestID != id || !strings.Contains(e.Message, id) || strings.Contains(rec.Body.String(), "secret") {
		t.Errorf("WriteServerError: %d %s (header id %q); want 503 naming the id and not the cause", rec.Code, rec.Body, id)
	}
	if !strings.Contains(logs.String(), `"request_id":"`+id+`"`) || !strings.Contains(logs.String(), cause) {
		t.Errorf("the log has no line with request_id %s and the cause:\n%s", id, logs.String())
	}
	rec, e = get("/curated")
	if id := rec.Header().Get(httpapi.HeaderRequestID); id == "" || e.RequestID != id {
		t.Errorf("WriteError 503: body %s, header id %q; want the id in the body", rec.Body, id)
	}
}
