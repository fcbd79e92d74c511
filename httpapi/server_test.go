package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe/httpapi"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

func TestServerLimitsBodiesAnswersJSONAndShutsDownGracefully(t *testing.T) {
	srv, err := httpapi.New(httpapi.Config{Addr: "127.0.0.1:0", MaxBodyBytes: 16})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	entered := make(chan struct{}, 8)
	srv.Mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		var v map[string]any
		if !httpapi.DecodeJSON(w, r, &v) {
			return
		}
		entered <- struct{}{}
		<-release // an in-flight request during shutdown
		httpapi.WriteJSON(w, http.StatusOK, v)
	})
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ready) }()
	base := "http://" + <-ready

	send := func(body string) (int, httpapi.Error, error) {
		resp, err := http.Post(base+"/echo", "application/json", strings.NewReader(body))
		if err != nil {
			return 0, httpapi.Error{}, err
		}
		defer resp.Body.Close()
		var e httpapi.Error
		b, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(b, &e)
		return resp.StatusCode, e, nil
	}
	post := func(body string) (int, httpapi.Error) {
		code, e, err := send(body)
		if err != nil {
			t.Fatal(err)
		}
		return code, e
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

	// A request in flight when the context ends still completes: the
	// handler has it, the server stops listening, and only then does the
	// handler answer.
	type answer struct {
		code int
		err  error
	}
	inflight := make(chan answer, 1)
	go func() { code, _, err := send(`{"a":1}`); inflight <- answer{code, err} }()
	select {
	case <-entered:
	case a := <-inflight:
		t.Fatalf("the request ended before the handler held it: %d %v", a.code, a.err)
	}
	cancel()
	addr := strings.TrimPrefix(base, "http://")
	integration.Await(t, "the server to stop listening", func() error {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return nil
		}
		c.Close()
		return errors.New("still accepting connections")
	})
	close(release)
	if a := <-inflight; a.err != nil || a.code != http.StatusOK {
		t.Errorf("in-flight request during shutdown got %d, %v", a.code, a.err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
