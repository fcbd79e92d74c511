package esserver

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestMain doubles as the entry point of the crash test's child process:
// with ESSERVER_CHILD_DATADIR set, the test binary runs a server instead
// of the tests.
func TestMain(m *testing.M) {
	if dir := os.Getenv(childDataDirEnv); dir != "" {
		runChild(dir, os.Getenv(childAddrFileEnv))
		return
	}
	os.Exit(m.Run())
}

// target is one server the conformance tests run against: the local
// in-process server always, and a real Elasticsearch 8 when
// ELASTICSEARCH_URL is set.
type target struct {
	name   string
	url    string
	local  *Server
	prefix string
	client *http.Client
}

var testLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// startLocal runs a Server on 127.0.0.1:0 with a temporary data dir.
func startLocal(t testing.TB, dir string, refresh time.Duration) (*Server, string) {
	t.Helper()
	srv := serve(t, Config{DataDir: dir, RefreshInterval: refresh})
	return srv, "http://" + srv.Addr()
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// targets returns the servers a conformance test runs against.
func targets(t *testing.T) []*target {
	t.Helper()
	srv, url := startLocal(t, t.TempDir(), time.Second)
	out := []*target{{name: "local", url: url, local: srv, client: &http.Client{Timeout: 30 * time.Second}}}
	// The stack's server (or a real Elasticsearch) is a service: not in
	// the unit tier (-short), where the in-process server alone runs.
	if es := os.Getenv("ELASTICSEARCH_URL"); es != "" && !testing.Short() {
		tg := &target{name: "elasticsearch", url: strings.TrimRight(es, "/"), client: &http.Client{Timeout: 60 * time.Second}}
		// `eval "$(eventpipe stack env)"` points ELASTICSEARCH_URL at the
		// stack's own server: these tests compare this server with
		// Elasticsearch, not with itself.
		if r := tg.do(t, "GET", "/", nil); r.str("version.build_type") == "eventpipe" {
			t.Logf("ELASTICSEARCH_URL %s is eventpipe's own server, not Elasticsearch: compared with nothing", es)
		} else {
			out = append(out, tg)
		}
	}
	for _, tg := range out {
		tg.prefix = "t-" + randHex(4) + "-"
	}
	return out
}

// each runs fn as a subtest per target.
func each(t *testing.T, fn func(t *testing.T, tg *target)) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) { fn(t, tg) })
	}
}

// idx returns a unique index name and deletes it when the test ends.
func (tg *target) idx(t *testing.T, suffix string) string {
	name := tg.prefix + suffix
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, tg.url+"/"+name+"?ignore_unavailable=true", nil)
		if resp, err := tg.client.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	return name
}

type resp struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

// do sends a request; body may be nil, a string/[]byte (sent as is) or a
// value encoded as JSON.
func (tg *target) do(t testing.TB, method, path string, body any) resp {
	t.Helper()
	var rd io.Reader
	ct := "application/json"
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		rd = bytes.NewReader(j)
	}
	if strings.Contains(path, "_bulk") {
		ct = "application/x-ndjson"
	}
	req, err := http.NewRequest(method, tg.url+path, rd)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", ct)
	}
	res, err := tg.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	r := resp{status: res.StatusCode, header: res.Header, raw: raw}
	if len(bytes.TrimSpace(raw)) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			t.Fatalf("%s %s: bad JSON %q: %v", method, path, raw, err)
		}
	}
	return r
}

// must asserts the status of a response.
func (r resp) must(t testing.TB, status int) resp {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body: %s", r.status, status, r.raw)
	}
	return r
}

// get walks a dotted path through decoded JSON ("hits.hits.0._id").
func get(v any, path string) any {
	for _, p := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			var i int
			if _, err := fmt.Sscanf(p, "%d", &i); err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func (r resp) get(path string) any { return get(r.body, path) }

func (r resp) num(t testing.TB, path string) float64 {
	t.Helper()
	f, ok := r.get(path).(float64)
	if !ok {
		t.Fatalf("%s is %v (%T), not a number; body: %s", path, r.get(path), r.get(path), r.raw)
	}
	return f
}

func (r resp) str(path string) string {
	s, _ := r.get(path).(string)
	return s
}

// expectError checks Elasticsearch's error body shape.
func (r resp) expectError(t testing.TB, status int, types ...string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body: %s", r.status, status, r.raw)
	}
	if got := r.num(t, "status"); int(got) != status {
		t.Fatalf("body status %v, want %d", got, status)
	}
	rootType := r.str("error.root_cause.0.type")
	if rootType == "" || r.str("error.type") == "" || r.str("error.reason") == "" {
		t.Fatalf("error body lacks root_cause/type/reason: %s", r.raw)
	}
	for _, ty := range types {
		if rootType == ty || r.str("error.type") == ty {
			return
		}
	}
	t.Fatalf("error type %q/%q, want one of %v; body: %s", rootType, r.str("error.type"), types, r.raw)
}

// ndjson joins lines into a bulk body.
func ndjson(lines ...any) string {
	var b strings.Builder
	for _, l := range lines {
		switch x := l.(type) {
		case string:
			b.WriteString(x)
		default:
			j, _ := json.Marshal(x)
			b.Write(j)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// hitIDs returns the _id of each hit in order.
func hitIDs(r resp) []string {
	var ids []string
	hits, _ := r.get("hits.hits").([]any)
	for _, h := range hits {
		ids = append(ids, get(h, "_id").(string))
	}
	return ids
}

func sortedIDs(r resp) []string {
	ids := hitIDs(r)
	sort.Strings(ids)
	return ids
}

func eqStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// waitFor polls cond until it holds; it fails t when cond does not hold
// within integration.HangAfter.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	integration.Await(t, what, func() error {
		if !cond() {
			return errors.New("not yet")
		}
		return nil
	})
}

func newRequest(method, url, body string) (*http.Request, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	return http.NewRequest(method, url, rd)
}

func readResp(t testing.TB, res *http.Response) resp {
	t.Helper()
	raw, _ := io.ReadAll(res.Body)
	r := resp{status: res.StatusCode, header: res.Header, raw: raw}
	if len(bytes.TrimSpace(raw)) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			t.Fatalf("bad JSON %q: %v", raw, err)
		}
	}
	return r
}
