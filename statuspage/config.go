package statuspage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
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
}

// maxSamples bounds the samples kept (History/Interval+1).
const maxSamples = 100_000

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Reader == nil:
		return errors.New("statuspage: Config.Reader is nil")
	case c.Interval < 0:
		return fmt.Errorf("statuspage: Config.Interval is negative (%s)", c.Interval)
	case c.History < c.Interval:
		return fmt.Errorf("statuspage: Config.History (%s) is shorter than Config.Interval (%s)", c.History, c.Interval)
	case c.Interval > 0 && c.History/c.Interval >= maxSamples:
		return fmt.Errorf("statuspage: Config.History (%s) holds more than %d samples of Config.Interval (%s)", c.History, maxSamples, c.Interval)
	case c.ReadTimeout < 0:
		return fmt.Errorf("statuspage: Config.ReadTimeout is negative (%s)", c.ReadTimeout)
	}
	return nil
}

// samples is how many samples the page keeps.
func (c Config) samples() int { return int(c.History/c.Interval) + 1 }
