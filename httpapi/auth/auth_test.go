package auth_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/httpapi"
	"github.com/eventpipe/eventpipe/httpapi/auth"
	"github.com/eventpipe/eventpipe/httpapi/auth/authtest"
)

const (
	issuer   = "https://idp.test/"
	audience = "eventpipe-api"
)

var testPolicy = &auth.Policy{Rules: []auth.Rule{
	{Subjects: []string{"alice"}, Commands: []string{"CreateTodo"}, Read: []string{"todo", "orders"}},
	{Scopes: []string{"ops"}, Read: []string{"status"}, Write: []string{"analytics"}},
}}

func newAuth(t *testing.T, cfg auth.Config) *auth.Authenticator {
	t.Helper()
	cfg.Issuer, cfg.Audience = issuer, audience
	if cfg.Policy == nil {
		cfg.Policy = testPolicy
	}
	a, err := auth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestVerifyAcceptsEachAlgorithm: a token signed with each accepted
// algorithm by a key of the JWKS gives its subject and scopes.
func TestVerifyAcceptsEachAlgorithm(t *testing.T) {
	idp := authtest.New(t, issuer, audience)
	a := newAuth(t, auth.Config{JWKSURL: idp.Serve(t), HTTPClient: idp.HTTPClient()})
	for _, alg := range authtest.Algorithms {
		tok := idp.Sign(t, alg, authtest.Claims{Subject: "alice-" + alg, Scope: "todo:write ops"})
		id, err := a.Verify(context.Background(), "Bearer "+tok)
		if err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
		if id.Subject != "alice-"+alg || id.Issuer != issuer || strings.Join(id.Scopes, ",") != "todo:write,ops" {
			t.Errorf("%s: identity %+v", alg, id)
		}
	}
}

// refusals are tokens a verifier must refuse, with the reason it gives.
func refusals(t testing.TB, idp *authtest.Provider) map[string]string {
	now := time.Now()
	good := idp.Sign(t, authtest.ES256, authtest.Claims{Subject: "alice"})
	sig := good[strings.LastIndexByte(good, '.')+1:]
	flipped := "A"
	if sig[0] == 'A' {
		flipped = "B"
	}
	other := authtest.New(t, issuer, audience) // same kids, other keys
	return map[string]string{
		"expired":            idp.Sign(t, authtest.RS256, authtest.Claims{Subject: "alice", IssuedAt: now.Add(-time.Hour), Expires: now.Add(-2 * time.Minute)}),
		"not yet valid":      idp.Sign(t, authtest.RS256, authtest.Claims{Subject: "alice", NotBefore: now.Add(10 * time.Minute)}),
		"issued in future":   idp.Sign(t, authtest.EdDSA, authtest.Claims{Subject: "alice", IssuedAt: now.Add(10 * time.Minute), Expires: now.Add(20 * time.Minute)}),
		"wrong issuer":       idp.Sign(t, authtest.ES256, authtest.Claims{Subject: "alice", Issuer: "https://evil.test/"}),
		"wrong audience":     idp.Sign(t, authtest.EdDSA, authtest.Claims{Subject: "alice", Audience: "another-api"}),
		"no subject":         idp.Sign(t, authtest.RS256, authtest.Claims{}),
		"bad signature":      good[:len(good)-len(sig)] + flipped + sig[1:],
		"other key same kid": other.Sign(t, authtest.RS256, authtest.Claims{Subject: "alice"}),
		"alg none":           idp.ForgeNone(t, authtest.RS256, authtest.Claims{Subject: "alice"}),
		"HS256 public key":   idp.ForgeHS256(t, authtest.Claims{Subject: "alice"}),
		"not a JWT":          "abc.def",
	}
}

// TestVerifyRefusesBadTokens: expired, not yet valid, issued in the
// future, wrong issuer or audience, no subject, a bad signature, a key
// the JWKS does not hold, "alg":"none" and HS256 keyed with the public
// key are all refused with a *TokenError.
func TestVerifyRefusesBadTokens(t *testing.T) {
	idp := authtest.New(t, issuer, audience)
	a := newAuth(t, auth.Config{JWKSURL: idp.Serve(t), HTTPClient: idp.HTTPClient(), Leeway: 30 * time.Second})
	for name, tok := range refusals(t, idp) {
		id, err := a.Verify(context.Background(), "Bearer "+tok)
		var te *auth.TokenError
		if !errors.As(err, &te) {
			t.Errorf("%s: Verify = %+v, %v; want a *TokenError", name, id, err)
			continue
		}
		t.Logf("%s: %s", name, te.Reason)
	}
	// Within the leeway, a just-expired token still passes.
	tok := idp.Sign(t, authtest.RS256, authtest.Claims{Subject: "alice", IssuedAt: time.Now().Add(-time.Hour), Expires: time.Now().Add(-5 * time.Second)})
	if _, err := a.Verify(context.Background(), "Bearer "+tok); err != nil {
		t.Errorf("expired 5s ago with a 30s leeway: %v", err)
	}
}

func TestBearerToken(t *testing.T) {
	for header, want := range map[string]string{
		"Bearer abc.def.ghi":  "abc.def.ghi",
		"bearer  abc.def.gh=": "abc.def.gh=",
		"":                    "!no token",
		"Basic dXNlcjpwYXNz":  "!",
		"Bearer":              "!",
		"Bearer ":             "!",
		"Bearer a b":          "!",
		"Bearer a\"b":         "!",
		"Bearer " + strings.Repeat("a", auth.MaxTokenBytes+1): "!",
	} {
		got, err := auth.BearerToken(header)
		switch {
		case want == "!no token":
			if !errors.Is(err, auth.ErrNoToken) {
				t.Errorf("%q: %q, %v; want ErrNoToken", header, got, err)
			}
		case want == "!":
			var te *auth.TokenError
			if !errors.As(err, &te) {
				t.Errorf("%q: %q, %v; want a *TokenError", header[:min(len(header), 40)], got, err)
			}
		case got != want || err != nil:
			t.Errorf("%q: %q, %v; want %q", header, got, err, want)
		}
	}
}

type response struct {
	status    int
	challenge string
	body      httpapi.Error
	subject   string
}

func serve(t *testing.T, h http.Handler, method, path, token string) response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	r := response{status: rec.Code, challenge: rec.Header().Get("WWW-Authenticate")}
	b, _ := io.ReadAll(rec.Body)
	if rec.Code >= 300 {
		if err := json.Unmarshal(b, &r.body); err != nil {
			t.Fatalf("%s %s: error body %q: %v", method, path, b, err)
		}
	} else {
		r.subject = string(b)
	}
	return r
}

