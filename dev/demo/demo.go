// Package demo runs the pipeline for a newcomer and narrates it: it
// starts `serve`, `relay` and `consume --all` as child processes of the
// eventpipe binary, sends a burst of realistic commands (bank accounts,
// orders, todos over HTTP), and shows what was accepted and rejected,
// what was appended, what the relay published, how the consumers' lag
// falls to zero and what each read model then holds, checked against
// what the commands imply; then it posts a browsing burst to the analytics
// API and shows the sessions and hourly aggregations the aggregation
// consumer makes of it, and the hourly order roll-up, each next to what
// the burst and the orders imply; the transfer saga's three outcomes;
// and day two: two consumers of the demo's own, run in this process, meet
// a bug fixed by a poison redrive and a by-design refusal released by a
// parked skip. `eventpipe demo` runs it.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/eventstore"
)

// Config configures Run.
type Config struct {
	// Binary is the eventpipe binary the children run (default: this
	// process's executable).
	Binary string
	// Endpoints give every address (each empty field from the
	// environment: Endpoints.Fill); the children get them through the
	// environment.
	Endpoints eventpipe.Endpoints
	// RelayMetricsAddr and ConsumeMetricsAddr are where the relay and the
	// consumers serve /metrics (defaults 127.0.0.1:9464 and :9465).
	RelayMetricsAddr, ConsumeMetricsAddr string
	// LogDir receives the children's logs (default: a temporary folder).
	LogDir string
	// RunID makes this run's aggregate ids unique (default: from the
	// clock), so the demo can run again on the same tables.
	RunID string
	// Once returns after the story; otherwise Run waits for ctx to end,
	// with the pipeline up to try.
	Once bool
	// Out receives the story (default os.Stdout).
	Out io.Writer
	// Timeout bounds the wait for the read models (default 90s).
	Timeout time.Duration
	// AuthToken, when set, turns the HTTP API's auth on: serve runs
	// with the JWT configuration of the environment (what `eventpipe
	// stack env` prints for a secured stack) and the demo sends this
	// bearer token with each of its requests. Empty: serve --no-auth.
	AuthToken string
	// AuthSubject is AuthToken's subject, named in the story; required
	// with AuthToken.
	AuthSubject string
}

// httpTimeout bounds each of the demo's HTTP requests.
const httpTimeout = 30 * time.Second

func (c *Config) setDefaults() error {
	if c.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("demo: find the eventpipe binary: %w", err)
		}
		c.Binary = exe
	}
	c.Endpoints = c.Endpoints.Fill()
	if c.RelayMetricsAddr == "" {
		c.RelayMetricsAddr = "127.0.0.1:9464"
	}
	if c.ConsumeMetricsAddr == "" {
		c.ConsumeMetricsAddr = "127.0.0.1:9465"
	}
	if c.LogDir == "" {
		dir, err := os.MkdirTemp("", "eventpipe-demo-")
		if err != nil {
			return fmt.Errorf("demo: log folder: %w", err)
		}
		c.LogDir = dir
	}
	if c.RunID == "" {
		c.RunID = time.Now().UTC().Format("150405")
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	if c.Timeout == 0 {
		c.Timeout = 90 * time.Second
	}
	return nil
}

// Validate reports the first unusable field.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("demo: Config: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	for _, a := range []struct{ field, addr string }{
		{"RelayMetricsAddr", c.RelayMetricsAddr},
		{"ConsumeMetricsAddr", c.ConsumeMetricsAddr},
		{"Endpoints.HTTPAddr", c.Endpoints.HTTPAddr},
	} {
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			return bad(a.field, "%q: %v", a.addr, err)
		}
	}
	if (c.AuthToken == "") != (c.AuthSubject == "") {
		return bad("AuthSubject", "AuthToken and AuthSubject go together")
	}
	if strings.ContainsAny(c.RunID, "#\x00 ") {
		return bad("RunID", "%q has a reserved character ('#', NUL or space)", c.RunID)
	}
	return nil
}

