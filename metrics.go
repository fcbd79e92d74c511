package eventpipe

import (
	"context"
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/eventpipe/eventpipe/httpapi"
)

// NewMetricsRegistry returns a Prometheus registry with the Go runtime and
// process collectors, for a process's metrics.
func NewMetricsRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// ServeMetrics serves reg on addr (/metrics and /healthz) until ctx ends,
// within httpapi's connection limits as the EVENTPIPE_HTTP_* variables
// set them (httpapi.LimitsFromEnv; the defaults when unset).
func ServeMetrics(ctx context.Context, addr string, reg *prometheus.Registry) error {
	limits, err := httpapi.LimitsFromEnv(os.LookupEnv)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	srv, err := httpapi.New(httpapi.Config{Addr: addr, Registry: reg, Limits: limits})
	if err != nil {
		return err
	}
	return srv.Run(ctx, nil)
}
