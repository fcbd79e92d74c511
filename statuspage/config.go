package statuspage

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/eventpipe/eventpipe/buildinfo"
	"github.com/eventpipe/eventpipe/eventstore"
)

// Reader reads the pipeline's status once. A part it cannot read goes
// into Snapshot.Errors; it returns what it could read by the time ctx
// ends. The page calls it from one goroutine at a time.
type Reader interface {
	ReadStatus(ctx context.Context) Snapshot
}

// ReaderFunc is a func that is a Reader.
type ReaderFunc func(ctx context.Context) Snapshot

// ReadStatus calls f.
func (f ReaderFunc) ReadStatus(ctx context.Context) Snapshot { return f(ctx) }

// Config configures a Page.
type Config struct {
	// Reader reads the status. Required.
	Reader Reader
	// Interval is the time between two samples (default 10s).
	Interval time.Duration
	// History is how long samples are kept for the rates and the chart
	// (default 30m); the page keeps History/Interval+1 samples.
	History time.Duration
	// ReadTimeout bounds one reading (default 30s).
	ReadTimeout time.Duration
	// Refresh is how often the HTML page reloads itself (default
	// Interval, at least 1s); a negative value turns reloading off.
	Refresh time.Duration
	// Logger receives the samples' errors at debug level (default
	// slog.Default()).
	Logger *slog.Logger
	// Access says who may reach the HTTP API, shown in the page's
	// "Access" section and in /status.json. It is static: the page does
	// not sample it. The zero Access (Mode "") hides the section.
	Access Access
	// Build is the build of the process serving the page, shown under
	// its title and in /status.json (default: buildinfo.Read(), this
	// process's).
	Build buildinfo.Info
}

// Access modes.
const (
	AccessJWT  = "jwt"  // JWT authentication with a policy
	AccessOpen = "open" // no authentication (local development)
)

// Access describes how the HTTP API is protected and who may do what
// through it. The page keeps its own types so that it does not depend on
// the package that enforces it: the caller converts its authentication
// configuration and policy (httpapi/auth) into an Access.
type Access struct {
	// Mode is AccessJWT or AccessOpen; "" means not given, and the page
	// shows no access section.
	Mode string `json:"mode"`
	// Issuer and Audience are the tokens' expected "iss" and "aud"
	// claims, in AccessJWT mode.
	Issuer   string `json:"issuer,omitempty"`
	Audience string `json:"audience,omitempty"`
	// Rules are the policy's rules, in order.
	Rules []AccessRule `json:"rules,omitempty"`
	// Operator says where /metrics and /status are served and how they
	// are protected, as a sentence: e.g. "on the API's listener, behind
	// its authentication", or "on its own listener 127.0.0.1:9090,
	// without authentication (keep it on loopback or a private network)".
	Operator string `json:"operator,omitempty"`
	// BusCommands says how commands from the bus are verified, as a
	// sentence: e.g. "signatures required (producer keys: billing, demo)"
	// or "unsigned commands accepted, their actors recorded as claimed".
	BusCommands string `json:"busCommands,omitempty"`
}

// AccessRule is one rule of the policy: it grants Commands, Read and
// Write to the identities whose subject is in Subjects or that hold one of
// Scopes. "*" in Subjects stands for any authenticated identity; "*" in
// Commands, Read or Write for every command type or resource.
type AccessRule struct {
	Subjects []string `json:"subjects,omitempty"`
	Scopes   []string `json:"scopes,omitempty"`
	// Commands are command types the identities may send.
	Commands []string `json:"commands,omitempty"`
	// Read and Write are resources (the first path segment: todo,
	// analytics, status, …) the identities may read (GET, HEAD) and write
	// other than by a command.
	Read  []string `json:"read,omitempty"`
	Write []string `json:"write,omitempty"`
	// On is "own" when the rule grants only what the identity owns
	// ("any" or empty: everything).
	On string `json:"on,omitempty"`
	// Sources limit the rule to these analytics sources.
	Sources []string `json:"sources,omitempty"`
	// Admin grants every command type, read and write on everything.
	Admin bool `json:"admin,omitempty"`
}

// clone is a deep copy of a, so that the caller may change its slices.
func (a Access) clone() Access {
	a.Rules = slices.Clone(a.Rules)
	for i, r := range a.Rules {
		a.Rules[i] = AccessRule{Subjects: slices.Clone(r.Subjects), Scopes: slices.Clone(r.Scopes),
			Commands: slices.Clone(r.Commands), Read: slices.Clone(r.Read), Write: slices.Clone(r.Write),
			On: r.On, Sources: slices.Clone(r.Sources), Admin: r.Admin}
	}
	return a
}

func (c *Config) setDefaults() {
	if c.Interval == 0 {
		c.Interval = 10 * time.Second
	}
	if c.History == 0 {
		c.History = 30 * time.Minute
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = 30 * time.Second
	}
	if c.Refresh == 0 {
		c.Refresh = max(c.Interval, time.Second)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Build == (buildinfo.Info{}) {
		c.Build = buildinfo.Read()
	}
}

// maxSamples bounds the samples kept (History/Interval+1).
const maxSamples = 100_000

// Validate reports the first invalid field.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("statuspage: Config: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch {
	case c.Reader == nil:
		return bad("Reader", "is nil")
	case c.Interval < 0:
		return bad("Interval", "is negative (%s)", c.Interval)
	case c.History < c.Interval:
		return bad("History", "(%s) is shorter than Interval (%s)", c.History, c.Interval)
	case c.Interval > 0 && c.History/c.Interval >= maxSamples:
		return bad("History", "(%s) holds more than %d samples of Interval (%s)", c.History, maxSamples, c.Interval)
	case c.ReadTimeout < 0:
		return bad("ReadTimeout", "is negative (%s)", c.ReadTimeout)
	case c.Access.Mode != "" && c.Access.Mode != AccessJWT && c.Access.Mode != AccessOpen:
		return bad("Access.Mode", "is %q, want %q, %q or empty", c.Access.Mode, AccessJWT, AccessOpen)
	}
	return nil
}

// samples is how many samples the page keeps.
func (c Config) samples() int { return int(c.History/c.Interval) + 1 }