// Run tells the story. It returns an error when a step fails or the read
// models do not come to what the commands imply within Timeout.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.setDefaults(); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	n := &narrator{out: cfg.Out}
	own, err := newDayTwo(cfg)
	if err != nil {
		return err
	}
	n.chapter("Storage")
	m, err := eventpipe.Migrate(ctx, eventpipe.MigrateConfig{Process: eventpipe.Process{Catalog: own.catalog, Endpoints: cfg.Endpoints, Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		return err
	}
	n.line("DynamoDB tables %s, %s and %s ready at %s; Postgres read models at version %d in schema %s",
		m.EventsTable, m.LeasesTable, m.AnalyticsTable, cfg.Endpoints.DynamoDB, m.PostgresVersion, m.PostgresSchema)

	n.chapter("The pipeline")
	serve := []string{"serve", "--no-auth"}
	if cfg.AuthToken != "" {
		serve = []string{"serve"}
		n.line("auth on: the HTTP API verifies JWTs and its policy; the demo acts as %q with a token of the stack's key set", cfg.AuthSubject)
	}
	procs := &children{binary: cfg.Binary, logDir: cfg.LogDir}
	defer procs.stop(n)
	for _, c := range []struct {
		name   string
		args   []string
		health string
	}{
		{"serve", serve, "http://" + cfg.Endpoints.HTTPAddr + "/healthz"},
		{"relay", []string{"relay", "--metrics-addr", cfg.RelayMetricsAddr}, "http://" + cfg.RelayMetricsAddr + "/healthz"},
		{"consume", []string{"consume", "--all", "--metrics-addr", cfg.ConsumeMetricsAddr}, "http://" + cfg.ConsumeMetricsAddr + "/healthz"},
	} {
		p, err := procs.start(ctx, c.name, c.args, c.health)
		if err != nil {
			return err
		}
		n.line("%-8s pid %-7d eventpipe %s   (log %s)", c.name, p.cmd.Process.Pid, strings.Join(c.args, " "), p.logPath)
	}

	sc, err := newScenario(ctx, cfg)
	if err != nil {
		return err
	}
	defer sc.close()
	defer own.stop()
	if err := own.start(ctx, n, sc.db); err != nil {
		return err
	}
	if err := sc.accountsChapter(ctx, n); err != nil {
		return err
	}
	if err := sc.ordersChapter(ctx, n); err != nil {
		return err
	}
	if err := sc.todosChapter(ctx, n); err != nil {
		return err
	}
	if err := sc.appended(ctx, n); err != nil {
		return err
	}
	if err := sc.readModels(ctx, n); err != nil {
		return err
	}
	if err := sc.searchChapter(ctx, n); err != nil {
		return err
	}
	if err := sc.analyticsChapter(ctx, n); err != nil {
		return err
	}
	if err := sc.transfersChapter(ctx, n); err != nil {
		return err
	}
	if err := sc.dayTwoChapter(ctx, n, own); err != nil {
		return err
	}

	if cfg.Once {
		n.chapter("Done")
		n.line("every read model shows what the commands imply")
		return nil
	}
	n.chapter("Try it")
	curl := "curl"
	if cfg.AuthToken != "" {
		n.line("a token    TOKEN=$(bin/eventpipe auth token %s)   (auth is on: every curl below sends it)", cfg.AuthSubject)
		curl = `curl -H "Authorization: Bearer $TOKEN"`
	}
	n.line("HTTP API   %s -i http://%s/todo", curl, cfg.Endpoints.HTTPAddr)
	n.line("search     %s 'http://%s/todo/search?q=coffee'   %s 'http://%s/orders/search?status=delivered&min_total=1000'", curl, cfg.Endpoints.HTTPAddr, curl, cfg.Endpoints.HTTPAddr)
	n.line("           %s -i -X POST http://%s/todo -d '{\"id\":\"t1\",\"title\":\"TODO\",\"message\":\"Make coffee\"}'", curl, cfg.Endpoints.HTTPAddr)
	n.line("analytics  %s 'http://%s/sources/%s/sessions'   %s 'http://%s/sources/%s/aggregations?period=daily'",
		curl, cfg.Endpoints.HTTPAddr, sc.id("demo"), curl, cfg.Endpoints.HTTPAddr, sc.id("demo"))
	n.line("           %s -X POST http://%s/sources/%s/events -d '{\"type\":\"page_view\",\"sessionId\":\"s9\",\"url\":\"/\"}'", curl, cfg.Endpoints.HTTPAddr, sc.id("demo"))
	today := time.Now().UTC().Format(time.DateOnly)
	n.line("roll-ups   %s 'http://%s/orders/rollups?period=hourly&from=%s&to=%s'", curl, cfg.Endpoints.HTTPAddr, today, today)
	n.line("metrics    http://%s/metrics (serve)  http://%s/metrics (relay)  http://%s/metrics (consume)",
		cfg.Endpoints.HTTPAddr, cfg.RelayMetricsAddr, cfg.ConsumeMetricsAddr)
	n.line("transfers  bin/eventpipe send RequestTransfer --aggregate-id tr-1 --data '{\"from\":\"%s\",\"to\":\"%s\",\"amount\":25}' --wait",
		sc.id("bob"), sc.id("carol"))
	n.line("commands   bin/eventpipe send CreateTodo --aggregate-id t2 --data '{\"title\":\"hi\"}' --wait")
	n.line("logs       %s", filepath.Join(cfg.LogDir, "*.log"))
	n.line("Ctrl-C stops serve, relay and consume (the stack keeps running; make stack-down stops it).")
	<-ctx.Done()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// narrator prints the story.
type narrator struct {
	out      io.Writer
	chapters int
}

func (n *narrator) chapter(title string) {
	n.chapters++
	fmt.Fprintf(n.out, "\n%d. %s\n", n.chapters, title)
}

func (n *narrator) line(format string, args ...any) {
	fmt.Fprintf(n.out, "   "+format+"\n", args...)
}