// TestMiddleware: /healthz is open; no token is 401 with a bare Bearer
// challenge, a refused token 401 with error="invalid_token"; resources
// that are not delegated need the policy's read or write grant (403
// insufficient_scope otherwise); delegated ones get the identity in the
// context.
func TestMiddleware(t *testing.T) {
	idp := authtest.New(t, issuer, audience)
	a := newAuth(t, auth.Config{JWKSURL: idp.Serve(t), HTTPClient: idp.HTTPClient(), Delegated: []string{"todo"}})
	h := a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := auth.FromContext(r.Context())
		_, _ = io.WriteString(w, id.Subject)
	}))
	alice := idp.Sign(t, authtest.EdDSA, authtest.Claims{Subject: "alice"})
	bob := idp.Sign(t, authtest.RS256, authtest.Claims{Subject: "bob"})
	ops := idp.Sign(t, authtest.ES256, authtest.Claims{Subject: "carol", Scope: "metrics ops"})
	expired := idp.Sign(t, authtest.RS256, authtest.Claims{Subject: "alice", IssuedAt: time.Now().Add(-time.Hour), Expires: time.Now().Add(-time.Hour)})
	for _, c := range []struct {
		name, method, path, token string
		status                    int
		challenge, subject        string
	}{
		{"healthz open", "GET", "/healthz", "", 200, "", ""},
		{"no token", "GET", "/todo/a", "", 401, `Bearer realm="eventpipe"`, ""},
		{"expired", "GET", "/todo/a", expired, 401, `Bearer realm="eventpipe", error="invalid_token", error_description="the token has expired"`, ""},
		{"garbage", "GET", "/todo/a", "x.y.z", 401, `error="invalid_token"`, ""},
		{"delegated passes with identity", "POST", "/todo", bob, 200, "", "bob"},
		{"read granted", "GET", "/orders/search", alice, 200, "", "alice"},
		{"read refused", "GET", "/analytics/top", alice, 403, `error="insufficient_scope"`, ""},
		{"write refused", "POST", "/orders", alice, 403, `error="insufficient_scope"`, ""},
		{"scope grants read", "GET", "/status.json", ops, 200, "", "carol"},
		{"scope grants write", "POST", "/analytics/events", ops, 200, "", "carol"},
		{"scope does not grant read", "GET", "/analytics/top", ops, 403, `error="insufficient_scope"`, ""},
	} {
		r := serve(t, h, c.method, c.path, c.token)
		if r.status != c.status || !strings.Contains(r.challenge, c.challenge) || r.subject != c.subject {
			t.Errorf("%s: %d %q %q %+v; want %d %q %q", c.name, r.status, r.challenge, r.subject, r.body, c.status, c.challenge, c.subject)
		}
		if c.status >= 400 && r.body.Code == "" {
			t.Errorf("%s: no JSON error body", c.name)
		}
	}
}

