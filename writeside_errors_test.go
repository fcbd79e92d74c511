package eventpipe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/httpapi"
)

// syncBuffer is a log destination safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestA5xxBodyCarriesACorrelationIDAndNoBackendText: the write side on an
// events table that does not exist answers GET /todo/{id} with 503 whose
// body has a generic message and the request's correlation id (also in
// X-Request-Id) and none of DynamoDB's text; the server's log has the
// full error under that id.
func TestA5xxBodyCarriesACorrelationIDAndNoBackendText(t *testing.T) {
	testenv.DynamoDB(t)
	ep := testenv.Endpoints()
	ep.EventsTable = testenv.UniqueName(t, "missing")
	var logs syncBuffer
	goch := gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
	t.Cleanup(func() { _ = goch.Close() })
	svc, err := eventpipe.NewWriteSide(context.Background(), eventpipe.WriteSideConfig{
		Process:   eventpipe.Process{Endpoints: ep, Logger: slog.New(slog.NewJSONHandler(&logs, nil))},
		Publisher: goch, NewSubscriber: func(string) (message.Subscriber, error) { return goch, nil }, NoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	api, err := svc.NewHTTP()
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(api.Handler())
	t.Cleanup(ts.Close)

	resp, err := http.Get(ts.URL + "/todo/t1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("GET /todo/t1 on a missing table: %d %s, want 503", resp.StatusCode, body)
	}
	for _, leak := range []string{ep.EventsTable, "ResourceNotFound", "non-existent", "DynamoDB", "api error", "operation error"} {
		if bytes.Contains(bytes.ToLower(body), bytes.ToLower([]byte(leak))) {
			t.Errorf("the 503 body carries the backend's %q: %s", leak, body)
		}
	}
	var e httpapi.Error
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	id := resp.Header.Get(httpapi.HeaderRequestID)
	if id == "" || e.RequestID != id || !strings.Contains(e.Message, id) {
		t.Fatalf("correlation id: header %q, body %+v; want the header's id in the body and its message", id, e)
	}
	var logged bool
	for _, line := range strings.Split(logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["request_id"] != id {
			continue
		}
		logged = true
		if msg, _ := rec["err"].(string); !strings.Contains(msg, ep.EventsTable) && !strings.Contains(msg, "ResourceNotFound") {
			t.Errorf("the log line of request %s has err %q, want DynamoDB's error in full", id, msg)
		}
	}
	if !logged {
		t.Errorf("no log line names request %s:\n%s", id, logs.String())
	}
}
