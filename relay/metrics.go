package relay

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the relay's Prometheus series. Each carries the const
// label stream=<Config.StreamName>.
type metrics struct {
	records   *prometheus.CounterVec // by outcome: published, skipped, poison
	batches   prometheus.Counter
	lag       *prometheus.GaugeVec // by shard: now − ApproximateCreationDateTime
	held      prometheus.Gauge
	takeovers prometheus.Counter
	passes    prometheus.Histogram // discovery pass durations
}

// newMetrics builds the series and registers them on reg (when not nil)
// under the label stream=<stream>. A registerer that already holds them
// for that stream is an error, and nothing stays registered.
func newMetrics(reg prometheus.Registerer, stream string) (*metrics, error) {
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
		passes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "eventpipe_relay_discovery_pass_seconds",
			Help:    "How long each discovery pass took (list the stream and the leases, take and steal): a dead worker's shards are taken within the lease duration plus two discovery intervals and two passes.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
	}
	// Every outcome exists from the start at 0, so that an alert on
	// increase(…{outcome="poison"}) sees the first poisoned record (a
	// series born at 1 has no increase) and a scrape of an idle relay
	// already shows every series.
	for _, outcome := range []string{"published", "skipped", "poison"} {
		m.records.WithLabelValues(outcome)
	}
	if reg == nil {
		return m, nil
	}
	reg = prometheus.WrapRegistererWith(prometheus.Labels{"stream": stream}, reg)
	all := []prometheus.Collector{m.records, m.batches, m.lag, m.held, m.takeovers, m.passes}
	for i, c := range all {
		if err := reg.Register(c); err != nil {
			for _, done := range all[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("relay: register metrics of stream %q: %w", stream, err)
		}
	}
	return m, nil
}
