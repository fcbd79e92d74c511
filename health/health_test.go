package health_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/health"
)

func get(t *testing.T, h http.Handler, path string) (int, health.Result) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	var r health.Result
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatalf("%s: body %q: %v", path, rec.Body, err)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s: Content-Type %q", path, ct)
	}
	return rec.Code, r
}

func newProbes(t *testing.T) (*health.Probes, *http.ServeMux) {
	t.Helper()
	p, err := health.New(health.Config{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	p.Mount(mux)
	return p, mux
}

func TestProbesAnswerThroughStartReadinessAndDrain(t *testing.T) {
	p, mux := newProbes(t)
	var dbDown error = errors.New("connection refused")
	p.AddReady("dynamodb", func(context.Context) error { return dbDown })
	p.AddReady("kafka-groups", func(context.Context) error { return nil })
	p.AddLive("loop", func(context.Context) error { return nil })

	// Before Started: alive, not started, not ready (without running
	// the readiness checks).
	if code, r := get(t, mux, health.PathLive); code != 200 || !slices.Equal(r.Passed, []string{"loop"}) || r.Status != "ok" {
		t.Fatalf("livez before start: %d %+v", code, r)
	}
	if code, r := get(t, mux, health.PathStartup); code != 503 || !slices.Equal(r.Failed, []string{health.CheckStarted}) {
		t.Fatalf("startupz before start: %d %+v", code, r)
	}
	if code, r := get(t, mux, health.PathReady); code != 503 || !slices.Contains(r.Failed, health.CheckStarted) || slices.Contains(r.Failed, "dynamodb") {
		t.Fatalf("readyz before start: %d %+v", code, r)
	}

	p.Started()
	if code, r := get(t, mux, health.PathStartup); code != 200 || !slices.Equal(r.Passed, []string{health.CheckStarted}) {
		t.Fatalf("startupz after start: %d %+v", code, r)
	}
	// A dependency down: 503 naming it, the others passed; no reason
	// in the body (the probes are open).
	code, r := get(t, mux, health.PathReady)
	if code != 503 || !slices.Equal(r.Failed, []string{"dynamodb"}) || !slices.Equal(r.Passed, []string{health.CheckDraining, "kafka-groups", health.CheckStarted}) {
		t.Fatalf("readyz with dynamodb down: %d %+v", code, r)
	}
	dbDown = nil
	if code, r := get(t, mux, health.PathReady); code != 200 || len(r.Failed) != 0 || len(r.Passed) != 4 {
		t.Fatalf("readyz with all up: %d %+v", code, r)
	}

	// Draining: not ready at once, still alive and started.
	p.Drain()
	if code, r := get(t, mux, health.PathReady); code != 503 || !slices.Equal(r.Failed, []string{health.CheckDraining}) {
		t.Fatalf("readyz draining: %d %+v", code, r)
	}
	if code, _ := get(t, mux, health.PathLive); code != 200 {
		t.Fatalf("livez draining: %d", code)
	}
	if code, _ := get(t, mux, health.PathStartup); code != 200 {
		t.Fatalf("startupz draining: %d", code)
	}
}

func TestACheckThatDoesNotAnswerFailsWithinTheTimeout(t *testing.T) {
	p, mux := newProbes(t)
	p.Started()
	block := make(chan struct{})
	defer close(block)
	p.AddReady("stuck", func(context.Context) error { <-block; return nil })
	p.AddLive("deadlocked", func(context.Context) error { <-block; return nil })
	began := time.Now()
	if code, r := get(t, mux, health.PathReady); code != 503 || !slices.Equal(r.Failed, []string{"stuck"}) {
		t.Fatalf("readyz: %d %+v", code, r)
	}
	if code, r := get(t, mux, health.PathLive); code != 503 || !slices.Equal(r.Failed, []string{"deadlocked"}) {
		t.Fatalf("livez: %d %+v", code, r)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("two probes of a 200ms timeout took %v", took)
	}
}

func TestConfigValidate(t *testing.T) {
	if _, err := health.New(health.Config{Timeout: -time.Second}); err == nil {
		t.Fatal("a negative timeout was accepted")
	}
}
