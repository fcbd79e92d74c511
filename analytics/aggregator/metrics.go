package aggregator

import "github.com/prometheus/client_golang/prometheus"

// metrics are the consumer's Prometheus series.
type metrics struct {
	events       *prometheus.CounterVec // by outcome: applied, duplicate, redelivered
	writes       *prometheus.CounterVec // by item: aggregation, session
	conflicts    prometheus.Counter
	failures     prometheus.Counter
	poison       prometheus.Counter
	batchSeconds prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventpipe_analytics_aggregator_events_total",
			Help: "Analytics events by outcome: applied, duplicate (a copy recognised by its id), redelivered (contributions skipped by a watermark).",
		}, []string{"outcome"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventpipe_analytics_aggregator_writes_total",
			Help: "Conditional DynamoDB writes by item kind (aggregation, session).",
		}, []string{"item"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventpipe_analytics_aggregator_conflicts_total",
			Help: "Conditional writes that found the item changed by another writer and read it again.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventpipe_analytics_aggregator_batch_failures_total",
			Help: "Batches that failed and were retried.",
		}),
		poison: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventpipe_analytics_aggregator_poison_total",
			Help: "Messages that were not analytics events, sent to the poison topic.",
		}),
		batchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "eventpipe_analytics_aggregator_batch_seconds",
			Help:    "Time to fold and write one batch, retries included.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}),
	}
	// Every outcome and item exists from the start at 0: a rate or an
	// increase sees the first batch (a series born at N has no increase).
	for _, outcome := range []string{"applied", "duplicate", "redelivered"} {
		m.events.WithLabelValues(outcome)
	}
	for _, item := range []string{"aggregation", "session"} {
		m.writes.WithLabelValues(item)
	}
	if reg != nil {
		reg.MustRegister(m.events, m.writes, m.conflicts, m.failures, m.poison, m.batchSeconds)
	}
	return m
}

func (m *metrics) observe(out BatchOutcome, err error) {
	m.conflicts.Add(float64(out.Conflicts))
	if err != nil {
		m.failures.Inc() // the batch is folded again: count it then
		return
	}
	m.events.WithLabelValues("applied").Add(float64(out.Applied))
	m.events.WithLabelValues("duplicate").Add(float64(out.Duplicates))
	m.events.WithLabelValues("redelivered").Add(float64(out.Redelivered))
	m.writes.WithLabelValues("aggregation").Add(float64(out.BucketWrites))
	m.writes.WithLabelValues("session").Add(float64(out.SessionWrites))
}
