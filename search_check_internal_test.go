package eventpipe

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
)

// TestSearchCheckFailsOnARedOrSilentCluster: consume's readiness check
// of its search cluster passes on green and yellow, and fails on red, on
// an error answer and on a cluster that does not answer.
func TestSearchCheckFailsOnARedOrSilentCluster(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		code       int
		wantErr    string
	}{
		{"green", `{"cluster_name":"c","status":"green"}`, 200, ""},
		{"yellow", `{"cluster_name":"c","status":"yellow"}`, 200, ""},
		{"red", `{"cluster_name":"c","status":"red"}`, 200, "red"},
		{"error answer", `{"error":{"type":"cluster_block_exception","reason":"blocked"},"status":503}`, 503, "cluster health"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/_cluster/health" {
					t.Errorf("asked %s %s, want GET /_cluster/health", r.Method, r.URL.Path)
				}
				w.Header().Set("X-Elastic-Product", "Elasticsearch")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.code)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			es, err := esclient.NewClient(srv.URL, esclient.Security{})
			if err != nil {
				t.Fatal(err)
			}
			err = searchCheck(es)(context.Background())
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("check: %v, want it to pass", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("check: %v, want an error naming %q", err, tc.wantErr)
			}
		})
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	es, err := esclient.NewClient(srv.URL, esclient.Security{})
	if err != nil {
		t.Fatal(err)
	}
	if err := searchCheck(es)(context.Background()); err == nil {
		t.Fatal("check of a closed port passed")
	}
}
