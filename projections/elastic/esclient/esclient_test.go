package esclient_test

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/eventpipe/eventpipe/dev/certs"
	"github.com/eventpipe/eventpipe/dev/esserver"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
	"github.com/eventpipe/eventpipe/tlsconfig"
)

// TestProductCheck: the first successful answer must say it is
// Elasticsearch; error answers pass through as they are; once a check has
// passed it is not repeated.
func TestProductCheck(t *testing.T) {
	var withHeader atomic.Bool
	var lastReq atomic.Pointer[http.Request]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lastReq.Store(r.Clone(context.Background()))
		if withHeader.Load() {
			w.Header().Set("X-Elastic-Product", "Elasticsearch")
		}
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/missing" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"type":"index_not_found_exception","reason":"no such index [missing]"},"status":404}`)
			return
		}
		_, _ = io.WriteString(w, `{"version":{"number":"8.15.0"}}`)
	}))
	defer srv.Close()
	es, err := esclient.NewClient(srv.URL+"/", esclient.Security{APIKey: "aWQ6a2V5"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	_, err = es.Info(es.Info.WithContext(ctx))
	if !errors.Is(err, esclient.ErrNotElasticsearch) {
		t.Fatalf("2xx without the product header: %v, want ErrNotElasticsearch", err)
	}
	if !strings.Contains(err.Error(), srv.URL) {
		t.Fatalf("error %q does not name the server", err)
	}
	r := lastReq.Load()
	if got := r.Header.Get("Authorization"); got != "APIKey aWQ6a2V5" {
		t.Fatalf("Authorization %q", got)
	}
	if ua := r.Header.Get("User-Agent"); !strings.HasPrefix(ua, "eventpipe-esclient go-elasticsearch-esapi/") {
		t.Fatalf("User-Agent %q", ua)
	}
	err = esclient.Do(ctx, es, esapi.IndicesGetRequest{Index: []string{"missing"}}, nil)
	if !esclient.IsNotFound(err) || !strings.Contains(err.Error(), "index_not_found_exception") {
		t.Fatalf("404 without the product header: %v, want the 404 itself", err)
	}

	withHeader.Store(true)
	var info struct {
		Version struct{ Number string } `json:"version"`
	}
	if err := esclient.Do(ctx, es, esapi.InfoRequest{}, &info); err != nil || info.Version.Number != "8.15.0" {
		t.Fatalf("info: %+v, %v", info, err)
	}
	withHeader.Store(false)
	if err := esclient.Do(ctx, es, esapi.InfoRequest{}, nil); err != nil {
		t.Fatalf("after a passed check: %v", err)
	}
}

// TestBasicAuthAndURLCredentials: Username and Password are sent as basic
// auth, and credentials in the URL win over them, as with the official
// client; an error does not show the URL's password.
func TestBasicAuthAndURLCredentials(t *testing.T) {
	var auth atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		w.Header().Set("X-Elastic-Product", "Elasticsearch")
		_, _ = io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	basic := func(u, p string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(u+":"+p)) }
	for _, tc := range []struct {
		url  string
		sec  esclient.Security
		want string
	}{
		{srv.URL, esclient.Security{Username: "elastic", Password: "pw"}, basic("elastic", "pw")},
		{strings.Replace(srv.URL, "http://", "http://u:p@", 1), esclient.Security{Username: "elastic", Password: "pw"}, basic("u", "p")},
		{srv.URL, esclient.Security{}, ""},
	} {
		es, err := esclient.NewClient(tc.url, tc.sec)
		if err != nil {
			t.Fatal(err)
		}
		if err := esclient.Do(context.Background(), es, esapi.InfoRequest{}, nil); err != nil {
			t.Fatal(err)
		}
		if got := auth.Load(); got != tc.want {
			t.Fatalf("%s %s: Authorization %q, want %q", tc.url, tc.sec, got, tc.want)
		}
	}
	_, err := esclient.NewClient("http://u:secret@127.0.0.1:1", esclient.Security{APIKey: "k", Username: "u", Password: "p"})
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("api key and basic auth together: %v", err)
	}
}

// serve runs an Elasticsearch-API server from cfg on 127.0.0.1:0 until the
// test ends.
func serve(t *testing.T, cfg esserver.Config) *esserver.Server {
	t.Helper()
	cfg.Addr = "127.0.0.1:0"
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.Logger = slog.New(slog.DiscardHandler)
	srv, err := esserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe(ctx) }()
	for deadline := time.Now().Add(5 * time.Second); srv.Addr() == "127.0.0.1:0"; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("server did not start listening")
		}
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ListenAndServe: %v", err)
		}
	})
	return srv
}

