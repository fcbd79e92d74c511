package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/httpapi"
)

func TestServerLimitsBodiesAnswersJSONAndShutsDownGracefully(t *testing.T) {
	srv, err := httpapi.New(httpapi.Config{Addr: "127.0.0.1:0", MaxBodyBytes: 16})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	srv.Mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		var v map[string]any
		if !httpapi.DecodeJSON(w, r, &v) {
			return
		}
		<-release // an in-flight request during shutdown
		httpapi.WriteJSON(w, http.StatusOK, v)
	})
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ready) }()
	base := "http://" + <-ready

	post := func(body string) (int, httpapi.Error) {
		resp, err := http.Post(base+"/echo", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e httpapi.Error
		b, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(b, &e)
		return resp.StatusCode, e
	}
	if code, e := post(`{"a":"` + strings.Repeat("x", 64) + `"}`); code != http.StatusRequestEntityTooLarge || e.Code != "body_too_large" {
		t.Errorf("oversize body: %d %+v", code, e)
	}
	if code, e := post(`{"a":`); code != http.StatusBadRequest || e.Code != "malformed_json" {
		t.Errorf("malformed body: %d %+v", code, e)
	}
	resp, err := http.Get(base + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()

	// A request in flight when the context ends still completes.
	inflight := make(chan int, 1)
	go func() { code, _ := post(`{"a":1}`); inflight <- code }()
	time.Sleep(100 * time.Millisecond)
	cancel()
	time.Sleep(100 * time.Millisecond)
	close(release)
	if code := <-inflight; code != http.StatusOK {
		t.Errorf("in-flight request during shutdown got %d", code)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
