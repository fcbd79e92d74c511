package esserver

import (
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
)

// Config configures a Server.
type Config struct {
	// Addr is the TCP address to listen on; default "127.0.0.1:9200".
	// Use "127.0.0.1:0" for an ephemeral port and read it back with Server.Addr.
	Addr string
	// DataDir is the directory where indices, the write-ahead log and
	// snapshots persist. Required. It is created when missing.
	DataDir string
	// RefreshInterval is the default index.refresh_interval: writes become
	// visible to search at the latest this long after they are acknowledged.
	// Default 1s.
	RefreshInterval time.Duration
	// Logger receives the server's logs; default slog.Default().
	Logger *slog.Logger

	// TLSCertFile and TLSKeyFile are a PEM server certificate (optionally
	// followed by its intermediates) and its private key. Set both to
	// serve HTTPS; with neither the server speaks plain HTTP.
	TLSCertFile, TLSKeyFile string
	// TLSCAFile optionally names a PEM file of CA certificates appended to
	// the certificate chain the server sends, as Elasticsearch 8's
	// auto-configured HTTP certificate does, so that clients pinning the
	// CA's SHA-256 fingerprint (go-elasticsearch's CertificateFingerprint)
	// find it. Needs TLSCertFile.
	TLSCAFile string
	// CredentialsFile names a JSON file of users and API keys (see
	// Credentials). When set, every request must authenticate with HTTP
	// Basic or "Authorization: ApiKey base64(id:api_key)"; otherwise it is
	// answered 401 as Elasticsearch 8 does. Empty: no authentication.
	CredentialsFile string
	// DestructiveRequiresName is the node setting
	// action.destructive_requires_name: when true, deleting indices (and
	// adding index blocks) through wildcards or _all is refused and every
	// index must be named. nil means true, Elasticsearch 8's default. The
	// cluster settings API (PUT /_cluster/settings) overrides it, transient
	// over persistent over this.
	DestructiveRequiresName *bool
}

func (c *Config) setDefaults() {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:9200"
	}
	if c.RefreshInterval == 0 {
		c.RefreshInterval = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first invalid field of c, naming it.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("esserver: Config: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if c.DataDir == "" {
		return bad("DataDir", "is empty: it is required")
	}
	if c.Addr != "" {
		if _, _, err := net.SplitHostPort(c.Addr); err != nil {
			return bad("Addr", "%q: %v", c.Addr, err)
		}
	}
	switch {
	case c.TLSCertFile != "" && c.TLSKeyFile == "":
		return bad("TLSKeyFile", "is empty but TLSCertFile is set: TLSCertFile and TLSKeyFile go together; set both or neither")
	case c.TLSCertFile == "" && c.TLSKeyFile != "":
		return bad("TLSCertFile", "is empty but TLSKeyFile is set: TLSCertFile and TLSKeyFile go together; set both or neither")
	case c.TLSCAFile != "" && c.TLSCertFile == "":
		return bad("TLSCAFile", "needs TLSCertFile and TLSKeyFile")
	case c.RefreshInterval < 0:
		return bad("RefreshInterval", "%v must not be negative", c.RefreshInterval)
	}
	return nil
}
