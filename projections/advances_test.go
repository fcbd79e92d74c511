package projections_test

import (
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/projections"
)

// TestCatchUpStateAdvancesOnlyForward: a later start replaces an earlier
// one; within one start the cursor, the count and "done" never go back.
func TestCatchUpStateAdvancesOnlyForward(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 7, 0, 0, 0, time.UTC)
	at := func(start time.Time, after string, events int64, done bool) projections.CatchUpState {
		st := projections.CatchUpState{Started: start, After: after, Events: events}
		if done {
			st.Done = start.Add(time.Minute)
		}
		return st
	}
	cases := []struct {
		name       string
		next, prev projections.CatchUpState
		want       bool
	}{
		{"first record", at(t0, "", 0, false), projections.CatchUpState{}, true},
		{"next batch", at(t0, "01B", 2000, false), at(t0, "01A", 1000, false), true},
		{"same state again", at(t0, "01A", 1000, false), at(t0, "01A", 1000, false), true},
		{"done", at(t0, "01A", 1000, true), at(t0, "01A", 1000, false), true},
		{"a replica behind", at(t0, "01A", 1000, false), at(t0, "01B", 2000, false), false},
		{"undone", at(t0, "01B", 2000, false), at(t0, "01B", 2000, true), false},
		{"fewer events", at(t0, "01B", 1000, false), at(t0, "01B", 2000, false), false},
		{"a later catch-up", at(t0.Add(time.Second), "", 0, false), at(t0, "01B", 2000, true), true},
		{"an earlier catch-up", at(t0, "01C", 3000, false), at(t0.Add(time.Second), "", 0, false), false},
	}
	for _, c := range cases {
		if got := c.next.Advances(c.prev); got != c.want {
			t.Errorf("%s: Advances = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestVersionOfIsOneUnlessDeclared: a model without Version, or with one
// below 1, is at version 1.
func TestVersionOfIsOneUnlessDeclared(t *testing.T) {
	if v := projections.VersionOf(struct{}{}); v != 1 {
		t.Errorf("VersionOf(no Version) = %d, want 1", v)
	}
	if v := projections.VersionOf(versioned(0)); v != 1 {
		t.Errorf("VersionOf(Version 0) = %d, want 1", v)
	}
	if v := projections.VersionOf(versioned(3)); v != 3 {
		t.Errorf("VersionOf(Version 3) = %d, want 3", v)
	}
}

type versioned int

func (v versioned) Version() int { return int(v) }