// TestRequireCommandAndRead: with a policy, no identity is 401, an
// identity without the grant 403, with it allowed; without a policy
// everything is allowed.
func TestRequireCommandAndRead(t *testing.T) {
	req := func(sub string) *http.Request {
		r := httptest.NewRequest("POST", "/todo", nil)
		if sub != "" {
			r = r.WithContext(auth.WithIdentity(r.Context(), auth.Identity{Subject: sub}))
		}
		return r
	}
	for _, c := range []struct {
		name   string
		policy *auth.Policy
		sub    string
		typ    string
		status int
	}{
		{"no policy", nil, "", "DeleteTodo", 200},
		{"no identity", testPolicy, "", "CreateTodo", 401},
		{"granted", testPolicy, "alice", "CreateTodo", 200},
		{"not granted", testPolicy, "alice", "DeleteTodo", 403},
		{"unknown subject", testPolicy, "mallory", "CreateTodo", 403},
	} {
		rec := httptest.NewRecorder()
		if _, ok := auth.RequireCommand(rec, req(c.sub), c.policy, c.typ); ok {
			rec.WriteHeader(200)
		}
		if rec.Code != c.status {
			t.Errorf("%s: %d, want %d", c.name, rec.Code, c.status)
		}
	}
	_, todoOK := auth.RequireRead(httptest.NewRecorder(), req("alice"), testPolicy, "todo")
	_, analyticsOK := auth.RequireRead(httptest.NewRecorder(), req("alice"), testPolicy, "analytics")
	if !todoOK || analyticsOK {
		t.Error("RequireRead: alice may read todo and not analytics")
	}
}

// TestJWKSURLRotation: a token under a new kid makes the verifier fetch
// the JWKS again at once (no restart, no waiting for the refresh
// interval); the old kid is refused after it left the set; made-up kids
// do not fetch more than once per MinRefreshInterval.
func TestJWKSURLRotation(t *testing.T) {
	idp := authtest.New(t, issuer, audience)
	const minRefresh = 200 * time.Millisecond
	a := newAuth(t, auth.Config{JWKSURL: idp.Serve(t), HTTPClient: idp.HTTPClient(), RefreshInterval: time.Hour, MinRefreshInterval: minRefresh})
	ctx := context.Background()
	oldTok := idp.Sign(t, authtest.RS256, authtest.Claims{Subject: "alice"})
	if _, err := a.Verify(ctx, "Bearer "+oldTok); err != nil {
		t.Fatal(err)
	}
	time.Sleep(minRefresh + 50*time.Millisecond) // at least: a fetch is allowed again
	oldKid, newKid := idp.Rotate(t, authtest.RS256)
	newTok := idp.Sign(t, authtest.RS256, authtest.Claims{Subject: "alice"})
	if !strings.Contains(newTok, ".") || oldKid == newKid {
		t.Fatal("rotation did not change the kid")
	}
	if id, err := a.Verify(ctx, "Bearer "+newTok); err != nil || id.Subject != "alice" {
		t.Fatalf("token under the new kid %s: %+v %v", newKid, id, err)
	}
	// The cached set no longer holds the old kid.
	var te *auth.TokenError
	if _, err := a.Verify(ctx, "Bearer "+oldTok); !errors.As(err, &te) {
		t.Fatalf("token under the removed kid %s: %v", oldKid, err)
	}
	// At most one fetch per MinRefreshInterval, however long the 20
	// verifications take on a busy machine.
	before, began := idp.Fetches(), time.Now()
	for range 20 {
		idp.Rotate(t, authtest.EdDSA) // unknown kids
		_, _ = a.Verify(ctx, "Bearer "+idp.Sign(t, authtest.EdDSA, authtest.Claims{Subject: "alice"}))
	}
	took := time.Since(began)
	if n, most := idp.Fetches()-before, 1+int64(took/minRefresh); n > most {
		t.Errorf("20 unknown kids in %v fetched the JWKS %d times, want at most %d (one per MinRefreshInterval %v)", took, n, most, minRefresh)
	}
}

