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
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", "", "PEM server certificate (chain) file: serve HTTPS (with --tls-key-file)")
	fs.StringVar(&c.TLSKeyFile, "tls-key-file", "", "PEM private key file of --tls-cert-file")
	fs.StringVar(&c.TLSCAFile, "tls-ca-file", "", "PEM CA certificate(s) appended to the chain served, so clients can pin the CA's fingerprint")
	fs.StringVar(&c.CredentialsFile, "credentials-file", "",
		`JSON file of users and API keys ({"users":{"name":"password"},"api_keys":[{"id":..,"api_key":..,"name":..}]}); turns authentication on`)
	c.DestructiveRequiresName = new(bool)
	fs.BoolVar(c.DestructiveRequiresName, "destructive-requires-name", true,
		"node setting action.destructive_requires_name: refuse wildcard and _all index deletes (false: allow them, as Elasticsearch's test clusters do); PUT /_cluster/settings overrides it")
}

// Run starts a Server from cfg and serves until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	s, err := New(cfg)
	if err != nil {
		return err
	}
	return s.ListenAndServe(ctx)
}
