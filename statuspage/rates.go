package statuspage

import (
	"cmp"
	"slices"
	"time"
)

// Sample is a Snapshot and when its reading finished.
type Sample struct {
	At time.Time `json:"at"`
	Snapshot
}

// RatePoint is the events rate between two consecutive samples, by
// aggregate type: how far each events topic's newest offset moved,
// divided by the time between the samples.
type RatePoint struct {
	// At is the later sample's time; Seconds the time since the earlier.
	At      time.Time `json:"at"`
	Seconds float64   `json:"seconds"`
	// PerMinute has the events per minute of every aggregate type whose
	// topic both samples read; Total is their sum.
	PerMinute map[string]float64 `json:"per_minute"`
	Total     float64            `json:"total"`
}

// Throughput is one aggregate type's events in the latest sample.
type Throughput struct {
	AggregateType string `json:"aggregate_type"`
	Topic         string `json:"topic"`
	// Newest is the events topic's newest offset, summed over partitions.
	Newest int64 `json:"newest"`
	// PerMinute is the rate between the last two samples (0 until there
	// are two); InHistory counts the events published over the history
	// kept (the sum of the offsets' moves between its samples).
	PerMinute float64 `json:"per_minute"`
	InHistory int64   `json:"in_history"`
}

// rates derives the rate history from samples (oldest first) and counts
// each aggregate type's events over them. A pair of samples where either
// could not read the offsets adds no point; an offset that went back (a
// topic deleted and made again) counts as no events.
func rates(samples []Sample) (points []RatePoint, counted map[string]int64) {
	counted = map[string]int64{}
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		secs := b.At.Sub(a.At).Seconds()
		if a.Events == nil || b.Events == nil || secs <= 0 {
			continue
		}
		before := map[string]int64{}
		for _, e := range a.Events {
			before[e.AggregateType] = e.Newest
		}
		p := RatePoint{At: b.At, Seconds: secs, PerMinute: map[string]float64{}}
		for _, e := range b.Events {
			prev, ok := before[e.AggregateType]
			if !ok {
				continue
			}
			moved := max(e.Newest-prev, 0)
			counted[e.AggregateType] += moved
			p.PerMinute[e.AggregateType] = float64(moved) * 60 / secs
			p.Total += p.PerMinute[e.AggregateType]
		}
		points = append(points, p)
	}
	return points, counted
}

// throughput is the latest sample's events by aggregate type, with the
// last rate point's rate when it ends at that sample.
func throughput(latest Sample, points []RatePoint, counted map[string]int64) []Throughput {
	var last *RatePoint
	if n := len(points); n > 0 && points[n-1].At.Equal(latest.At) {
		last = &points[n-1]
	}
	out := make([]Throughput, 0, len(latest.Events))
	for _, e := range latest.Events {
		t := Throughput{AggregateType: e.AggregateType, Topic: e.Topic, Newest: e.Newest, InHistory: counted[e.AggregateType]}
		if last != nil {
			t.PerMinute = last.PerMinute[e.AggregateType]
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Throughput) int { return cmp.Compare(a.AggregateType, b.AggregateType) })
	return out
}
