// Package statuspage serves eventpipe's status as a web page: GET /status
// is a server-rendered HTML page (inline CSS and SVG, no JavaScript) with
// every consumer group's position, lag, poisoned and parked messages, the
// relay streams' leases, the sagas' instances and the events per minute by
// aggregate type with a chart over the history kept; GET /status.json has
// the same numbers for scripts and tests. Both also say which build serves
// them (Config.Build) and who may reach the HTTP API when Config.Access is
// given (the caller converts its authentication configuration and policy).
//
// A Page samples a Reader every Config.Interval in the background and keeps
// the samples of Config.History in a ring. Rates are the differences of
// each events topic's newest offset between two samples. Sampling starts
// with the first request, so a server nobody looks at reads nothing; Close
// stops it. The page knows nothing of how the status is read: package
// operator fills a Snapshot from its StatusReport (StatusPageReader).
package statuspage

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/eventpipe/eventpipe/buildinfo"
	"github.com/eventpipe/eventpipe/httpapi"
)

// Page is the status page, an http.Handler. It is safe for concurrent use.
type Page struct {
	cfg    Config
	ctx    context.Context // the sampler's; Close cancels it
	cancel context.CancelFunc
	first  chan struct{} // closed by the first sample
	done   chan struct{} // closed when the sampler has stopped

	mu      sync.Mutex
	started bool
	closed  bool
	samples *ring[Sample]
}

// New validates cfg and returns a Page. It reads nothing until the first
// request.
func New(cfg Config) (*Page, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Access = cfg.Access.clone()
	ctx, cancel := context.WithCancel(context.Background())
	return &Page{cfg: cfg, ctx: ctx, cancel: cancel, first: make(chan struct{}), done: make(chan struct{}),
		samples: newRing[Sample](cfg.samples())}, nil
}

// Mount serves p on mux (an *http.ServeMux or an *httpapi.Mux) at
// GET /status (HTML) and GET /status.json.
func (p *Page) Mount(mux interface{ Handle(string, http.Handler) }) {
	mux.Handle("GET /status", p)
	mux.Handle("GET /status.json", p)
}

// ServeHTTP serves the JSON report (Report) for a path ending in ".json"
// and the HTML page for any other. The first request starts the sampler
// and waits for its first sample (or for the request to end); a page
// without a sample says so (JSON: 503).
func (p *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.start()
	select {
	case <-p.first:
	default:
		// The first reading may take up to ReadTimeout, as long as the
		// server's write limit (httpapi.Limits): give this answer that
		// time and a margin.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(p.cfg.ReadTimeout + 10*time.Second))
	}
	select {
	case <-p.first:
	case <-p.done:
	case <-r.Context().Done():
	}
	rep := p.report()
	if strings.HasSuffix(r.URL.Path, ".json") {
		if rep.Latest == nil {
			httpapi.WriteError(w, http.StatusServiceUnavailable, "no_sample", "the status has not been read yet")
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, rep)
		return
	}
	p.render(w, r, rep)
}

// Close stops the sampler and waits for a reading under way to return
// (its reader's context is cancelled). The page keeps serving the samples
// it has. Close always returns nil; calling it again does nothing.
func (p *Page) Close() error {
	p.mu.Lock()
	started := p.started
	if !p.closed {
		p.closed = true
		p.cancel()
		if !started {
			close(p.done)
		}
	}
	p.mu.Unlock()
	<-p.done
	return nil
}

// start starts the sampler unless it runs or the page is closed.
func (p *Page) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.closed {
		return
	}
	p.started = true
	go p.run()
}

// run samples at once and then every Interval until Close.
func (p *Page) run() {
	defer close(p.done)
	tick := time.NewTicker(p.cfg.Interval)
	defer tick.Stop()
	for p.ctx.Err() == nil { // a tick and Close at once: select may pick the tick
		p.sample()
		select {
		case <-p.ctx.Done():
		case <-tick.C:
		}
	}
}

// sample reads once and keeps the sample, unless Close interrupted it.
func (p *Page) sample() {
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.ReadTimeout)
	defer cancel()
	snap := p.cfg.Reader.ReadStatus(ctx)
	if p.ctx.Err() != nil {
		return // half a reading is no sample
	}
	if len(snap.Errors) > 0 {
		p.cfg.Logger.DebugContext(ctx, "status page: parts of the status could not be read", "errors", snap.Errors, "took", snap.Took)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.samples.push(Sample{At: time.Now(), Snapshot: snap})
	select {
	case <-p.first:
	default:
		close(p.first)
	}
}

// Report is the body of GET /status.json.
type Report struct {
	// Interval and History are the page's settings, in seconds; Samples
	// how many samples it holds now.
	Interval float64 `json:"interval_seconds"`
	History  float64 `json:"history_seconds"`
	Samples  int     `json:"samples"`
	// Latest is the newest sample.
	Latest *Sample `json:"latest"`
	// Throughput has the latest sample's events per aggregate type.
	Throughput []Throughput `json:"throughput"`
	// Rates is the rate history, oldest first: one point per pair of
	// consecutive samples.
	Rates []RatePoint `json:"rates"`
	// Access is Config.Access, nil when not given (Mode "").
	Access *Access `json:"access,omitempty"`
	// Build is Config.Build: the build of the process serving the page.
	Build buildinfo.Info `json:"build"`
}

// report builds the Report of the samples kept now.
func (p *Page) report() Report {
	p.mu.Lock()
	samples := p.samples.values()
	p.mu.Unlock()
	rep := Report{Interval: p.cfg.Interval.Seconds(), History: p.cfg.History.Seconds(), Samples: len(samples), Build: p.cfg.Build}
	if p.cfg.Access.Mode != "" {
		a := p.cfg.Access // read-only after New
		rep.Access = &a
	}
	if len(samples) == 0 {
		return rep
	}
	latest := samples[len(samples)-1]
	points, counted := rates(samples)
	rep.Latest, rep.Rates, rep.Throughput = &latest, points, throughput(latest, points, counted)
	return rep
}
