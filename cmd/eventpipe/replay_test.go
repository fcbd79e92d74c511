package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/projections"
)

func TestProgressLineShowsDoneTotalRateAndETA(t *testing.T) {
	for _, tc := range []struct {
		p    projections.ReplayProgress
		want string
	}{
		{projections.ReplayProgress{Phase: "rebuild", Done: 2500, Total: 10000, Elapsed: 5 * time.Second},
			"replay accounts: rebuild: 2500/10000 events (25%), 500 events/s, ETA 15s, elapsed 5s"},
		{projections.ReplayProgress{Phase: "rebuild", Done: 0, Total: 0, Elapsed: 0},
			"replay accounts: rebuild: 0 events, elapsed 0s"},
		{projections.ReplayProgress{Phase: "done", Done: 10010, Total: 10000, Elapsed: 10 * time.Second},
			"replay accounts: done: 10010/10000 events (100%), 1001 events/s, elapsed 10s"},
	} {
		if got := progressLine("accounts", tc.p); got != tc.want {
			t.Errorf("progressLine(%+v)\n got %q\nwant %q", tc.p, got, tc.want)
		}
	}
}

// TestReplayProgressPrintsPlainLinesOffATerminal: into a buffer (not a
// terminal) it prints one line per phase change and at most one per
// interval within a phase.
func TestReplayProgressPrintsPlainLinesOffATerminal(t *testing.T) {
	var buf bytes.Buffer
	r := newReplayProgress(&buf, "todos", time.Hour)
	for i := range 100 {
		r.update(projections.ReplayProgress{Phase: "rebuild", Done: i * 10, Total: 1000, Elapsed: time.Second})
	}
	r.update(projections.ReplayProgress{Phase: "swap", Done: 1000, Total: 1000, Elapsed: time.Second})
	r.update(projections.ReplayProgress{Phase: "done", Done: 1000, Total: 1000, Elapsed: time.Second})
	r.finish()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "rebuild: 0/1000") || !strings.Contains(lines[2], "done: 1000/1000") {
		t.Fatalf("got %d lines:\n%s", len(lines), buf.String())
	}
}
