package esserver

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8"
	"github.com/elastic/go-elasticsearch/v8/esapi"
	"github.com/elastic/go-elasticsearch/v8/typedapi/types"
	"github.com/spf13/pflag"

	"github.com/eventpipe/eventpipe/dev/certs"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

const (
	testUser     = "elastic"
	testPassword = "s3cret-Password"
	testKeyID    = "VuaCfGcBCdbkQm-e5aOx"
	testKeySec   = "ui2lp2axTNmsyakw9tvNnw"
)

// Elasticsearch 8.15's challenges, in its order.
var wantChallenges = []string{`Basic realm="security", charset="UTF-8"`, "ApiKey"}

// secureEnv is a TLS server requiring credentials, with the files it was
// started from.
type secureEnv struct {
	ca      *certs.CA
	srv     *Server
	url     string
	caPEM   []byte
	leafPEM []byte
	key     APIKey
}

// writeSecureFiles writes a CA, a server certificate for 127.0.0.1 and
// localhost and a credentials file to dir.
func writeSecureFiles(t *testing.T, dir string) (ca *certs.CA, certFile, keyFile, caFile, credFile string, pair certs.Pair) {
	t.Helper()
	ca, err := certs.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	pair, err = ca.Server("127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	if certFile, keyFile, err = pair.Write(dir, "server"); err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	credFile = filepath.Join(dir, "es-credentials.json")
	creds := `{"users":{"` + testUser + `":"` + testPassword + `"},"api_keys":[{"id":"` + testKeyID + `","api_key":"` + testKeySec + `","name":"eventpipe"}]}`
	if err := os.WriteFile(credFile, []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	return ca, certFile, keyFile, caFile, credFile, pair
}

// serve runs a Server from cfg on 127.0.0.1:0 until the test ends.
func serve(t testing.TB, cfg Config) *Server {
	t.Helper()
	cfg.Addr, cfg.Logger = "127.0.0.1:0", testLogger
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe(ctx) }()
	deadline := time.Now().Add(integration.HangAfter())
	for srv.Addr() == "127.0.0.1:0" {
		if time.Now().After(deadline) {
			t.Fatal("server did not start listening")
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ListenAndServe: %v", err)
		}
	})
	return srv
}

func startSecure(t *testing.T, withCAInChain bool) *secureEnv {
	t.Helper()
	dir := t.TempDir()
	ca, certFile, keyFile, caFile, credFile, pair := writeSecureFiles(t, filepath.Join(dir, "secure"))
	cfg := Config{DataDir: filepath.Join(dir, "data"), TLSCertFile: certFile, TLSKeyFile: keyFile, CredentialsFile: credFile}
	if withCAInChain {
		cfg.TLSCAFile = caFile
	}
	srv := serve(t, cfg)
	if !strings.HasPrefix(srv.URL(), "https://127.0.0.1:") {
		t.Fatalf("URL() = %q, want https://127.0.0.1:port", srv.URL())
	}
	return &secureEnv{ca: ca, srv: srv, url: srv.URL(), caPEM: ca.PEM, leafPEM: pair.CertPEM,
		key: APIKey{ID: testKeyID, Key: testKeySec, Name: "eventpipe"}}
}

func newClient(t *testing.T, cfg elasticsearch.Config) *elasticsearch.Client {
	t.Helper()
	es, err := elasticsearch.NewClient(cfg)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return es
}

// decode reads an esapi response: status and JSON body.
func decode(t *testing.T) func(res *esapi.Response, err error) (int, map[string]any, http.Header) {
	return func(res *esapi.Response, err error) (int, map[string]any, http.Header) {
		t.Helper()
		if err != nil {
			t.Fatalf("client error: %v", err)
		}
		defer res.Body.Close()
		var body map[string]any
		b, _ := io.ReadAll(res.Body)
		if len(b) > 0 {
			if err := json.Unmarshal(b, &body); err != nil {
				t.Fatalf("body %q: %v", b, err)
			}
		}
		return res.StatusCode, body, res.Header
	}
}

