package integration_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/testkit/integration"
)

// fatalRecorder stands in for a test so that a helper's Fatalf can be
// observed instead of ending the real test.
type fatalRecorder struct {
	testing.TB
	mu  sync.Mutex
	msg string // Fatalf's message; empty when it was not called
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// failure runs fn with a fatalRecorder on a goroutine of its own (Fatalf
// ends it) and returns the message fn failed with, or "".
func failure(t *testing.T, fn func(tb testing.TB)) string {
	t.Helper()
	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(rec)
	}()
	<-done
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.msg
}

func TestHangAfterComesFromTheEnvironment(t *testing.T) {
	t.Setenv(integration.EnvHangAfter, "")
	if got := integration.HangAfter(); got != integration.DefaultHangAfter {
		t.Errorf("HangAfter() unset = %v, want %v", got, integration.DefaultHangAfter)
	}
	t.Setenv(integration.EnvHangAfter, "90s")
	if got := integration.HangAfter(); got != 90*time.Second {
		t.Errorf("HangAfter() with 90s = %v", got)
	}
	for _, bad := range []string{"soon", "10", "-1m", "0s"} {
		t.Setenv(integration.EnvHangAfter, bad)
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), integration.EnvHangAfter) {
					t.Errorf("HangAfter() with %q: panic %v, want one naming %s", bad, r, integration.EnvHangAfter)
				}
			}()
			integration.HangAfter()
		}()
	}
}

func TestAwaitReturnsOnceTheCheckPasses(t *testing.T) {
	calls := 0
	msg := failure(t, func(tb testing.TB) {
		integration.Await(tb, "the third call", func() error {
			if calls++; calls < 3 {
				return errors.New("not yet")
			}
			return nil
		})
	})
	if msg != "" || calls != 3 {
		t.Errorf("Await failed with %q after %d calls, want it to pass at the third", msg, calls)
	}
}

// TestAwaitFailsWithTheLastErrorAfterHangAfter: the failure names what
// was awaited and the error of the check's last call.
func TestAwaitFailsWithTheLastErrorAfterHangAfter(t *testing.T) {
	t.Setenv(integration.EnvHangAfter, "50ms")
	calls := 0
	start := time.Now()
	msg := failure(t, func(tb testing.TB) {
		integration.Await(tb, "the flag", func() error {
			calls++
			return fmt.Errorf("attempt %d: flag down", calls)
		})
	})
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Errorf("Await gave up after %v, before HangAfter", took)
	}
	for _, want := range []string{"the flag", fmt.Sprintf("attempt %d: flag down", calls), integration.EnvHangAfter} {
		if !strings.Contains(msg, want) {
			t.Errorf("Await's failure %q does not say %q", msg, want)
		}
	}
}

// TestAwaitProgressWaitsAsLongAsProgressMoves: progress that moves at
// every call keeps AwaitProgress waiting well past HangAfter; progress
// that stops fails it, saying where it stopped.
func TestAwaitProgressWaitsAsLongAsProgressMoves(t *testing.T) {
	t.Setenv(integration.EnvHangAfter, "50ms")
	const total = 10 // calls: the intervals between them add up to over 0.5 s
	var n int64
	var took time.Duration
	msg := failure(t, func(tb testing.TB) {
		took = integration.AwaitProgress(tb, "moving", func() int64 { n++; return n }, total)
	})
	if msg != "" || n < total || took < 4*50*time.Millisecond {
		t.Errorf("moving progress: failure %q at %d of %d after %v, want success after 4 x HangAfter or more", msg, n, total, took)
	}

	n = 0
	msg = failure(t, func(tb testing.TB) {
		integration.AwaitProgress(tb, "stalled", func() int64 { n = min(n+1, 5); return n }, total)
	})
	for _, want := range []string{"stalled", "progress 5 of 10", "stuck", integration.EnvHangAfter} {
		if !strings.Contains(msg, want) {
			t.Errorf("AwaitProgress's failure %q does not say %q", msg, want)
		}
	}
}
