// Package httpapi is eventpipe's HTTP front door: a server with JSON
// errors, a request size limit, health and Prometheus endpoints and
// graceful shutdown, onto which resources mount their handlers (the
// write side mounts every resource of its catalogue, for example the todo
// API of domains/todo/todoapi).
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/tracing"
)

// Config configures a Server.
type Config struct {
	// Addr is the listen address (default DefaultAddr).
	Addr string
	// MaxBodyBytes bounds a request body (default 64 KiB); larger bodies
	// get 413.
	MaxBodyBytes int64
	// ShutdownTimeout bounds the wait for in-flight requests when the
	// context ends (default 10s).
	ShutdownTimeout time.Duration
	// Registry serves /metrics (default: a new registry).
	Registry *prometheus.Registry
	// OmitMetrics leaves /metrics out: the process serves it on another
	// listener (an operator address apart from the API's).
	OmitMetrics bool
	// Middleware, when set, wraps every route (authentication, package
	// httpapi/auth); it runs inside the request's trace span and after the
	// body limit is applied.
	Middleware func(http.Handler) http.Handler
	// Logger logs one line per failed request (default slog.Default()).
	Logger *slog.Logger
	// Limits bound each connection's time and header size (zero fields:
	// the defaults, see Limits).
	Limits Limits
}

// DefaultAddr is the API's listen address when none is given: loopback.
const DefaultAddr = "127.0.0.1:8080"

func (c *Config) setDefaults() {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 64 << 10
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("httpapi: Config: %w", &eventstore.ValidationError{Field: "Addr", Reason: fmt.Sprintf("%q: %v", c.Addr, err)})
	}
	if c.MaxBodyBytes < 0 {
		return fmt.Errorf("httpapi: Config: %w", &eventstore.ValidationError{Field: "MaxBodyBytes", Reason: fmt.Sprintf("%d is negative", c.MaxBodyBytes)})
	}
	if err := c.Limits.Validate(); err != nil {
		return fmt.Errorf("httpapi: Config: %w", err)
	}
	return nil
}

// Server serves the API. Mount handlers on Mux before Run.
type Server struct {
	cfg Config
	Mux *Mux
}

// Mux is an http.ServeMux that remembers the patterns mounted on it, so
// that what a server serves can be listed (Patterns) and checked: every
// route of the API is documented and tested under authentication.
type Mux struct {
	*http.ServeMux
	patterns []string
}

// Handle registers handler for pattern (http.ServeMux.Handle).
func (m *Mux) Handle(pattern string, handler http.Handler) {
	m.ServeMux.Handle(pattern, handler)
	m.patterns = append(m.patterns, pattern)
}

// HandleFunc registers handler for pattern (http.ServeMux.HandleFunc).
func (m *Mux) HandleFunc(pattern string, handler func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(handler))
}

// Patterns are the patterns mounted so far, in order.
func (m *Mux) Patterns() []string { return append([]string(nil), m.patterns...) }

// New returns a Server with /healthz and (unless OmitMetrics) /metrics
// mounted.
func New(cfg Config) (*Server, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, Mux: &Mux{ServeMux: http.NewServeMux()}}
	s.Mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	if !cfg.OmitMetrics {
		s.Mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{}))
	}
	return s, nil
}

// Handler returns the server's handler with the body size limit and
// Config.Middleware applied. Every answer carries a fresh correlation id
// in X-Request-Id (RequestID; see WriteServerError).
// Each request is traced (a server span continuing an incoming W3C
// traceparent header; see package tracing).
func (s *Server) Handler() http.Handler {
	var routes http.Handler = s.Mux
	if s.cfg.Middleware != nil {
		routes = s.cfg.Middleware(routes)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = withRequest(w, r, s.cfg.Logger)
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
		routes.ServeHTTP(w, r)
	})
	return otelhttp.NewHandler(h, "http", otelhttp.WithPropagators(tracing.Propagator()), otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
		return r.Method + " " + r.URL.Path
	}))
}

// Run listens on Addr and serves, within Config.Limits, until ctx ends,
// then shuts down gracefully within ShutdownTimeout. ready, if not nil, receives the bound
// address once listening.
func (s *Server) Run(ctx context.Context, ready chan<- string) error {
	l, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("httpapi: listen %s: %w", s.cfg.Addr, err)
	}
	srv := &http.Server{
		Handler:  s.Handler(),
		ErrorLog: slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
	}
	s.cfg.Limits.apply(srv)
	if ready != nil {
		ready <- l.Addr().String()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return fmt.Errorf("httpapi: serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("httpapi: shutdown: %w", err)
	}
	return nil
}

// Error is the JSON body of every error response.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// RequestID is the request's correlation id on a 5xx answer (the
	// X-Request-Id header's), which the server's log names.
	RequestID string `json:"requestId,omitempty"`
}

// WriteError writes {"code":…, "message":…} with status; a 5xx also
// carries the request's correlation id (the X-Request-Id header the
// Server set). msg must be fit for any client: a backend's error goes
// through WriteServerError instead.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	e := Error{Code: code, Message: msg}
	if status >= 500 {
		e.RequestID = w.Header().Get(HeaderRequestID)
	}
	WriteJSON(w, status, e)
}

// WriteJSON writes v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// DecodeJSON decodes a request body into v, writing the error response
// (413 for a body over the limit, 400 otherwise) and returning false on
// failure.
// Unknown fields are refused (eventstore.DecodeStrict).
func DecodeJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		WriteError(w, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("request body exceeds %d bytes", tooBig.Limit))
		return false
	case err != nil:
		WriteError(w, http.StatusBadRequest, "unreadable_body", err.Error())
		return false
	}
	if err := eventstore.DecodeStrict("request body", body, v); err != nil {
		WriteError(w, http.StatusBadRequest, "malformed_json", err.Error())
		return false
	}
	return true
}