// TestSecureGoClient drives the TLS + authentication server with
// go-elasticsearch the ways an application configures it.
func TestSecureGoClient(t *testing.T) {
	env := startSecure(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	addrs := []string{env.url}

	ok := map[string]elasticsearch.Config{
		"api key + CACert":                 {Addresses: addrs, APIKey: env.key.Encoded(), CACert: env.caPEM},
		"basic + CACert":                   {Addresses: addrs, Username: testUser, Password: testPassword, CACert: env.caPEM},
		"api key + CA fingerprint":         {Addresses: addrs, APIKey: env.key.Encoded(), CertificateFingerprint: env.ca.Fingerprint()},
		"basic + CA fingerprint":           {Addresses: addrs, Username: testUser, Password: testPassword, CertificateFingerprint: env.ca.Fingerprint()},
		"api key + upper-case fingerprint": {Addresses: addrs, APIKey: env.key.Encoded(), CertificateFingerprint: strings.ToUpper(env.ca.Fingerprint())},
	}
	for name, cfg := range ok {
		t.Run(name, func(t *testing.T) {
			es := newClient(t, cfg)
			status, info, _ := decode(t)(es.Info(es.Info.WithContext(ctx)))
			if status != 200 || !strings.HasPrefix(get(info, "version.number").(string), "8.") {
				t.Fatalf("info: %d %v", status, info)
			}
			status, who, _ := decode(t)(es.Security.Authenticate(es.Security.Authenticate.WithContext(ctx)))
			if status != 200 {
				t.Fatalf("authenticate: %d %v", status, who)
			}
			if cfg.APIKey != "" {
				if who["authentication_type"] != "api_key" || get(who, "api_key.id") != testKeyID || get(who, "api_key.name") != "eventpipe" {
					t.Fatalf("authenticate by API key: %v", who)
				}
			} else if who["authentication_type"] != "realm" || who["username"] != testUser || who["api_key"] != nil {
				t.Fatalf("authenticate by user: %v", who)
			}
			// A write and a search go through as well.
			idx := "secure-" + randHex(4)
			if status, b, _ := decode(t)(es.Index(idx, strings.NewReader(`{"title":"hello tls"}`),
				es.Index.WithDocumentID("1"), es.Index.WithRefresh("true"), es.Index.WithContext(ctx))); status != 201 {
				t.Fatalf("index: %d %v", status, b)
			}
			if status, b, _ := decode(t)(es.Search(es.Search.WithIndex(idx), es.Search.WithContext(ctx))); status != 200 || get(b, "hits.total.value") != 1.0 {
				t.Fatalf("search: %d %v", status, b)
			}
		})
	}

	t.Run("typed client", func(t *testing.T) {
		tc, err := elasticsearch.NewTypedClient(elasticsearch.Config{Addresses: addrs, APIKey: env.key.Encoded(), CACert: env.caPEM})
		if err != nil {
			t.Fatal(err)
		}
		who, err := tc.Security.Authenticate().Do(ctx)
		if err != nil {
			t.Fatalf("typed authenticate: %v", err)
		}
		if who.Username != "eventpipe" || who.ApiKey == nil || who.ApiKey.Id != testKeyID {
			t.Fatalf("typed authenticate: %+v", who)
		}
		bad, err := elasticsearch.NewTypedClient(elasticsearch.Config{Addresses: addrs,
			APIKey: APIKey{ID: testKeyID, Key: "wrong"}.Encoded(), CACert: env.caPEM})
		if err != nil {
			t.Fatal(err)
		}
		_, err = bad.Info().Do(ctx)
		var ee *types.ElasticsearchError
		if !errors.As(err, &ee) || ee.Status != 401 || ee.ErrorCause.Type != "security_exception" {
			t.Fatalf("typed client with a wrong key: %v", err)
		}
	})

	// The 401s, as Elasticsearch 8.15 writes them.
	unauthorized := []struct {
		name         string
		cfg          elasticsearch.Config
		reason       string
		unsuccessful string
	}{
		{"no credentials", elasticsearch.Config{Addresses: addrs, CACert: env.caPEM},
			"missing authentication credentials for REST request [/]", ""},
		{"wrong api key", elasticsearch.Config{Addresses: addrs, APIKey: APIKey{ID: testKeyID, Key: "wrong"}.Encoded(), CACert: env.caPEM},
			"unable to authenticate with provided credentials and anonymous access is not allowed for this request",
			"API key: invalid credentials for API key [" + testKeyID + "]"},
		{"unknown api key id", elasticsearch.Config{Addresses: addrs, APIKey: APIKey{ID: "nope", Key: testKeySec}.Encoded(), CertificateFingerprint: env.ca.Fingerprint()},
			"unable to authenticate with provided credentials and anonymous access is not allowed for this request",
			"API key: unable to find apikey with id nope"},
		{"api key not base64 of id:key", elasticsearch.Config{Addresses: addrs, APIKey: testKeySec, CACert: env.caPEM},
			"unable to authenticate with provided credentials and anonymous access is not allowed for this request",
			"API key: invalid ApiKey value"},
		{"wrong password", elasticsearch.Config{Addresses: addrs, Username: testUser, Password: "wrong", CACert: env.caPEM},
			"unable to authenticate user [" + testUser + "] for REST request [/]", ""},
		{"unknown user", elasticsearch.Config{Addresses: addrs, Username: "mallory", Password: testPassword, CACert: env.caPEM},
			"unable to authenticate user [mallory] for REST request [/]", ""},
	}
	for _, tc := range unauthorized {
		t.Run(tc.name, func(t *testing.T) {
			es := newClient(t, tc.cfg)
			status, body, h := decode(t)(es.Info(es.Info.WithContext(ctx)))
			if status != 401 {
				t.Fatalf("status %d, want 401: %v", status, body)
			}
			if got := h.Values("WWW-Authenticate"); !reflect.DeepEqual(got, wantChallenges) {
				t.Fatalf("WWW-Authenticate %q, want %q", got, wantChallenges)
			}
			if h.Get("X-Elastic-Product") != "Elasticsearch" {
				t.Fatalf("X-Elastic-Product missing on 401: %v", h)
			}
			want := map[string]any{"type": "security_exception", "reason": tc.reason,
				"header": map[string]any{"WWW-Authenticate": []any{wantChallenges[0], wantChallenges[1]}}}
			if tc.unsuccessful != "" {
				want["additional_unsuccessful_credentials"] = tc.unsuccessful
			}
			wantErr := map[string]any{"root_cause": []any{want}}
			for k, v := range want {
				wantErr[k] = v
			}
			if !reflect.DeepEqual(body, map[string]any{"error": wantErr, "status": 401.0}) {
				b, _ := json.Marshal(body)
				t.Fatalf("body\n%s\nwant reason %q", b, tc.reason)
			}
			b, _ := json.Marshal(body)
			for _, secret := range []string{testPassword, testKeySec} {
				if strings.Contains(string(b), secret) {
					t.Fatalf("401 body leaks a secret: %s", b)
				}
			}
		})
	}

	t.Run("unknown CA", func(t *testing.T) {
		other, err := certs.NewCA("other")
		if err != nil {
			t.Fatal(err)
		}
		es := newClient(t, elasticsearch.Config{Addresses: addrs, APIKey: env.key.Encoded(), CACert: other.PEM})
		// A verification error, not a timeout: the refusal is at once.
		res, err := es.Info(es.Info.WithContext(ctx))
		if err == nil {
			res.Body.Close()
			t.Fatalf("a client trusting another CA got status %d", res.StatusCode)
		}
		if !strings.Contains(err.Error(), "certificate signed by unknown authority") {
			t.Fatalf("error %v, want a certificate verification error", err)
		}
	})
	t.Run("fingerprint mismatch", func(t *testing.T) {
		other, err := certs.NewCA("other")
		if err != nil {
			t.Fatal(err)
		}
		es := newClient(t, elasticsearch.Config{Addresses: addrs, APIKey: env.key.Encoded(), CertificateFingerprint: other.Fingerprint()})
		res, err := es.Info(es.Info.WithContext(ctx))
		if err == nil {
			res.Body.Close()
			t.Fatal("a client pinning another fingerprint connected")
		}
		if !strings.Contains(err.Error(), "fingerprint mismatch") {
			t.Fatalf("error %v, want a fingerprint mismatch", err)
		}
	})
	t.Run("plain http client", func(t *testing.T) {
		es := newClient(t, elasticsearch.Config{Addresses: []string{"http://" + env.srv.Addr()}, APIKey: env.key.Encoded()})
		res, err := es.Info(es.Info.WithContext(ctx))
		if err != nil {
			t.Fatalf("plain HTTP to the TLS port: %v", err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest {
			t.Fatalf("plain HTTP to the TLS port: status %d, want 400", res.StatusCode)
		}
	})
}

// TestSecureChainWithoutCA: without TLSCAFile the server sends only its
// own certificate, so pinning the CA's fingerprint fails while pinning the
// leaf's works (go-elasticsearch compares the fingerprint with each
// certificate the server sends).
func TestSecureChainWithoutCA(t *testing.T) {
	env := startSecure(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	es := newClient(t, elasticsearch.Config{Addresses: []string{env.url}, APIKey: env.key.Encoded(), CertificateFingerprint: env.ca.Fingerprint()})
	if res, err := es.Info(es.Info.WithContext(ctx)); err == nil {
		res.Body.Close()
		t.Fatal("CA fingerprint matched a chain without the CA")
	}
	leaf, err := tls.X509KeyPair(env.leafPEM, mustRead(t, env.srv.cfg.TLSKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	es = newClient(t, elasticsearch.Config{Addresses: []string{env.url}, APIKey: env.key.Encoded(),
		CertificateFingerprint: fingerprint(leaf.Certificate[0])})
	if status, b, _ := decode(t)(es.Info(es.Info.WithContext(ctx))); status != 200 {
		t.Fatalf("leaf fingerprint: %d %v", status, b)
	}
	es = newClient(t, elasticsearch.Config{Addresses: []string{env.url}, APIKey: env.key.Encoded(), CACert: env.caPEM})
	if status, b, _ := decode(t)(es.Info(es.Info.WithContext(ctx))); status != 200 {
		t.Fatalf("CACert: %d %v", status, b)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fingerprint is the hex SHA-256 of a DER certificate, as
// CertificateFingerprint takes it.
func fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// TestAuthHandler checks the authentication layer through the handler:
// the URI in messages, HEAD, malformed headers, scheme case.
func TestAuthHandler(t *testing.T) {
	dir := t.TempDir()
	_, _, _, _, credFile, _ := writeSecureFiles(t, filepath.Join(dir, "secure"))
	srv, err := New(Config{DataDir: filepath.Join(dir, "data"), CredentialsFile: credFile, Logger: testLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	do := func(method, target, auth string) (*http.Response, map[string]any) {
		t.Helper()
		req := httptest.NewRequest(method, target, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		res := rec.Result()
		var body map[string]any
		_ = json.NewDecoder(res.Body).Decode(&body)
		return res, body
	}
	basic := func(u, p string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(u+":"+p)) }
	key := APIKey{ID: testKeyID, Key: testKeySec}

	res, body := do("GET", "/_search?size=1&q=a%20b", "")
	if res.StatusCode != 401 || get(body, "error.reason") != "missing authentication credentials for REST request [/_search?size=1&q=a%20b]" {
		t.Fatalf("missing: %d %v", res.StatusCode, body)
	}
	res, body = do("HEAD", "/", "")
	if res.StatusCode != 401 || body != nil || len(res.Header.Values("WWW-Authenticate")) != 2 {
		t.Fatalf("HEAD: %d %v %v", res.StatusCode, body, res.Header)
	}
	// Unknown routes are authenticated first too.
	if res, _ = do("GET", "/_nope/x/y", ""); res.StatusCode != 401 {
		t.Fatalf("unknown route without credentials: %d", res.StatusCode)
	}
	res, body = do("GET", "/", "Bearer abc")
	if res.StatusCode != 401 || get(body, "error.reason") != "missing authentication credentials for REST request [/]" {
		t.Fatalf("bearer: %d %v", res.StatusCode, body)
	}
	res, body = do("GET", "/", "Basic !!!")
	if res.StatusCode != 401 || get(body, "error.reason") != "invalid basic authentication header encoding" ||
		!reflect.DeepEqual(res.Header.Values("WWW-Authenticate"), wantChallenges[:1]) {
		t.Fatalf("bad base64: %d %v %v", res.StatusCode, body, res.Header)
	}
	res, body = do("GET", "/", "Basic "+base64.StdEncoding.EncodeToString([]byte("nocolon")))
	if res.StatusCode != 401 || get(body, "error.reason") != "invalid basic authentication header value" {
		t.Fatalf("no colon: %d %v", res.StatusCode, body)
	}
	for _, auth := range []string{basic(testUser, testPassword), "basic " + basic(testUser, testPassword)[6:],
		"ApiKey " + key.Encoded(), "APIKey " + key.Encoded(), "apikey " + key.Encoded()} {
		if res, body = do("GET", "/", auth); res.StatusCode != 200 {
			t.Fatalf("%.8s…: %d %v", auth, res.StatusCode, body)
		}
	}
	// A password that is a prefix of the right one is wrong.
	if res, _ = do("GET", "/", basic(testUser, testPassword[:4])); res.StatusCode != 401 {
		t.Fatalf("prefix password: %d", res.StatusCode)
	}
	res, body = do("GET", "/_security/_authenticate", basic(testUser, testPassword))
	want := map[string]any{"username": testUser, "roles": []any{"superuser"}, "full_name": nil, "email": nil,
		"metadata": map[string]any{}, "enabled": true, "authentication_type": "realm",
		"authentication_realm": map[string]any{"name": "default_file", "type": "file"},
		"lookup_realm":         map[string]any{"name": "default_file", "type": "file"}}
	if res.StatusCode != 200 || !reflect.DeepEqual(body, want) {
		t.Fatalf("authenticate: %d %v", res.StatusCode, body)
	}
}

// TestAuthOff: without a credentials file nothing is required and
// /_security/_authenticate answers as Elasticsearch with security disabled.
func TestAuthOff(t *testing.T) {
	srv, err := New(Config{DataDir: t.TempDir(), Logger: testLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/_security/_authenticate", nil))
	var body map[string]any
	_ = json.NewDecoder(rec.Body).Decode(&body)
	if rec.Code != 500 || get(body, "error.type") != "exception" ||
		!strings.HasPrefix(get(body, "error.reason").(string), "Security must be explicitly enabled") {
		t.Fatalf("%d %v", rec.Code, body)
	}
	if srv.URL() != "http://127.0.0.1:9200" {
		t.Fatalf("URL() = %q", srv.URL())
	}
}

// TestSecurityConfig covers flags, validation and unusable files; no
// error may quote a secret.
func TestSecurityConfig(t *testing.T) {
	var c Config
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	c.BindFlags(fs)
	if err := fs.Parse([]string{"--data-dir", "d", "--tls-cert-file", "c.pem", "--tls-key-file", "k.pem",
		"--tls-ca-file", "ca.pem", "--credentials-file", "cred.json"}); err != nil {
		t.Fatal(err)
	}
	if c.TLSCertFile != "c.pem" || c.TLSKeyFile != "k.pem" || c.TLSCAFile != "ca.pem" || c.CredentialsFile != "cred.json" {
		t.Fatalf("flags: %+v", c)
	}
	for _, bad := range []struct {
		cfg   Config
		field string // of the *eventstore.ValidationError
	}{
		{Config{DataDir: "d", TLSCertFile: "c.pem"}, "TLSKeyFile"},
		{Config{DataDir: "d", TLSKeyFile: "k.pem"}, "TLSCertFile"},
		{Config{DataDir: "d", TLSCAFile: "ca.pem"}, "TLSCAFile"},
	} {
		var ve *eventstore.ValidationError
		if err := bad.cfg.Validate(); !errors.As(err, &ve) || ve.Field != bad.field {
			t.Fatalf("Validate(%+v) = %v, want an *eventstore.ValidationError on %s", bad.cfg, err, bad.field)
		}
	}

	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for name, tc := range map[string]struct {
		content string
		field   string // of the *eventstore.ValidationError; "" for a file that is no Credentials JSON
	}{
		"empty":      {`{}`, "Users"},
		"syntax":     {`{"users":{"elastic":"` + testPassword + `"`, ""},
		"type":       {`{"users":["` + testPassword + `"]}`, ""},
		"empty pw":   {`{"users":{"elastic":""}}`, `Users["elastic"]`},
		"colon user": {`{"users":{"a:b":"` + testPassword + `"}}`, "Users"},
		"no key":     {`{"api_keys":[{"id":"x","api_key":""}]}`, "APIKeys[0].Key"},
		"dup id":     {`{"api_keys":[{"id":"x","api_key":"` + testPassword + `"},{"id":"x","api_key":"y"}]}`, "APIKeys[1].ID"},
	} {
		p := write(strings.ReplaceAll(name, " ", "_")+".json", tc.content)
		_, err := New(Config{DataDir: t.TempDir(), CredentialsFile: p, Logger: testLogger})
		if err == nil {
			t.Fatalf("%s: New accepted %s", name, tc.content)
		}
		if strings.Contains(err.Error(), testPassword) {
			t.Fatalf("%s: error quotes the secret: %v", name, err)
		}
		var ve *eventstore.ValidationError
		if tc.field != "" && (!errors.As(err, &ve) || ve.Field != tc.field) {
			t.Fatalf("%s: New = %v, want an *eventstore.ValidationError on %s", name, err, tc.field)
		}
	}
	if _, err := New(Config{DataDir: t.TempDir(), CredentialsFile: filepath.Join(dir, "missing.json"), Logger: testLogger}); err == nil {
		t.Fatal("missing credentials file accepted")
	}
	if _, err := New(Config{DataDir: t.TempDir(), TLSCertFile: filepath.Join(dir, "no.pem"), TLSKeyFile: filepath.Join(dir, "no-key.pem"), Logger: testLogger}); err == nil {
		t.Fatal("missing certificate accepted")
	}
	_, certFile, keyFile, _, _, _ := writeSecureFiles(t, filepath.Join(dir, "s"))
	if _, err := New(Config{DataDir: t.TempDir(), TLSCertFile: certFile, TLSKeyFile: keyFile, TLSCAFile: write("notpem", "x"), Logger: testLogger}); err == nil {
		t.Fatal("CA file without a certificate accepted")
	}
	// The data dir lock must be released when New fails late.
	d := t.TempDir()
	if _, err := New(Config{DataDir: d, CredentialsFile: filepath.Join(dir, "missing.json"), Logger: testLogger}); err == nil {
		t.Fatal("accepted")
	}
	s, err := New(Config{DataDir: d, Logger: testLogger})
	if err != nil {
		t.Fatalf("data dir left locked: %v", err)
	}
	s.Close()
}
