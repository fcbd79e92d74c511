package relay

import "github.com/prometheus/client_golang/prometheus"

// metrics are the relay's Prometheus series.
type metrics struct {
	records   *prometheus.CounterVec // by outcome: published, skipped, poison
	batches   prometheus.Counter
	lag       *prometheus.GaugeVec // by shard: now − ApproximateCreationDateTime
	held      prometheus.Gauge
	takeovers prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventpipe_relay_records_total",
			Help: "Stream records handled by the relay, by outcome (published, skipped, poison).",
		}, []string{"outcome"}),
		batches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventpipe_relay_batches_total",
			Help: "Batches published to Kafka and checkpointed.",
		}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "eventpipe_relay_lag_seconds",
			Help: "Now minus the ApproximateCreationDateTime of the last record published, per shard (0 when caught up).",
		}, []string{"shard"}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eventpipe_relay_leases_held",
			Help: "Shard leases this worker holds.",
		}),
		takeovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventpipe_relay_lease_takeovers_total",
			Help: "Leases taken from another worker after they expired, or stolen to balance.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.records, m.batches, m.lag, m.held, m.takeovers)
	}
	return m
}
