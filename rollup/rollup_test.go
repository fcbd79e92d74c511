package rollup_test

import (
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/rollup"
)

func TestBucketsNameUTCHoursAndDays(t *testing.T) {
	at := time.Date(2026, 5, 12, 16, 59, 59, 999, time.FixedZone("CEST", 2*3600)) // 14:59:59 UTC
	if got := rollup.Hourly.Bucket(at); got != "2026-05-12T14:00:00Z" {
		t.Errorf("hour = %s", got)
	}
	if got := rollup.Daily.Bucket(at); got != "2026-05-12" {
		t.Errorf("day = %s", got)
	}
	start, err := rollup.Hourly.Parse("2026-05-12T14:00:00Z")
	if err != nil || !start.Equal(rollup.Hourly.Start(at)) {
		t.Errorf("Parse = %v, %v; Start = %v", start, err, rollup.Hourly.Start(at))
	}
	if _, err := rollup.Daily.Parse("2026-05-12T14:00:00Z"); err == nil {
		t.Error("an hour parsed as a day")
	}
	if rollup.Period("weekly").Valid() || rollup.Period("weekly").Bucket(at) != "" {
		t.Error("an unknown period is valid")
	}
}

func TestRollupAddsPerBucketAndCountsDistinctValues(t *testing.T) {
	r := rollup.New()
	t0 := time.Date(2026, 5, 12, 14, 10, 0, 0, time.UTC)
	r.Add("site", t0, rollup.Measures{"events": 1}, "u1")
	r.Add("site", t0.Add(10*time.Minute), rollup.Measures{"events": 1, "pageViews": 1}, "u1")
	r.Add("site", t0.Add(time.Hour), rollup.Measures{"events": 1}, "u2")
	r.Add("other", t0, rollup.Measures{"events": 5}, "")
	got := map[rollup.Bucket]rollup.Measures{}
	users := map[rollup.Bucket]uint64{}
	for _, c := range r.Cells() {
		got[c.Bucket] = c.Measures
		if c.Distinct != nil {
			users[c.Bucket] = c.Distinct.Estimate()
		}
	}
	h14, h15 := rollup.BucketOf("site", rollup.Hourly, t0), rollup.BucketOf("site", rollup.Hourly, t0.Add(time.Hour))
	day := rollup.BucketOf("site", rollup.Daily, t0)
	if r.Len() != 5 || got[h14]["events"] != 2 || got[h14]["pageViews"] != 1 || got[h15]["events"] != 1 || got[day]["events"] != 3 {
		t.Errorf("cells = %v", got)
	}
	if users[h14] != 1 || users[day] != 2 || users[rollup.BucketOf("other", rollup.Daily, t0)] != 0 {
		t.Errorf("distinct = %v", users)
	}
}

func TestMergingSketchesIsAnIdempotentUnion(t *testing.T) {
	a, b := rollup.NewSketch(), rollup.NewSketch()
	for i := range 100 {
		a.Insert([]byte{byte(i)})
		b.Insert([]byte{byte(i + 50)})
	}
	ab, _ := a.MarshalBinary()
	bb, _ := b.MarshalBinary()
	once, err := rollup.MergeSketches(ab, bb)
	if err != nil {
		t.Fatal(err)
	}
	twice, err := rollup.MergeSketches(ab, bb, ab, nil, bb)
	if err != nil {
		t.Fatal(err)
	}
	if once.Estimate() != 150 || twice.Estimate() != once.Estimate() {
		t.Errorf("union %d, merged twice %d; want 150 both", once.Estimate(), twice.Estimate())
	}
	if _, err := rollup.MergeSketches([]byte("junk")); err == nil {
		t.Error("junk merged")
	}
}
