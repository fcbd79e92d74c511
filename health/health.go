// Package health answers an orchestrator's three questions about a
// process on /livez, /readyz and /startupz: is it alive (its loops run,
// nothing is deadlocked), has it started (initialisation is done), and
// is it ready for work (its dependencies answer, it has joined its
// consumer groups or taken its leases, and it has not been asked to
// stop). Each answer is 200 with the checks that passed, or 503 with
// those that failed, as a small JSON body; a failed check's reason goes
// to the log, not to the body, since the probes are served without
// authentication.
//
// A process builds one Probes, adds its checks (AddLive, AddReady), calls
// Started once initialised and Drain as soon as it is asked to stop:
// readiness then fails at once with the check "draining", while
// liveness still passes so that the drain is not cut short.
package health

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/httpapi"
)

// The paths Mount serves.
const (
	PathLive    = "/livez"
	PathReady   = "/readyz"
	PathStartup = "/startupz"
)

// Paths are the probes' paths, for an authentication's open paths
// (httpapi/auth Config.Open).
var Paths = []string{PathLive, PathReady, PathStartup}

// The checks Probes adds itself.
const (
	// CheckStarted fails on /startupz and /readyz until Started.
	CheckStarted = "started"
	// CheckDraining fails on /readyz once Drain was called.
	CheckDraining = "draining"
)

// DefaultTimeout bounds each check of one probe request.
const DefaultTimeout = 3 * time.Second

// Check tells whether one condition holds: nil when it does.
type Check func(ctx context.Context) error

// Config configures Probes.
type Config struct {
	// Timeout bounds each check of one request (default DefaultTimeout);
	// a check that has not answered by then failed.
	Timeout time.Duration
	// Logger logs each failed check with its reason, at most once per
	// check and change of its outcome (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports a negative Timeout as an *eventstore.ValidationError.
func (c Config) Validate() error {
	if c.Timeout < 0 {
		return fmt.Errorf("health: Config: %w", &eventstore.ValidationError{Field: "Timeout", Reason: fmt.Sprintf("%v is negative", c.Timeout)})
	}
	return nil
}

// Probes holds a process's checks and state. It is safe for concurrent
// use; checks may be added at any time.
type Probes struct {
	cfg      Config
	started  atomic.Bool
	draining atomic.Bool

	mu      sync.Mutex
	live    []named
	ready   []named
	failing map[string]string // check → last reason logged
}

type named struct {
	name  string
	check Check
}

// New returns Probes with no checks: alive, not started, not ready.
func New(cfg Config) (*Probes, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Probes{cfg: cfg, failing: map[string]string{}}, nil
}

// AddLive adds a liveness check: /livez fails while it fails. It should
// fail only when the process cannot recover by itself (a loop that
// stopped turning), never because a dependency is down.
func (p *Probes) AddLive(name string, c Check) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.live = append(p.live, named{name, c})
}

// AddReady adds a readiness check: /readyz fails while it fails (a
// dependency that does not answer, a group not joined, no lease taken).
func (p *Probes) AddReady(name string, c Check) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ready = append(p.ready, named{name, c})
}

// Started says the process is initialised: /startupz passes from now on.
func (p *Probes) Started() { p.started.Store(true) }

// IsStarted reports whether Started was called.
func (p *Probes) IsStarted() bool { return p.started.Load() }

// Drain says the process was asked to stop: /readyz fails from now on,
// whatever its checks say. Later calls do nothing.
func (p *Probes) Drain() {
	if !p.draining.Swap(true) {
		p.cfg.Logger.Info("draining: /readyz answers 503 from now on")
	}
}

// Draining reports whether Drain was called.
func (p *Probes) Draining() bool { return p.draining.Load() }

// Result is the JSON body of a probe's answer.
type Result struct {
	// Status is "ok" (200) or "failed" (503).
	Status string `json:"status"`
	// Passed and Failed name the checks, sorted.
	Passed []string `json:"passed"`
	Failed []string `json:"failed,omitempty"`
}

// OK reports whether every check passed.
func (r Result) OK() bool { return r.Status == "ok" }

// Live runs the liveness checks.
func (p *Probes) Live(ctx context.Context) Result {
	return p.run(ctx, p.checks(&p.live), nil)
}

// Startup says whether the process has started.
func (p *Probes) Startup(ctx context.Context) Result {
	return p.run(ctx, nil, map[string]bool{CheckStarted: p.IsStarted()})
}

// Ready runs the readiness checks; it fails before Started and after
// Drain without running them.
func (p *Probes) Ready(ctx context.Context) Result {
	fixed := map[string]bool{CheckStarted: p.IsStarted(), CheckDraining: !p.Draining()}
	if !fixed[CheckStarted] || !fixed[CheckDraining] {
		return p.run(ctx, nil, fixed)
	}
	return p.run(ctx, p.checks(&p.ready), fixed)
}

func (p *Probes) checks(which *[]named) []named {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(*which)
}

// run runs checks concurrently, each within the timeout, and adds the
// fixed outcomes.
func (p *Probes) run(ctx context.Context, checks []named, fixed map[string]bool) Result {
	errs := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- c.check(cctx) }()
			select {
			case errs[i] = <-done:
			case <-cctx.Done():
				errs[i] = fmt.Errorf("no answer within %v: %w", p.cfg.Timeout, cctx.Err())
			}
		})
	}
	wg.Wait()
	r := Result{Passed: []string{}}
	for name, ok := range fixed {
		if ok {
			r.Passed = append(r.Passed, name)
		} else {
			r.Failed = append(r.Failed, name)
		}
	}
	for i, c := range checks {
		p.note(c.name, errs[i])
		if errs[i] == nil {
			r.Passed = append(r.Passed, c.name)
		} else {
			r.Failed = append(r.Failed, c.name)
		}
	}
	slices.Sort(r.Passed)
	slices.Sort(r.Failed)
	r.Status = "ok"
	if len(r.Failed) > 0 {
		r.Status = "failed"
	}
	return r
}

// note logs a check's failure when its reason changed, and its recovery.
func (p *Probes) note(name string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	last, was := p.failing[name]
	switch {
	case err == nil && was:
		delete(p.failing, name)
		p.cfg.Logger.Info("health check passes again", "check", name)
	case err != nil && (!was || last != err.Error()):
		p.failing[name] = err.Error()
		p.cfg.Logger.Warn("health check failed", "check", name, "err", err)
	}
}

// Handler answers one probe: 200 with its Result when every check
// passed, else 503.
func Handler(probe func(context.Context) Result) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res := probe(r.Context())
		status := http.StatusOK
		if !res.OK() {
			status = http.StatusServiceUnavailable
		}
		w.Header().Set("Cache-Control", "no-store")
		httpapi.WriteJSON(w, status, res)
	})
}

// Mount serves GET /livez, /readyz and /startupz of p on mux (an
// httpapi.Mux or an *http.ServeMux).
func (p *Probes) Mount(mux interface {
	Handle(pattern string, h http.Handler)
}) {
	mux.Handle("GET "+PathLive, Handler(p.Live))
	mux.Handle("GET "+PathReady, Handler(p.Ready))
	mux.Handle("GET "+PathStartup, Handler(p.Startup))
}
