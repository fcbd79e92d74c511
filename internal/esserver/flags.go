package esserver

import (
	"context"

	"github.com/spf13/pflag"
)

// BindFlags registers the server's command-line flags on fs, writing into
// c. `eventpipe stack es-server` and test harnesses share it.
func (c *Config) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:9200", "listen address (127.0.0.1:port)")
	fs.StringVar(&c.DataDir, "data-dir", "", "folder persisting indices, aliases and the write-ahead log (required)")
	fs.DurationVar(&c.RefreshInterval, "refresh-interval", 0, "default index.refresh_interval (0: 1s)")
}

// Run starts a Server from cfg and serves until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	s, err := New(cfg)
	if err != nil {
		return err
	}
	return s.ListenAndServe(ctx)
}
