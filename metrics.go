package eventpipe

import (
	"context"
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/eventpipe/eventpipe/buildinfo"
	"github.com/eventpipe/eventpipe/httpapi"
)

// NewMetricsRegistry returns a Prometheus registry with the Go runtime and
// process collectors and eventpipe_build_info (the running build, package
// buildinfo), for a process's metrics.
func NewMetricsRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoGauge(buildinfo.Read()))
	return reg
}

// buildInfoGauge is eventpipe_build_info{version,commit,goversion} 1, the
// usual way to join a process's series with the build it runs.
func buildInfoGauge(info buildinfo.Info) prometheus.Collector {
	commit := info.Commit
	if info.Modified {
		commit += "+modified"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "eventpipe_build_info", Help: "The running build: 1, labelled with its version, VCS commit (+modified for a changed tree) and Go version.",
		ConstLabels: prometheus.Labels{"version": info.Version, "commit": commit, "goversion": info.GoVersion}})
	g.Set(1)
	return g
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
