package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
)

// Limits bound what one connection may cost a server: how long a client
// may take to send a request, how long an answer may take to write, how
// long an idle keep-alive connection stays open and how large a
// request's headers may be. A connection past a limit is closed by the
// server. Zero fields take the defaults, which a public endpoint can
// live with; every server the binary starts (API, operator, metrics)
// takes its limits from here.
type Limits struct {
	// ReadHeaderTimeout bounds reading a request's headers (default
	// DefaultReadHeaderTimeout, or ReadTimeout when that is shorter).
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, headers and body
	// (default DefaultReadTimeout); a client that trickles its body is
	// cut off.
	ReadTimeout time.Duration
	// WriteTimeout bounds the time from the end of the request's headers
	// to the end of the answer (default DefaultWriteTimeout). No route
	// long-polls or streams, so every answer fits in it.
	WriteTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a keep-alive
	// connection (default DefaultIdleTimeout).
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line and headers (default
	// DefaultMaxHeaderBytes); larger ones get 431.
	MaxHeaderBytes int
}

// The default Limits.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultMaxHeaderBytes    = 1 << 20
)

// Environment variables LimitsFromEnv reads (`serve`, `relay` and
// `consume` take them; serve's --http-* flags override them): durations
// in Go's syntax ("30s", "2m"), the header size in bytes.
const (
	EnvReadHeaderTimeout = "EVENTPIPE_HTTP_READ_HEADER_TIMEOUT"
	EnvReadTimeout       = "EVENTPIPE_HTTP_READ_TIMEOUT"
	EnvWriteTimeout      = "EVENTPIPE_HTTP_WRITE_TIMEOUT"
	EnvIdleTimeout       = "EVENTPIPE_HTTP_IDLE_TIMEOUT"
	EnvMaxHeaderBytes    = "EVENTPIPE_HTTP_MAX_HEADER_BYTES"
)

// WithDefaults returns l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	set := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	set(&l.ReadTimeout, DefaultReadTimeout)
	set(&l.ReadHeaderTimeout, min(DefaultReadHeaderTimeout, l.ReadTimeout))
	set(&l.WriteTimeout, DefaultWriteTimeout)
	set(&l.IdleTimeout, DefaultIdleTimeout)
	if l.MaxHeaderBytes == 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	return l
}

// Validate reports the first invalid field as an
// *eventstore.ValidationError (named Limits.<field>): a negative value,
// or a ReadHeaderTimeout longer than the ReadTimeout that contains it.
// Zero fields are valid (they take the defaults).
func (l Limits) Validate() error {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"ReadHeaderTimeout", l.ReadHeaderTimeout}, {"ReadTimeout", l.ReadTimeout}, {"WriteTimeout", l.WriteTimeout}, {"IdleTimeout", l.IdleTimeout}} {
		if f.d < 0 {
			return &eventstore.ValidationError{Field: "Limits." + f.name, Reason: fmt.Sprintf("%s is negative", f.d)}
		}
	}
	if l.MaxHeaderBytes < 0 {
		return &eventstore.ValidationError{Field: "Limits.MaxHeaderBytes", Reason: fmt.Sprintf("%d is negative", l.MaxHeaderBytes)}
	}
	d := l.WithDefaults()
	if d.ReadHeaderTimeout > d.ReadTimeout {
		return &eventstore.ValidationError{Field: "Limits.ReadHeaderTimeout", Reason: fmt.Sprintf("%s is longer than ReadTimeout %s, which includes the headers", d.ReadHeaderTimeout, d.ReadTimeout)}
	}
	return nil
}

// apply sets the limits (defaults filled) on srv.
func (l Limits) apply(srv *http.Server) {
	l = l.WithDefaults()
	srv.ReadHeaderTimeout = l.ReadHeaderTimeout
	srv.ReadTimeout = l.ReadTimeout
	srv.WriteTimeout = l.WriteTimeout
	srv.IdleTimeout = l.IdleTimeout
	srv.MaxHeaderBytes = l.MaxHeaderBytes
}

// LimitsFromEnv returns the Limits the EVENTPIPE_HTTP_* variables set
// (unset ones zero: their defaults). A value that does not parse, or
// limits that do not validate, is an *eventstore.ValidationError naming
// the variable or field.
func LimitsFromEnv(lookup func(string) (string, bool)) (Limits, error) {
	var l Limits
	for _, d := range []struct {
		env string
		dst *time.Duration
	}{{EnvReadHeaderTimeout, &l.ReadHeaderTimeout}, {EnvReadTimeout, &l.ReadTimeout}, {EnvWriteTimeout, &l.WriteTimeout}, {EnvIdleTimeout, &l.IdleTimeout}} {
		v, _ := lookup(d.env)
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		x, err := time.ParseDuration(v)
		if err != nil {
			return Limits{}, &eventstore.ValidationError{Field: d.env, Reason: fmt.Sprintf("%q is not a duration", v)}
		}
		*d.dst = x
	}
	if v, _ := lookup(EnvMaxHeaderBytes); strings.TrimSpace(v) != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return Limits{}, &eventstore.ValidationError{Field: EnvMaxHeaderBytes, Reason: fmt.Sprintf("%q is not a number of bytes", v)}
		}
		l.MaxHeaderBytes = n
	}
	return l, l.Validate()
}
