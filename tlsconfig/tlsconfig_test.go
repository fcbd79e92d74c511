package tlsconfig_test

import (
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe/dev/certs"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/tlsconfig"
)

// TestBuildTrustsTheCAFileAndPresentsTheClientCertificate serves HTTPS
// with a certificate of a test CA that requires a client certificate of
// the same CA: a client from Build with the CA and a client certificate
// gets through; one trusting the system roots, or without the client
// certificate, does not.
func TestBuildTrustsTheCAFileAndPresentsTheClientCertificate(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	caFile, _, err := ca.WriteCA(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	server, _ := ca.Server("127.0.0.1")
	client, _ := ca.Client("eventpipe")
	clientCert, clientKey, err := client.Write(dir, "client")
	if err != nil {
		t.Fatal(err)
	}
	srvCert, err := server.TLS()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(r.TLS.PeerCertificates[0].Subject.CommonName))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{srvCert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool()}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	get := func(c tlsconfig.Config) error {
		cfg, err := c.Build()
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
		resp, err := hc.Get(srv.URL)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return nil
	}
	if err := get(tlsconfig.Config{CAFile: caFile, CertFile: clientCert, KeyFile: clientKey, MinVersion: "1.3"}); err != nil {
		t.Fatalf("CA and client certificate: %v", err)
	}
	if err := get(tlsconfig.Config{Enabled: true, CertFile: clientCert, KeyFile: clientKey}); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("system roots: %v; want an unknown authority", err)
	}
	if err := get(tlsconfig.Config{CAFile: caFile}); err == nil {
		t.Errorf("no client certificate: the server let the client in")
	}
}

// TestBuildRefusesSettingsThatCannotWork: plain text for the zero
// Config; half a client certificate, an unknown version and a CA file
// without certificates are ValidationErrors; FromEnv reads the prefix's
// variables.
func TestBuildRefusesSettingsThatCannotWork(t *testing.T) {
	if cfg, err := (tlsconfig.Config{}).Build(); cfg != nil || err != nil {
		t.Errorf("zero Config: %v, %v; want plain text", cfg, err)
	}
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]tlsconfig.Config{
		"cert without key": {CertFile: "client.pem"},
		"version 1.1":      {Enabled: true, MinVersion: "1.1"},
		"CA not PEM":       {CAFile: notPEM},
	} {
		var verr *eventstore.ValidationError
		if _, err := c.Build(); !errors.As(err, &verr) {
			t.Errorf("%s: %v; want a ValidationError", name, err)
		}
	}
	env := map[string]string{"P_TLS": "true", "P_TLS_CA_FILE": "/ca.pem", "P_TLS_SERVER_NAME": "kafka.internal"}
	c, err := tlsconfig.FromEnv("P_", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil || !c.Enabled || c.CAFile != "/ca.pem" || c.ServerName != "kafka.internal" {
		t.Errorf("FromEnv: %+v, %v", c, err)
	}
	env["P_TLS"] = "maybe"
	if _, err := tlsconfig.FromEnv("P_", func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err == nil {
		t.Errorf("FromEnv with P_TLS=maybe: no error")
	}
}