// TestJWKSFileRotation: a rewritten JWKS file is read again on the next
// request; a file that does not parse keeps the previous keys.
func TestJWKSFileRotation(t *testing.T) {
	idp := authtest.New(t, issuer, audience)
	path := filepath.Join(t.TempDir(), "jwks.json")
	idp.WriteFile(t, path)
	a := newAuth(t, auth.Config{JWKSFile: path, MinRefreshInterval: time.Hour})
	ctx := context.Background()
	oldTok := idp.Sign(t, authtest.ES256, authtest.Claims{Subject: "alice"})
	if _, err := a.Verify(ctx, "Bearer "+oldTok); err != nil {
		t.Fatal(err)
	}
	idp.Rotate(t, authtest.ES256)
	idp.WriteFile(t, path)
	// Make sure the change is seen even on a coarse-mtime file system.
	if err := os.Chtimes(path, time.Now(), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Verify(ctx, "Bearer "+idp.Sign(t, authtest.ES256, authtest.Claims{Subject: "alice"})); err != nil {
		t.Fatalf("new kid after the file changed: %v", err)
	}
	if _, err := a.Verify(ctx, "Bearer "+oldTok); err == nil {
		t.Fatal("the removed kid still verifies")
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, time.Now(), time.Now().Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Verify(ctx, "Bearer "+idp.Sign(t, authtest.ES256, authtest.Claims{Subject: "alice"})); err != nil {
		t.Fatalf("a broken file dropped the keys: %v", err)
	}
}

// TestUnreachableJWKS: with no keys ever loaded, Verify wraps
// ErrKeysUnavailable and the middleware answers 503.
func TestUnreachableJWKS(t *testing.T) {
	idp := authtest.New(t, issuer, audience)
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	srv.Close()
	a := newAuth(t, auth.Config{JWKSURL: srv.URL, HTTPClient: srv.Client()})
	tok := idp.Sign(t, authtest.RS256, authtest.Claims{Subject: "alice"})
	if _, err := a.Verify(context.Background(), "Bearer "+tok); !errors.Is(err, auth.ErrKeysUnavailable) {
		t.Fatalf("Verify: %v", err)
	}
	if r := serve(t, a.Middleware(http.NotFoundHandler()), "GET", "/todo/a", tok); r.status != 503 {
		t.Fatalf("middleware: %+v", r)
	}
}

func TestConfigValidate(t *testing.T) {
	var ve *eventstore.ValidationError
	for name, cfg := range map[string]auth.Config{
		"no keys":      {Issuer: issuer, Audience: audience, Policy: testPolicy},
		"both keys":    {JWKSFile: "f", JWKSURL: "https://x", Issuer: issuer, Audience: audience, Policy: testPolicy},
		"no issuer":    {JWKSFile: "f", Audience: audience, Policy: testPolicy},
		"no audience":  {JWKSFile: "f", Issuer: issuer, Policy: testPolicy},
		"no policy":    {JWKSFile: "f", Issuer: issuer, Audience: audience},
		"big leeway":   {JWKSFile: "f", Issuer: issuer, Audience: audience, Policy: testPolicy, Leeway: time.Hour},
		"empty rule":   {JWKSFile: "f", Issuer: issuer, Audience: audience, Policy: &auth.Policy{Rules: []auth.Rule{{Commands: []string{"*"}}}}},
		"not http URL": {JWKSURL: "file:///etc/jwks", Issuer: issuer, Audience: audience, Policy: testPolicy},
	} {
		if _, err := auth.New(cfg); !errors.As(err, &ve) {
			t.Errorf("%s: %v; want a *eventstore.ValidationError", name, err)
		}
	}
}

func TestLoadPolicy(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p, err := auth.LoadPolicy(write("ok.json", `{"rules":[{"subjects":["alice"],"scopes":["todo:write"],"commands":["CreateTodo","UpdateTodo"],"read":["todo"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	alice, writer := auth.Identity{Subject: "alice"}, auth.Identity{Subject: "svc", Scopes: []string{"todo:write"}}
	if !p.AllowsCommand(alice, "UpdateTodo") || !p.AllowsCommand(writer, "CreateTodo") || p.AllowsCommand(alice, "DeleteTodo") ||
		!p.AllowsRead(writer, "todo") || p.AllowsRead(alice, "orders") || p.AllowsCommand(auth.Identity{Subject: "bob"}, "CreateTodo") {
		t.Errorf("policy %+v decides wrongly", p)
	}
	for name, body := range map[string]string{"typo.json": `{"rules":[{"subject":["alice"],"commands":["*"]}]}`, "bad.json": `{"rules":`} {
		if _, err := auth.LoadPolicy(write(name, body)); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}
