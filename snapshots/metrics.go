package snapshots

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names of a Consumer (each labelled aggregate_type).
const (
	MetricWritten  = "eventpipe_snapshots_written_total"
	MetricSkipped  = "eventpipe_snapshots_skipped_total"
	MetricFailures = "eventpipe_snapshots_failures_total"
	MetricSeconds  = "eventpipe_snapshots_seconds"
)

// metrics are the consumer's Prometheus series.
type metrics struct {
	written  *prometheus.CounterVec
	skipped  *prometheus.CounterVec
	failures *prometheus.CounterVec // also by kind: transient, permanent
	seconds  *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		written: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricWritten,
			Help: "Snapshots taken and stored (a snapshot a concurrent one had already covered counts too).",
		}, []string{"aggregate_type"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricSkipped,
			Help: "Triggering events a snapshot this consumer took had already covered, acked without I/O.",
		}, []string{"aggregate_type"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricFailures,
			Help: "Failed snapshot attempts by kind: transient (retried) or permanent (poisoned, given up on included).",
		}, []string{"aggregate_type", "kind"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricSeconds,
			Help:    "Time to take and store one snapshot (load, replay, write).",
			Buckets: prometheus.ExponentialBuckets(0.002, 2, 12),
		}, []string{"aggregate_type"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.written, m.skipped, m.failures, m.seconds} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("snapshots: register metrics: %w", err)
			}
		}
	}
	return m, nil
}
