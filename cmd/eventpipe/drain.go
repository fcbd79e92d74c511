package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/eventpipe/eventpipe/health"
)

// The environment variables of the drain flags.
const (
	envGracePeriod = "EVENTPIPE_GRACE_PERIOD"
	envDrainDelay  = "EVENTPIPE_DRAIN_DELAY"
)

// The drain flags' defaults: below Kubernetes' 30 s
// terminationGracePeriodSeconds, and a delay long enough for a load
// balancer polling /readyz every second or so to notice.
const (
	defaultGracePeriod = 25 * time.Second
	defaultDrainDelay  = 2 * time.Second
)

// drainSettings are a long-running command's --grace-period and
// --drain-delay.
type drainSettings struct {
	grace, delay time.Duration
	cmd          *cobra.Command
}

// addDrainFlags registers --grace-period and --drain-delay on cmd.
func addDrainFlags(cmd *cobra.Command) *drainSettings {
	d := &drainSettings{cmd: cmd}
	cmd.Flags().DurationVar(&d.grace, "grace-period", defaultGracePeriod, "on SIGTERM or SIGINT, the time the process has to drain and exit; past it, it exits with status 1 (default $"+envGracePeriod+", else "+defaultGracePeriod.String()+")")
	cmd.Flags().DurationVar(&d.delay, "drain-delay", defaultDrainDelay, "on SIGTERM or SIGINT, how long /readyz answers 503 while the process still works, before it stops taking new work (load balancers notice), within the grace period (default $"+envDrainDelay+", else "+defaultDrainDelay.String()+")")
	return d
}

// resolve reads the variables of the flags not given and validates.
func (d *drainSettings) resolve() error {
	for _, f := range []struct {
		flag, env string
		v         *time.Duration
	}{{"grace-period", envGracePeriod, &d.grace}, {"drain-delay", envDrainDelay, &d.delay}} {
		if d.cmd.Flags().Changed(f.flag) {
			continue
		}
		if s := os.Getenv(f.env); s != "" {
			v, err := time.ParseDuration(s)
			if err != nil {
				return fmt.Errorf("%s: %w", f.env, err)
			}
			*f.v = v
		}
	}
	switch {
	case d.grace <= 0:
		return fmt.Errorf("--grace-period %v: must be positive", d.grace)
	case d.delay < 0:
		return fmt.Errorf("--drain-delay %v: must not be negative", d.delay)
	case d.delay >= d.grace:
		return fmt.Errorf("--drain-delay %v: must be shorter than --grace-period %v", d.delay, d.grace)
	}
	return nil
}

// stopBudget is what is left of the grace period for the work to stop
// once the drain delay is over, less a margin for closing clients and
// exiting: the bound of an HTTP server's shutdown or a router's close.
func (d *drainSettings) stopBudget() time.Duration {
	return max(d.grace-d.delay-2*time.Second, time.Second)
}

// run runs work and, when serve is not nil, the probes' listener until
// ctx ends (SIGTERM or SIGINT), then drains: probes not ready at once,
// work's context ended after the drain delay, the listener's once work
// has returned (so /readyz answers 503 to the end). Past the grace
// period from ctx's end the process exits with status 1. It logs how
// long the drain took.
func (d *drainSettings) run(ctx context.Context, probes *health.Probes, serve, work func(context.Context) error) error {
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	srvCtx, stopSrv := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSrv()
	var signalled atomic.Int64 // unix nanoseconds
	drained := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-drained:
			return
		}
		signalled.Store(time.Now().UnixNano())
		probes.Drain()
		slog.Info("asked to stop: draining", "drain_delay", d.delay, "grace_period", d.grace)
		time.AfterFunc(d.grace, func() {
			slog.Error("grace period over: exiting before the drain finished", "grace_period", d.grace)
			os.Exit(1)
		})
		select {
		case <-time.After(d.delay):
		case <-drained:
		}
		slog.Info("stopping work")
		stopWork()
	}()
	var g errgroup.Group
	g.Go(func() error {
		defer stopSrv()
		defer close(drained)
		return work(workCtx)
	})
	if serve != nil {
		g.Go(func() error {
			err := serve(srvCtx)
			if err != nil {
				stopWork()
			}
			return err
		})
	}
	err := g.Wait()
	if at := signalled.Load(); at != 0 {
		slog.Info("drained", "took", time.Since(time.Unix(0, at)).Round(time.Millisecond), "grace_period", d.grace)
	}
	return err
}

// startedWhen marks probes started once cond holds, polling it until
// ctx ends.
func startedWhen(ctx context.Context, probes *health.Probes, cond func() bool) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
	probes.Started()
	slog.Info("started")
}
