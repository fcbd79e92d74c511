package main

import (
	"bytes"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/testkit/integration"
)

// output is a command's stdout and stderr, safe to read while it runs.
type output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

func (o *output) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Len()
}

// runWatched runs cmd to its end and returns its output (stdout and
// stderr) and how it exited. A command that prints nothing for
// integration.HangAfter is a hang: runWatched kills it and fails t with
// what it printed, however long it had been running before.
func runWatched(t *testing.T, cmd *exec.Cmd) (string, error) {
	t.Helper()
	out := &output{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	hang := integration.HangAfter()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for printed, moved := 0, time.Now(); ; {
		select {
		case err := <-done:
			return out.String(), err
		case <-tick.C:
		}
		if n := out.len(); n != printed {
			printed, moved = n, time.Now()
		} else if stuck := time.Since(moved); stuck >= hang {
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("%s printed nothing for %v (%s; a hang, not a clear failure):\n%s", cmd, stuck.Round(time.Second), integration.EnvHangAfter, out.String())
		}
	}
}
