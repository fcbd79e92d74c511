package aggregator

import (
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/rollup"
)

func at(hour, minute int) time.Time { return time.Date(2026, 5, 12, hour, minute, 0, 0, time.UTC) }

// liveSessionTTL keeps a session written at the fixed day of at for 90
// days from now: DynamoDB Local deletes an item whose ttl has passed
// about a second after it is written, and that day is in the past.
func liveSessionTTL() time.Duration { return time.Since(at(0, 0)) + 90*24*time.Hour }

func deliveryAt(offset int64, t time.Time, typ, url, user string) delivery {
	id := ulid.MustNew(ulid.Timestamp(t), ulid.DefaultEntropy())
	return delivery{offset: offset, id: id, event: analytics.Event{
		SourceID: "site", EventID: id.String(), Type: typ, SessionID: "s1", UserID: user, URL: url, CreatedAt: t,
	}}
}

// sum adds up contributions per bucket and measure.
func sum(contribs []contribution) map[rollup.Bucket]rollup.Measures {
	out := map[rollup.Bucket]rollup.Measures{}
	for _, c := range contribs {
		if out[c.bucket] == nil {
			out[c.bucket] = rollup.Measures{}
		}
		out[c.bucket].Add(c.measures)
	}
	return out
}

func TestFoldCountsEachEventOnceAndMovesTheSessionStartWithALateEvent(t *testing.T) {
	s := &session{}
	var all []contribution
	apply := func(d delivery) bool {
		cs, dup := s.apply("site", d, 3)
		all = append(all, cs...)
		return dup
	}
	first := deliveryAt(10, at(14, 5), "page_view", "/pricing", "")
	if apply(first) {
		t.Fatal("a new event was taken for a copy")
	}
	if !apply(first) {
		t.Fatal("a copy of the event was counted again")
	}
	late := deliveryAt(11, at(13, 58), "page_view", "/", "u1")
	click := deliveryAt(12, at(14, 7), "click", "", "u2")
	apply(late)
	apply(click)

	h13, h14 := rollup.BucketOf("site", rollup.Hourly, at(13, 0)), rollup.BucketOf("site", rollup.Hourly, at(14, 0))
	day := rollup.BucketOf("site", rollup.Daily, at(0, 0))
	got := sum(all)
	want := map[rollup.Bucket]rollup.Measures{
		h13: {"events": 1, "pageViews": 1, "type#page_view": 1, "sessions": 1},
		h14: {"events": 2, "pageViews": 1, "type#page_view": 1, "type#click": 1, "sessions": 0},
		day: {"events": 3, "pageViews": 2, "type#page_view": 2, "type#click": 1, "sessions": 1},
	}
	for b, m := range want {
		for k, v := range m {
			if got[b][k] != v {
				t.Errorf("%s %s %s = %d, want %d (all: %v)", b.Period, b.Name, k, got[b][k], v, got[b])
			}
		}
	}
	if s.count != 3 || s.entryURL != "/" || s.exitURL != "/pricing" || s.userID != "u1" ||
		!s.firstAt.Equal(at(13, 58)) || !s.lastAt.Equal(at(14, 7)) || s.duration() != 9*60 {
		t.Errorf("session = %+v", s)
	}
	// The window keeps the 3 latest ids: the first event is forgotten
	// after a fourth.
	apply(deliveryAt(13, at(14, 9), "click", "", ""))
	if len(s.recent) != 3 || s.seen(first.id) || !s.seen(click.id) {
		t.Errorf("recent = %v", s.recent)
	}
}

// TestFoldIsDeterministic folds the same deliveries from the same
// session twice: the contributions per offset are equal, which is what
// lets a redelivered batch skip exactly what was written.
func TestFoldIsDeterministic(t *testing.T) {
	ds := []delivery{
		deliveryAt(1, at(10, 0), "page_view", "/a", ""),
		deliveryAt(2, at(9, 0), "page_view", "/b", "u"),
		deliveryAt(3, at(11, 30), "click", "", "u"),
		deliveryAt(4, at(8, 59), "page_view", "/c", ""),
	}
	run := func() map[int64]map[rollup.Bucket]rollup.Measures {
		s := &session{}
		out := map[int64]map[rollup.Bucket]rollup.Measures{}
		for _, d := range ds {
			cs, _ := s.apply("site", d, 10)
			out[d.offset] = sum(cs)
		}
		return out
	}
	a, b := run(), run()
	for off, m := range a {
		for bk, ms := range m {
			for k, v := range ms {
				if b[off][bk][k] != v {
					t.Errorf("offset %d %v %s: %d then %d", off, bk, k, v, b[off][bk][k])
				}
			}
		}
	}
	// Net sessions started: one, in the hour of the earliest event.
	total := map[rollup.Bucket]int64{}
	for _, m := range a {
		for bk, ms := range m {
			total[bk] += ms["sessions"]
		}
	}
	for bk, n := range total {
		want := int64(0)
		if bk.Name == rollup.Hourly.Bucket(at(8, 59)) || bk.Period == rollup.Daily {
			want = 1
		}
		if n != want {
			t.Errorf("sessions started in %s %s = %d, want %d", bk.Period, bk.Name, n, want)
		}
	}
}
