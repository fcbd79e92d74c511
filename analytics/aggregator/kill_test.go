package aggregator_test

import (
	"context"
	"math"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/analytics/aggregator"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/rollup"
)

// TestKilledAggregatorCountsEveryEventExactlyOnce is issue 15's
// workload: 50,000 events in 500 sessions of 200 users over 3 days, 5%
// delivered late (after later events, some of them moving their
// session's start into another hour or day) and 2% delivered twice at
// another offset, plus two messages that are not analytics events. The
// aggregation consumer runs as a child process that is killed with
// SIGKILL at least 10 times and restarted, each kill once the running
// child has made progress; most kills must land before the last event
// is counted. In the end every hourly and daily count equals the exact
// count from the unique events, unique users are within the sketch's
// error, and every session's count, entry and exit URL, first and last
// seen, duration and ttl (seed 001: 90 days after its last event) are
// exact.
func TestKilledAggregatorCountsEveryEventExactlyOnce(t *testing.T) {
	const kills = 10
	w := newWorld(t)
	wl := generateWorkload("site", workloadConfig{
		Events: 50_000, Sessions: 500, Users: 200, Days: 3, LateShare: 0.05, DupShare: 0.02,
		Seed: 15, Now: time.Now(),
	})
	garbage := []*message.Message{message.NewMessage("g1", []byte("not json")), message.NewMessage("g2", []byte(`{"sourceId":"site"}`))}
	w.publish(wl.Delivered, garbage...)
	t.Logf("published %d messages: %d events, %d delivered late, %d copies, %d not events",
		len(wl.Delivered)+len(garbage), len(wl.Events), wl.Late, wl.Copies, len(garbage))

	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		// A static group member: each restart takes back the partitions
		// at once instead of waiting for the killed member's session.
		cmd.Env = append(os.Environ(), envAggregatorChild+"=1", endpoints.EnvKafkaInstanceID+"=aggregator-child",
			endpoints.EnvAnalyticsTable+"="+w.table, endpoints.EnvTopicPrefix+"="+w.topics.Prefix)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	counted := func() int64 { return w.eventsCounted(wl.Source) }
	testenv.KillRepeatedly(t, start, counted, int64(len(wl.Events)), kills)
	group := w.topics.Prefix + aggregator.DefaultGroup
	testenv.WaitCommitted(t, w.brokers, group, w.topics.Analytics(wl.Source), int64(len(wl.Delivered)+len(garbage)))

	assertExact(t, w, wl)
	poison := testenv.Consume(t, w.brokers, "check-poison", w.topics.Poison(aggregator.DefaultGroup), len(garbage))
	for _, m := range poison {
		if m.Metadata.Get(aggregator.MetadataPoisonReason) == "" {
			t.Errorf("poison message %s has no reason", m.UUID)
		}
	}
}

// assertExact compares the stored aggregations and sessions with the
// exact counts of the workload's unique events; a session's ttl included,
// so the consumer must run with the default SessionTTL.
func assertExact(t *testing.T, w *world, wl workload) {
	t.Helper()
	ctx := context.Background()
	x := exactCounts(wl)
	from, to := wl.Events[0].CreatedAt, wl.Events[0].CreatedAt
	for _, e := range wl.Events {
		from, to = minTime(from, e.CreatedAt), maxTime(to, e.CreatedAt)
	}
	seen := 0
	hourSketches := map[string][][]byte{} // day → its hours' sketches
	daily := map[string]int64{}
	for _, p := range rollup.Periods {
		aggs, err := w.store.AggregationsBetween(ctx, wl.Source, p, from, to)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range aggs {
			seen++
			want := x.buckets[string(p)+" "+a.Bucket]
			if want == nil {
				t.Errorf("%s %s: stored %+v, but no event falls in it", p, a.Bucket, a)
				continue
			}
			if a.Events != want.Events || a.PageViews != want.PageViews || a.Sessions != want.Sessions || !equalCounts(a.PerType, want.PerType) {
				t.Errorf("%s %s: events %d pageViews %d sessions %d perType %v; exact: %s", p, a.Bucket, a.Events, a.PageViews, a.Sessions, a.PerType, want)
			}
			if p == rollup.Hourly {
				hourSketches[a.Bucket[:10]] = append(hourSketches[a.Bucket[:10]], a.UsersSketch)
			} else {
				daily[a.Bucket] = a.UniqueUsers
			}
			exactUsers := float64(len(want.Users))
			// Precision 14: a standard error of 0.81%; allow three of
			// them, and one user of rounding.
			if diff := math.Abs(float64(a.UniqueUsers) - exactUsers); diff > math.Max(1, 3*0.0081*exactUsers) {
				t.Errorf("%s %s: %d unique users, exact %v", p, a.Bucket, a.UniqueUsers, exactUsers)
			}
		}
	}
	// A day's unique users can also be had by merging its hours.
	for day, sketches := range hourSketches {
		merged, err := rollup.MergeSketches(sketches...)
		if err != nil {
			t.Fatal(err)
		}
		if got := int64(merged.Estimate()); got != daily[day] {
			t.Errorf("day %s: its hours merged estimate %d unique users, the day %d", day, got, daily[day])
		}
	}
	if seen != len(x.buckets) {
		t.Errorf("%d aggregation items, want %d", seen, len(x.buckets))
	}
	for id, want := range x.sessions {
		got, ok, err := w.store.Session(ctx, wl.Source, id)
		if err != nil || !ok {
			t.Fatalf("session %s: %v, %v", id, ok, err)
		}
		if got != want {
			t.Errorf("session %s:\n  %+v\nwant\n  %+v", id, got, want)
		}
	}
	t.Logf("%d buckets and %d sessions exact", seen, len(x.sessions))
}

func equalCounts(got map[string]int64, want map[string]int64) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
