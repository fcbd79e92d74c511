// Package tlsconfig builds the client *tls.Config that every connection
// eventpipe opens (Kafka, Elasticsearch) takes from the same settings: a
// CA bundle to trust, an optional client certificate for mutual TLS, the
// server name to verify and a minimum version. Everything is read from
// files, so no key material passes through flags or logs. Postgres takes
// its TLS settings from its URL (sslmode, sslrootcert, sslcert, sslkey);
// the AWS SDK uses the system roots.
package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/eventpipe/eventpipe/eventstore"
)

// Config says whether and how a client speaks TLS. The zero value is plain
// text. Setting any file turns TLS on; Enabled alone turns it on with the
// system's roots.
type Config struct {
	// Enabled turns TLS on with the system's roots when no CAFile is given.
	Enabled bool
	// CAFile is a PEM bundle of the certificate authorities to trust
	// instead of the system's roots.
	CAFile string
	// CertFile and KeyFile are the PEM client certificate and key for
	// mutual TLS; both or neither.
	CertFile, KeyFile string
	// ServerName overrides the host name verified in the server's
	// certificate (default: the host dialled).
	ServerName string
	// MinVersion is "1.2" (default) or "1.3".
	MinVersion string
}

// On reports whether the settings ask for TLS.
func (c Config) On() bool {
	return c.Enabled || c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.ServerName != ""
}

// Validate reports settings that cannot work, as an
// *eventstore.ValidationError naming the field.
func (c Config) Validate() error {
	if (c.CertFile == "") != (c.KeyFile == "") {
		return &eventstore.ValidationError{Field: "TLS.CertFile", Reason: "a client certificate needs both CertFile and KeyFile"}
	}
	if _, err := minVersion(c.MinVersion); err != nil {
		return err
	}
	return nil
}

func minVersion(s string) (uint16, error) {
	switch strings.TrimSpace(s) {
	case "", "1.2":
		return tls.VersionTLS12, nil
	case "1.3":
		return tls.VersionTLS13, nil
	default:
		return 0, &eventstore.ValidationError{Field: "TLS.MinVersion", Reason: fmt.Sprintf("%q is not 1.2 or 1.3", s)}
	}
}

// Build returns the client *tls.Config of c, or nil when c asks for plain
// text. A file that cannot be read or holds no certificate is an error
// naming the file.
func (c Config) Build() (*tls.Config, error) {
	if !c.On() {
		return nil, nil
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	version, _ := minVersion(c.MinVersion)
	cfg := &tls.Config{MinVersion: version, ServerName: c.ServerName}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: read CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &eventstore.ValidationError{Field: "TLS.CAFile", Reason: fmt.Sprintf("%s holds no PEM certificate", c.CAFile)}
		}
		cfg.RootCAs = pool
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: load client certificate %s: %w", c.CertFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// FromEnv reads a Config from the environment variables named prefix +
// "TLS", "TLS_CA_FILE", "TLS_CERT_FILE", "TLS_KEY_FILE",
// "TLS_SERVER_NAME" and "TLS_MIN_VERSION" (e.g. prefix
// "EVENTPIPE_KAFKA_"). "TLS" is true/false/1/0.
func FromEnv(prefix string, lookup func(string) (string, bool)) (Config, error) {
	get := func(name string) string {
		v, _ := lookup(prefix + name)
		return strings.TrimSpace(v)
	}
	c := Config{
		CAFile:     get("TLS_CA_FILE"),
		CertFile:   get("TLS_CERT_FILE"),
		KeyFile:    get("TLS_KEY_FILE"),
		ServerName: get("TLS_SERVER_NAME"),
		MinVersion: get("TLS_MIN_VERSION"),
	}
	switch strings.ToLower(get("TLS")) {
	case "", "0", "false", "no", "off":
	case "1", "true", "yes", "on":
		c.Enabled = true
	default:
		return c, &eventstore.ValidationError{Field: prefix + "TLS", Reason: fmt.Sprintf("%q is not a boolean", get("TLS"))}
	}
	return c, c.Validate()
}

// Exports returns c as the environment variables FromEnv reads, for
// `eventpipe stack env`; empty settings are left out.
func (c Config) Exports(prefix string) [][2]string {
	var kv [][2]string
	if c.Enabled {
		kv = append(kv, [2]string{prefix + "TLS", "true"})
	}
	for _, p := range [][2]string{{"TLS_CA_FILE", c.CAFile}, {"TLS_CERT_FILE", c.CertFile}, {"TLS_KEY_FILE", c.KeyFile},
		{"TLS_SERVER_NAME", c.ServerName}, {"TLS_MIN_VERSION", c.MinVersion}} {
		if p[1] != "" {
			kv = append(kv, [2]string{prefix + p[0], p[1]})
		}
	}
	return kv
}

// EnvAllowCleartextCredentials, set to 1 (true), lets every client send
// credentials without TLS to a host that is not loopback: SASL PLAIN or
// SCRAM to Kafka, an API key or password to Elasticsearch over http://,
// a password to Postgres without sslmode=require (or stricter). Unset, such
// settings are refused; loopback hosts are always allowed.
const EnvAllowCleartextCredentials = "EVENTPIPE_ALLOW_CLEARTEXT_CREDENTIALS"

// AllowCleartextFromEnv reads EVENTPIPE_ALLOW_CLEARTEXT_CREDENTIALS
// (true/false/1/0, unset false).
func AllowCleartextFromEnv(lookup func(string) (string, bool)) (bool, error) {
	v, _ := lookup(EnvAllowCleartextCredentials)
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "0", "false", "no", "off":
		return false, nil
	case "1", "true", "yes", "on":
		return true, nil
	default:
		return false, &eventstore.ValidationError{Field: EnvAllowCleartextCredentials, Reason: fmt.Sprintf("%q is not a boolean", v)}
	}
}

// IsLoopback reports whether host (a name, an IP or host:port) is this
// machine: localhost, 127.0.0.0/8, ::1, or a Unix socket's path.
func IsLoopback(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") || strings.HasPrefix(host, "/") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// RefuseCleartext returns the *eventstore.ValidationError of field when
// credentials would cross the network in clear text: allow is false and
// one of hosts is not loopback (IsLoopback). what says which credentials
// go where and how, fix how to turn encryption on; the error names both
// and how to allow it anyway. Nil otherwise.
func RefuseCleartext(field, what, fix string, hosts []string, allow bool) error {
	if allow {
		return nil
	}
	for _, h := range hosts {
		if !IsLoopback(h) {
			return &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(
				"%s to %s, which is not loopback, in clear text: %s, or allow it with AllowCleartextCredentials (%s=1)",
				what, h, fix, EnvAllowCleartextCredentials)}
		}
	}
	return nil
}