// TestElasticsearchAPIServer drives the stack's Elasticsearch-API server
// with the calls eventpipe makes: the functional API and esclient.Do.
func TestElasticsearchAPIServer(t *testing.T) {
	srv := serve(t, esserver.Config{})
	es, err := esclient.NewClient(srv.URL(), esclient.Security{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := es.Indices.Create("todos", es.Indices.Create.WithContext(ctx), es.Indices.Create.WithBody(
		esclient.JSONBody(map[string]any{"mappings": map[string]any{"properties": map[string]any{"title": map[string]any{"type": "text"}}}})))
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("create index: %v %v", res, err)
	}
	res.Body.Close()
	bulk := `{"index":{"_id":"1"}}` + "\n" + `{"title":"buy milk"}` + "\n" + `{"index":{"_id":"2"}}` + "\n" + `{"title":"walk the dog"}` + "\n"
	var br struct{ Errors bool }
	if err := esclient.Do(ctx, es, esapi.BulkRequest{Index: "todos", Body: strings.NewReader(bulk), Refresh: "true"}, &br); err != nil || br.Errors {
		t.Fatalf("bulk: %+v %v", br, err)
	}
	var sr struct {
		Hits struct {
			Hits []struct {
				ID string `json:"_id"`
			}
		}
	}
	res, err = es.Search(es.Search.WithContext(ctx), es.Search.WithIndex("todos"),
		es.Search.WithBody(strings.NewReader(`{"query":{"match":{"title":"milk"}}}`)))
	if err != nil || res.IsError() {
		t.Fatalf("search: %v %v", res, err)
	}
	res.Body.Close()
	if err := esclient.Do(ctx, es, esapi.SearchRequest{Index: []string{"todos"}, Body: strings.NewReader(`{"query":{"match":{"title":"dog"}}}`)}, &sr); err != nil {
		t.Fatal(err)
	}
	if len(sr.Hits.Hits) != 1 || sr.Hits.Hits[0].ID != "2" {
		t.Fatalf("search hits: %+v", sr.Hits.Hits)
	}
	err = esclient.Do(ctx, es, esapi.IndexRequest{Index: "todos", DocumentID: "1", Body: strings.NewReader(`{"title":"x"}`),
		Version: esapi.IntPtr(1), VersionType: "external"}, nil)
	if !esclient.IsConflict(err) {
		t.Fatalf("stale external version: %v, want a conflict", err)
	}
}

// TestSecureElasticsearchAPIServer: the Security settings over TLS with
// authentication, as eventpipe's own clients use them.
func TestSecureElasticsearchAPIServer(t *testing.T) {
	dir := t.TempDir()
	files, err := certs.WriteServer(dir, "test", "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	key := esserver.APIKey{ID: "VuaCfGcBCdbkQm-e5aOx", Key: "ui2lp2axTNmsyakw9tvNnw", Name: "eventpipe"}
	credFile := filepath.Join(dir, "credentials.json")
	creds := `{"users":{"elastic":"s3cret"},"api_keys":[{"id":"` + key.ID + `","api_key":"` + key.Key + `","name":"eventpipe"}]}`
	if err := os.WriteFile(credFile, []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, esserver.Config{TLSCertFile: files.CertFile, TLSKeyFile: files.KeyFile, TLSCAFile: files.CAFile, CredentialsFile: credFile})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	other, err := certs.NewCA("other")
	if err != nil {
		t.Fatal(err)
	}
	otherCA := filepath.Join(dir, "other.pem")
	if err := os.WriteFile(otherCA, other.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	ca := tlsconfig.Config{CAFile: files.CAFile}
	for _, tc := range []struct {
		name    string
		sec     esclient.Security
		status  int    // of GET /_security/_authenticate; 0: a transport error
		errText string // in the transport error
	}{
		{"api key + CA", esclient.Security{APIKey: key.Encoded(), TLS: ca}, 200, ""},
		{"basic + CA", esclient.Security{Username: "elastic", Password: "s3cret", TLS: ca}, 200, ""},
		{"api key + fingerprint", esclient.Security{APIKey: key.Encoded(), Fingerprint: files.CA.Fingerprint()}, 200, ""},
		{"no credentials", esclient.Security{TLS: ca}, 401, ""},
		{"wrong password", esclient.Security{Username: "elastic", Password: "wrong", TLS: ca}, 401, ""},
		{"unknown CA", esclient.Security{APIKey: key.Encoded(), TLS: tlsconfig.Config{CAFile: otherCA}}, 0, "certificate signed by unknown authority"},
		{"fingerprint mismatch", esclient.Security{APIKey: key.Encoded(), Fingerprint: other.Fingerprint()}, 0, "fingerprint mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es, err := esclient.NewClient(srv.URL(), tc.sec)
			if err != nil {
				t.Fatal(err)
			}
			var who struct {
				Username string `json:"username"`
				Type     string `json:"authentication_type"`
			}
			err = esclient.Do(ctx, es, esapi.SecurityAuthenticateRequest{}, &who)
			var re *esclient.ResponseError
			switch {
			case tc.status == 200 && err != nil:
				t.Fatalf("authenticate: %v", err)
			case tc.status == 200 && (who.Username == "" || who.Type == ""):
				t.Fatalf("authenticate: %+v", who)
			case tc.status == 401 && !(errors.As(err, &re) && re.Status == 401 && re.Type == "security_exception"):
				t.Fatalf("error %v, want a 401 security_exception", err)
			case tc.status == 0 && (err == nil || !strings.Contains(err.Error(), tc.errText)):
				t.Fatalf("error %v, want %q", err, tc.errText)
			}
		})
	}
}
