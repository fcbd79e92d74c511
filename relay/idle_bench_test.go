package relay_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/relay"
)

// BenchmarkAppendLatencyWithIdleRelays measures what idle relays cost the
// write path: b.N single-event appends (one aggregate, one after the
// other, as commands arrive) with 0, 1 and 2 relays running, and reports
// append latency p50/p99 of each and the ratio of the 1- and 2-relay
// figures to the 0-relay baseline measured in the same run (the project's
// target is ≤ 1.1).
//
// Each relay reads its own events table, whose stream has a few events it
// has already relayed and no traffic after: an idle relay, as when
// `eventpipe relay` runs beside a quiet application. (Relays on the table
// being appended to would not be idle; they would read and publish every
// append, which BenchmarkRelayVsRawGetRecords measures.) All tables share
// one DynamoDB Local, whose stream records of every table live in one
// store that each GetRecords scans, so idle polling costs more the more
// records the stack holds; the benchmark adds none of its own beyond a
// few, and reports what the relays' GetRecords calls cost on the stack as
// it is (getrecords_ms) and how often each idle relay called it.
//
// Relays use the production defaults (lease duration, discovery interval);
// the sub-benchmarks differ in MaxIdlePoll: the default (1s) and the
// former 250ms. The configurations alternate in rounds within one run.
// Nothing about time is asserted.
func BenchmarkAppendLatencyWithIdleRelays(b *testing.B) {
	for _, maxIdle := range []time.Duration{relay.DefaultMaxIdlePoll, 250 * time.Millisecond} {
		b.Run(fmt.Sprintf("max_idle_poll=%v", maxIdle), func(b *testing.B) {
			benchAppendWithIdleRelays(b, maxIdle)
		})
	}
}

func benchAppendWithIdleRelays(b *testing.B, maxIdle time.Duration) {
	const maxRelays = 2
	e := newEnv(b)
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	cfgs := make([]relay.Config, maxRelays)
	streams := make([]*timedStreams, maxRelays)
	for i := range cfgs {
		idle := newEnv(b)
		idle.appendTicks(b, eventstore.Ref{Type: "tick", ID: "idle"}, 0, 3)
		cfg := idle.relayConfig(b, fmt.Sprintf("idle-%d", i))
		streams[i] = &timedStreams{StreamsAPI: cfg.Streams}
		cfg.Streams, cfg.MaxIdlePoll, cfg.Logger = streams[i], maxIdle, quiet
		cfg.LeaseDuration, cfg.DiscoveryInterval = 0, 0 // production defaults
		cfgs[i] = cfg
	}
	// A relay reaches MaxIdlePoll within about 2×MaxIdlePoll of its last
	// non-empty read; settle waits for that before appends are timed.
	settle := 2*maxIdle + time.Second

	ref := eventstore.Ref{Type: "tick", ID: "writer"}
	version := int64(0)
	appendOne := func() time.Duration {
		req, err := eventstore.Prepare(ref, version, eventstore.Change{Events: []eventstore.NewEvent{eventstore.Event("Ticked", version+1)}}, eventstore.Schema{})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := e.store.Append(ctx, req); err != nil {
			b.Fatal(err)
		}
		version++
		return time.Since(start)
	}

	latencies := make([][]time.Duration, maxRelays+1)
	var polls int          // GetRecords calls of idle relays once backed off
	var pollTime float64   // relay-seconds over which they were counted
	var pollCost []float64 // their durations, in ms
	const rounds = 4
	per := max(1, (b.N+rounds-1)/rounds)
	b.ResetTimer()
	for round := range rounds {
		n := min(per, b.N-round*per)
		if n <= 0 {
			break
		}
		for k := range maxRelays + 1 {
			relays := (k + round) % (maxRelays + 1) // rotate the order between rounds
			stops := make([]func() error, relays)
			seen := make([]int, relays)
			for i := range relays {
				seen[i] = len(streams[i].snapshot())
				stops[i] = runRelay(b, cfgs[i])
			}
			backedOff := time.Now().Add(2 * maxIdle)
			if relays > 0 {
				time.Sleep(settle)
			}
			for range n {
				latencies[relays] = append(latencies[relays], appendOne())
			}
			end := time.Now()
			for i := range relays {
				if err := stops[i](); err != nil {
					b.Fatalf("relay %d: %v", i, err)
				}
				for _, r := range streams[i].snapshot()[seen[i]:] {
					if r.start.After(backedOff) && r.start.Before(end) {
						polls++
						pollCost = append(pollCost, float64(r.end.Sub(r.start))/float64(time.Millisecond))
					}
				}
				pollTime += end.Sub(backedOff).Seconds()
			}
		}
	}
	b.StopTimer()

	pct := func(l []time.Duration, q float64) float64 {
		l = slices.Clone(l)
		slices.Sort(l)
		return float64(l[min(len(l)-1, int(q*float64(len(l))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(0, "ns/op")
	base50, base99 := pct(latencies[0], 0.50), pct(latencies[0], 0.99)
	b.ReportMetric(base50, "base_p50_ms")
	b.ReportMetric(base99, "base_p99_ms")
	for relays := 1; relays <= maxRelays; relays++ {
		p50, p99 := pct(latencies[relays], 0.50), pct(latencies[relays], 0.99)
		b.ReportMetric(p50, fmt.Sprintf("relays%d_p50_ms", relays))
		b.ReportMetric(p99, fmt.Sprintf("relays%d_p99_ms", relays))
		b.ReportMetric(p50/base50, fmt.Sprintf("relays%d_p50_ratio", relays))
		b.ReportMetric(p99/base99, fmt.Sprintf("relays%d_p99_ratio", relays))
	}
	if pollTime > 0 {
		b.ReportMetric(float64(polls)/pollTime, "getrecords/s/relay")
	}
	if len(pollCost) > 0 {
		slices.Sort(pollCost)
		b.ReportMetric(pollCost[len(pollCost)/2], "getrecords_ms")
	}
}
