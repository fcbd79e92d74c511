package kmsserver

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nsmithuk/local-kms/src/handler"

	"github.com/eventpipe/eventpipe/eventstore"
)

// newTestServer serves Handler over a key store in a temporary folder.
func newTestServer(t *testing.T) *httptest.Server {
	t.Helper()
	db, err := Open(Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(db, slog.New(slog.DiscardHandler)))
	t.Cleanup(func() { srv.Close(); db.Close() })
	return srv
}

// TestHandlerRefusesWhatIsNotAKMSRequest sends requests KMS's JSON
// protocol does not make and expects Local KMS's answers: 404 for
// another path, 405 for another method, 415 for a body that is not JSON,
// 501 for an operation that does not exist or another service's target;
// a well-formed ListKeys is answered 200 with JSON.
func TestHandlerRefusesWhatIsNotAKMSRequest(t *testing.T) {
	srv := newTestServer(t)
	const jsonType = "application/x-amz-json-1.1"
	for _, tc := range []struct {
		name, method, path, contentType, target string
		want                                    int
		body                                    string // a substring of the answer
	}{
		{"another path", "POST", "/keys", jsonType, "TrentService.ListKeys", 404, "Page not found"},
		{"GET", "GET", "/", jsonType, "TrentService.ListKeys", 405, "Method Not Allowed"},
		{"PUT", "PUT", "/", jsonType, "TrentService.ListKeys", 405, "Method Not Allowed"},
		{"form body", "POST", "/", "application/x-www-form-urlencoded", "TrentService.ListKeys", 415, "Only JSON"},
		{"no content type", "POST", "/", "", "TrentService.ListKeys", 415, "Only JSON"},
		{"unknown operation", "POST", "/", jsonType, "TrentService.MakeCoffee", 501, "TrentService.MakeCoffee) is not implemented"},
		{"no target", "POST", "/", jsonType, "", 501, "is not implemented"},
		{"no operation", "POST", "/", jsonType, "TrentService", 501, "is not implemented"},
		{"another service", "POST", "/", jsonType, "DynamoDB_20120810.ListKeys", 501, "is not implemented"},
		{"a handler helper is no operation", "POST", "/", jsonType, "TrentService.Empty", 501, "is not implemented"},
		{"ListKeys", "POST", "/", jsonType, "TrentService.ListKeys", 200, `"Keys":[]`},
		{"ListKeys as application/json", "POST", "/", "application/json", "TrentService.ListKeys", 200, `"Keys":[]`},
	} {
		req, err := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(`{"Limit":1}`))
		if err != nil {
			t.Fatal(err)
		}
		if tc.contentType != "" {
			req.Header.Set("Content-Type", tc.contentType)
		}
		if tc.target != "" {
			req.Header.Set("X-Amz-Target", tc.target)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want || !strings.Contains(string(b), tc.body) {
			t.Errorf("%s: %s %s (Content-Type %q, X-Amz-Target %q) answered %d %q, want %d with %q",
				tc.name, tc.method, tc.path, tc.contentType, tc.target, resp.StatusCode, b, tc.want, tc.body)
		}
		if tc.want == 200 && resp.Header.Get("Content-Type") != jsonType {
			t.Errorf("%s: Content-Type %q, want %q", tc.name, resp.Header.Get("Content-Type"), jsonType)
		}
	}
}

// TestEveryHandlerMethodIsAnOperation: the operations table serves every
// exported method of Local KMS's request handler that answers a Response
// (each is a KMS operation), and nothing else, so that a module update
// adding an operation fails here until the table has it.
func TestEveryHandlerMethodIsAnOperation(t *testing.T) {
	rt := reflect.TypeFor[*handler.RequestHandler]()
	respType := reflect.TypeFor[handler.Response]()
	var methods []string
	for i := range rt.NumMethod() {
		m := rt.Method(i)
		if m.Type.NumIn() == 1 && m.Type.NumOut() == 1 && m.Type.Out(0) == respType {
			methods = append(methods, m.Name)
		}
	}
	var served []string
	for name := range operations {
		served = append(served, name)
	}
	slices.Sort(methods)
	slices.Sort(served)
	if !slices.Equal(methods, served) {
		t.Errorf("operations %v\nhandler methods %v", served, methods)
	}
}

// TestConfigValidateNamesTheField: a bad config field is reported as an
// *eventstore.ValidationError naming it; a non-loopback address is one.
func TestConfigValidateNamesTheField(t *testing.T) {
	if err := (Config{DataDir: "d", Addr: "127.0.0.1:8100"}).Validate(); err != nil {
		t.Fatalf("a valid config: %v", err)
	}
	for name, tc := range map[string]struct {
		cfg   Config
		field string
	}{
		"no data dir":     {Config{}, "DataDir"},
		"every interface": {Config{DataDir: "d", Addr: ":8100"}, "Addr"},
		"0.0.0.0":         {Config{DataDir: "d", Addr: "0.0.0.0:8100"}, "Addr"},
		"a LAN address":   {Config{DataDir: "d", Addr: "10.0.0.5:8100"}, "Addr"},
		"no port":         {Config{DataDir: "d", Addr: "127.0.0.1"}, "Addr"},
		"bad account":     {Config{DataDir: "d", AccountID: "12"}, "AccountID"},
	} {
		err := tc.cfg.Validate()
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: Validate = %v, want an *eventstore.ValidationError on %s", name, err, tc.field)
		}
	}
}
