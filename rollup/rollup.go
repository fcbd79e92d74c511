package rollup

import (
	"fmt"
	"sort"
	"time"

	"github.com/axiomhq/hyperloglog"
)

// Period is the length of a bucket.
type Period string

// The periods of a roll-up.
const (
	Hourly Period = "hourly"
	Daily  Period = "daily"
)

// Periods lists every period, shortest first.
var Periods = []Period{Hourly, Daily}

type periodSpec struct {
	layout string
	length time.Duration
}

var periodSpecs = map[Period]periodSpec{
	Hourly: {layout: "2006-01-02T15:00:00Z", length: time.Hour},
	Daily:  {layout: time.DateOnly, length: 24 * time.Hour},
}

// Valid reports whether p is Hourly or Daily.
func (p Period) Valid() bool { _, ok := periodSpecs[p]; return ok }

// Length is the duration of one bucket of p (0 for an unknown period).
func (p Period) Length() time.Duration { return periodSpecs[p].length }

// Start is the start of the UTC bucket of p holding t.
func (p Period) Start(t time.Time) time.Time { return t.UTC().Truncate(p.Length()) }

// Bucket names the UTC bucket of p holding t: 2026-05-12T14:00:00Z for
// an hour, 2026-05-12 for a day. Names sort as the buckets follow each
// other in time. It is empty for an unknown period.
func (p Period) Bucket(t time.Time) string {
	spec, ok := periodSpecs[p]
	if !ok {
		return ""
	}
	return t.UTC().Format(spec.layout)
}

// Parse returns the start of the bucket named name.
func (p Period) Parse(name string) (time.Time, error) {
	spec, ok := periodSpecs[p]
	if !ok {
		return time.Time{}, fmt.Errorf("rollup: unknown period %q", p)
	}
	t, err := time.Parse(spec.layout, name)
	if err != nil {
		return time.Time{}, fmt.Errorf("rollup: %q is not a %s bucket", name, p)
	}
	return t, nil
}

// Bucket is one period's bucket of one series.
type Bucket struct {
	// Series separates independent roll-ups kept in one Rollup (a
	// source, a currency); empty when there is one.
	Series string
	Period Period
	// Name is Period.Bucket of the bucket's start.
	Name string
}

// BucketOf is the bucket of period p holding t in series.
func BucketOf(series string, p Period, t time.Time) Bucket {
	return Bucket{Series: series, Period: p, Name: p.Bucket(t)}
}

// Start parses the bucket's name.
func (b Bucket) Start() time.Time {
	t, _ := b.Period.Parse(b.Name)
	return t
}

// Measures are named counters. Adding a Measures adds name by name.
type Measures map[string]int64

// Add adds o into m.
func (m Measures) Add(o Measures) {
	for k, v := range o {
		m[k] += v
	}
}

// Cell is what a batch added to one bucket.
type Cell struct {
	Bucket
	Measures Measures
	// Distinct estimates the distinct values added (users); nil when
	// none were.
	Distinct *hyperloglog.Sketch
}

// Rollup adds up measures per bucket in memory. The zero value is not
// usable; build one with New. It is not safe for concurrent use.
type Rollup struct {
	periods []Period
	cells   map[Bucket]*Cell
}

// New returns an empty Rollup over periods (default: Periods).
func New(periods ...Period) *Rollup {
	if len(periods) == 0 {
		periods = Periods
	}
	return &Rollup{periods: periods, cells: map[Bucket]*Cell{}}
}

// Add adds m, and distinct when it is not empty, to the bucket of every
// period of r holding t.
func (r *Rollup) Add(series string, t time.Time, m Measures, distinct string) {
	for _, p := range r.periods {
		r.AddTo(BucketOf(series, p, t), m, distinct)
	}
}

// AddTo adds m, and distinct when it is not empty, to bucket b. A writer
// that filters per bucket (a watermark per stored bucket) calls AddTo
// for the buckets an event still counts in.
func (r *Rollup) AddTo(b Bucket, m Measures, distinct string) {
	c := r.cells[b]
	if c == nil {
		c = &Cell{Bucket: b, Measures: Measures{}}
		r.cells[b] = c
	}
	c.Measures.Add(m)
	if distinct != "" {
		if c.Distinct == nil {
			c.Distinct = NewSketch()
		}
		c.Distinct.Insert([]byte(distinct))
	}
}

// Touch makes sure b has a cell, even if nothing is added to it.
func (r *Rollup) Touch(b Bucket) {
	if r.cells[b] == nil {
		r.cells[b] = &Cell{Bucket: b, Measures: Measures{}}
	}
}

// Len is the number of cells.
func (r *Rollup) Len() int { return len(r.cells) }

// Cells returns the cells ordered by series, period and bucket.
func (r *Rollup) Cells() []*Cell {
	out := make([]*Cell, 0, len(r.cells))
	for _, c := range r.cells {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Bucket, out[j].Bucket
		if a.Series != b.Series {
			return a.Series < b.Series
		}
		if a.Period != b.Period {
			return a.Period < b.Period
		}
		return a.Name < b.Name
	})
	return out
}

// NewSketch returns an empty sketch of the precision every roll-up uses
// (14, sparse while small).
func NewSketch() *hyperloglog.Sketch { return hyperloglog.New14() }

// UnmarshalSketch decodes a stored sketch; empty data is an empty sketch.
func UnmarshalSketch(data []byte) (*hyperloglog.Sketch, error) {
	sk := NewSketch()
	if len(data) == 0 {
		return sk, nil
	}
	if err := sk.UnmarshalBinary(data); err != nil {
		return nil, fmt.Errorf("rollup: decode sketch: %w", err)
	}
	return sk, nil
}

// MergeSketches decodes and merges stored sketches (the union of what
// each counted: merging is idempotent, so merging a sketch twice changes
// nothing) and returns the merged sketch.
func MergeSketches(stored ...[]byte) (*hyperloglog.Sketch, error) {
	out := NewSketch()
	for _, data := range stored {
		if len(data) == 0 {
			continue
		}
		sk, err := UnmarshalSketch(data)
		if err != nil {
			return nil, err
		}
		if err := out.Merge(sk); err != nil {
			return nil, fmt.Errorf("rollup: merge sketch: %w", err)
		}
	}
	return out, nil
}
