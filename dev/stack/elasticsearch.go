package stack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/eventpipe/eventpipe/dev/esserver"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/internal/probe"
)

// Files of the secured Elasticsearch-API server, under <stack dir>/secure/.
const (
	esSecureCA          = "ca.pem"              // the CA that signed server.pem
	esSecureCert        = "server.pem"          // server certificate for 127.0.0.1 and localhost
	esSecureKey         = "server-key.pem"      // its key
	esSecureCredentials = "es-credentials.json" // users and API keys (esserver.Credentials)
)

// elasticsearch is the stack's Elasticsearch-API server (dev/esserver,
// inside the eventpipe binary): Elasticsearch itself cannot be installed on
// these machines. A non-loopback ELASTICSEARCH_URL (a real Elasticsearch 8,
// e.g. docker-compose's) is external and left alone.
//
// With Config.Secure the server serves HTTPS with secure/server.pem (its
// chain completed with secure/ca.pem, so clients may pin the CA's
// fingerprint) and requires the credentials of secure/es-credentials.json;
// its URL is then https:// whatever the scheme of ELASTICSEARCH_URL.
func (s *Stack) elasticsearch() *component {
	ep := s.cfg.Endpoints.Elasticsearch
	secure := s.cfg.Secure
	sec := func(name string) string { return filepath.Join(s.cfg.Dir, "secure", name) }
	c := &component{
		name:       "elasticsearch",
		addr:       ep,
		envVar:     endpoints.EnvElasticsearch,
		marker:     s.dataDir("elasticsearch"),
		stopSignal: syscall.SIGTERM,
		health: func(ctx context.Context) error {
			return probe.Elasticsearch(ctx, ep, s.cfg.Endpoints.ElasticsearchSecurity)
		},
	}
	u, err := url.Parse(ep)
	if err != nil || !(u.Scheme == "http" || secure && u.Scheme == "https") {
		return c // external (or unusable): health says why
	}
	host, _, loopback := loopbackHostPort(u.Host)
	c.managed = loopback && host == "127.0.0.1"
	if secure && c.managed {
		base := "https://" + u.Host
		c.addr = base
		c.health = func(ctx context.Context) error {
			return probeSecureES(ctx, base, sec(esSecureCA), sec(esSecureCredentials))
		}
	}
	c.prepare = func(context.Context) error {
		if secure {
			var missing []string
			for _, f := range []string{esSecureCA, esSecureCert, esSecureKey, esSecureCredentials} {
				if _, err := os.Stat(sec(f)); err != nil {
					missing = append(missing, sec(f))
				}
			}
			if len(missing) > 0 {
				return fmt.Errorf("secure mode: missing %v", missing)
			}
		}
		return os.MkdirAll(s.dataDir("elasticsearch"), 0o755)
	}
	c.command = func() (*processSpec, error) {
		args := append([]string{}, s.cfg.ESServerCommand[1:]...)
		args = append(args, "--addr", u.Host, "--data-dir", s.dataDir("elasticsearch"))
		if secure {
			args = append(args,
				"--tls-cert-file", sec(esSecureCert),
				"--tls-key-file", sec(esSecureKey),
				"--tls-ca-file", sec(esSecureCA),
				"--credentials-file", sec(esSecureCredentials))
		}
		return &processSpec{path: s.cfg.ESServerCommand[0], args: args, env: s.cfg.ESServerEnv}, nil
	}
	return c
}

// probeSecureES is the health check of the secured server: GET / over TLS
// verified against caFile, authenticated with the first API key of the
// credentials file (or its first user when it has no key), expecting 200
// and the product header, as probe.Elasticsearch does in plain mode.
// Errors never carry a secret.
func probeSecureES(ctx context.Context, baseURL, caFile, credFile string) error {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("elasticsearch: read CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("elasticsearch: %s holds no PEM certificate", caFile)
	}
	creds, err := esserver.LoadCredentials(credFile)
	if err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, probe.DefaultTimeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/", nil)
	if err != nil {
		return fmt.Errorf("elasticsearch request %s: %w", baseURL, err)
	}
	who := ""
	switch {
	case len(creds.APIKeys) > 0:
		k := creds.APIKeys[0]
		req.Header.Set("Authorization", "ApiKey "+k.Encoded())
		who = "API key " + k.ID
	default:
		users := make([]string, 0, len(creds.Users))
		for name := range creds.Users {
			users = append(users, name)
		}
		sort.Strings(users)
		req.SetBasicAuth(users[0], creds.Users[users[0]])
		who = "user " + users[0]
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return fmt.Errorf("elasticsearch GET %s/ (TLS, CA %s): %w", baseURL, caFile, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("elasticsearch GET %s/ as %s: status %s", baseURL, who, resp.Status)
	}
	if got := resp.Header.Get("X-Elastic-Product"); got != "Elasticsearch" {
		return fmt.Errorf("elasticsearch GET %s/: X-Elastic-Product is %q, want \"Elasticsearch\"", baseURL, got)
	}
	return nil
}
