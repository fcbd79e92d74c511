package auth_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/httpapi/auth"
	"github.com/eventpipe/eventpipe/httpapi/auth/authtest"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// jwksServer is an HTTPS key set server whose document and availability
// a test controls: Hold makes every request wait until the returned
// release is called.
type jwksServer struct {
	*httptest.Server
	body    atomic.Pointer[[]byte]
	fetches atomic.Int64 // requests received, held or not
	mu      sync.Mutex
	held    chan struct{} // non-nil: requests wait for it to close
}

func newJWKSServer(t *testing.T, body []byte) *jwksServer {
	s := &jwksServer{}
	s.body.Store(&body)
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		held := s.held
		s.mu.Unlock()
		if held != nil {
			select {
			case <-held:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(*s.body.Load())
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) serve(body []byte) { s.body.Store(&body) }

func (s *jwksServer) hold() (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.held = ch
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.held = nil
			s.mu.Unlock()
			close(ch)
		})
	}
}

// TestAnHTTPJWKSURLIsRefused: signing keys never come over plain HTTP,
// not even from loopback: an http:// JWKS URL is a
// *eventstore.ValidationError naming JWKSURL, from the Config and from
// the environment.
func TestAnHTTPJWKSURLIsRefused(t *testing.T) {
	for _, u := range []string{"http://idp.example/.well-known/jwks.json", "HTTP://idp.example/jwks", "http://127.0.0.1:8443/jwks", "https://user:pw@idp.example/jwks", "https:///jwks"} {
		_, err := auth.New(auth.Config{JWKSURL: u, Issuer: issuer, Audience: audience, Policy: testPolicy})
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || ve.Field != "auth JWKSURL" {
			t.Errorf("JWKSURL %q: %v; want a *eventstore.ValidationError on auth JWKSURL", u, err)
		}
	}
	if _, err := auth.New(auth.Config{JWKSURL: "https://idp.example/jwks", Issuer: issuer, Audience: audience, Policy: testPolicy}); err != nil {
		t.Errorf("https: %v", err)
	}
}

// TestARedirectedJWKSIsRefused: a JWKS URL that answers with a redirect
// loads no keys (the requests get 503), and the redirect's target is
// never asked.
func TestARedirectedJWKSIsRefused(t *testing.T) {
	idp := authtest.New(t, issuer, audience)
	target := newJWKSServer(t, idp.JWKS(t))
	redirector := httptest.NewTLSServer(http.RedirectHandler(target.URL, http.StatusFound))
	t.Cleanup(redirector.Close)
	a := newAuth(t, auth.Config{JWKSURL: redirector.URL, HTTPClient: redirector.Client()}) // trusts the target's certificate too
	tok := idp.Sign(t, authtest.ES256, authtest.Claims{Subject: "alice"})
	if id, err := a.Verify(context.Background(), "Bearer "+tok); !errors.Is(err, auth.ErrKeysUnavailable) {
		t.Fatalf("Verify through a redirected JWKS: %+v, %v; want ErrKeysUnavailable", id, err)
	}
	if r := serve(t, a.Middleware(http.NotFoundHandler()), "GET", "/todo/a", tok); r.status != 503 || r.body.Code != "auth_unavailable" {
		t.Fatalf("middleware: %+v; want 503 auth_unavailable", r)
	}
	if n := target.fetches.Load(); n != 0 {
		t.Fatalf("the redirect's target was fetched %d times", n)
	}
}

// TestForgedTokenFloodDoesNotDelayValidRequests: while a flood of tokens
// naming unknown kids has the key set reloading from a JWKS server that
// does not answer, every request with a token of a known key is
// verified (none waits for the reload), and the flood made exactly one
// fetch. Once the server answers, the forged tokens are refused.
func TestForgedTokenFloodDoesNotDelayValidRequests(t *testing.T) {
	idp := authtest.New(t, issuer, audience)
	srv := newJWKSServer(t, idp.JWKS(t))
	a := newAuth(t, auth.Config{JWKSURL: srv.URL, HTTPClient: srv.Client(), RefreshInterval: time.Hour, MinRefreshInterval: time.Nanosecond, FetchTimeout: time.Hour})
	h := a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	valid := idp.Sign(t, authtest.RS256, authtest.Claims{Subject: "alice"})
	if r := serve(t, h, "GET", "/todo/a", valid); r.status != 200 {
		t.Fatalf("before the flood: %+v", r)
	}
	loaded := srv.fetches.Load()

	release := srv.hold()
	defer release()
	forger := authtest.New(t, issuer, audience)
	const forged, good = 50, 50
	var refused atomic.Int64
	var flood sync.WaitGroup
	for i := range forged {
		forger.Rotate(t, authtest.EdDSA) // a kid the set does not hold
		tok := forger.Sign(t, authtest.EdDSA, authtest.Claims{Subject: fmt.Sprintf("mallory-%d", i)})
		flood.Add(1)
		go func() {
			defer flood.Done()
			if r := serve(t, h, "GET", "/todo/a", tok); r.status == 401 {
				refused.Add(1)
			}
		}()
	}
	integration.Await(t, "the flood makes the key set reload", func() error {
		if n := srv.fetches.Load(); n == loaded {
			return errors.New("no fetch yet")
		}
		return nil
	})

	var verified atomic.Int64
	var valids sync.WaitGroup
	for range good {
		valids.Add(1)
		go func() {
			defer valids.Done()
			if r := serve(t, h, "GET", "/todo/a", valid); r.status == 200 {
				verified.Add(1)
			}
		}()
	}
	// Waited for with the JWKS server still held: a valid request that
	// waited on the reload would never finish.
	integration.Await(t, "every valid request answered while the reload hangs", func() error {
		if n := verified.Load(); n < good {
			return fmt.Errorf("%d of %d valid requests verified", n, good)
		}
		return nil
	})
	valids.Wait()
	if n := srv.fetches.Load() - loaded; n != 1 {
		t.Errorf("the flood made %d fetches while one was running; want 1", n)
	}
	release()
	flood.Wait()
	if n := refused.Load(); n != forged {
		t.Errorf("%d of %d forged tokens refused with 401", n, forged)
	}
}

// TestAReloadOutlivesTheRequestThatTriggeredIt: a client that hangs up
// while its token's unknown kid has the key set reloading does not
// cancel the reload: the new key it brings verifies afterwards without
// another fetch.
func TestAReloadOutlivesTheRequestThatTriggeredIt(t *testing.T) {
	idp := authtest.New(t, issuer, audience)
	srv := newJWKSServer(t, idp.JWKS(t))
	a := newAuth(t, auth.Config{JWKSURL: srv.URL, HTTPClient: srv.Client(), RefreshInterval: time.Hour, MinRefreshInterval: time.Nanosecond, FetchTimeout: time.Hour})
	if _, err := a.Verify(context.Background(), "Bearer "+idp.Sign(t, authtest.RS256, authtest.Claims{Subject: "alice"})); err != nil {
		t.Fatal(err)
	}
	idp.Rotate(t, authtest.RS256)
	srv.serve(idp.JWKS(t))
	newTok := idp.Sign(t, authtest.RS256, authtest.Claims{Subject: "alice"})
	before := srv.fetches.Load()
	release := srv.hold()
	defer release()

	ctx, hangUp := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := a.Verify(ctx, "Bearer "+newTok); done <- err }()
	integration.Await(t, "the new kid makes the key set reload", func() error {
		if srv.fetches.Load() == before {
			return errors.New("no fetch yet")
		}
		return nil
	})
	hangUp()
	<-done // the request ends with its client, whatever it answers
	release()
	// This waits for the reload still running, if it runs, and starts
	// none: it is only the reload of the hung-up request that can bring
	// the new key.
	a2 := auth.Identity{}
	var err error
	integration.Await(t, "the new kid verifies", func() error {
		a2, err = a.Verify(context.Background(), "Bearer "+newTok)
		return err
	})
	if a2.Subject != "alice" {
		t.Fatalf("identity %+v", a2)
	}
	if n := srv.fetches.Load() - before; n != 1 {
		t.Errorf("%d fetches; want the one of the hung-up request", n)
	}
}

// TestAKeyRemovedFromTheSetStopsVerifying: after a reload, a key the
// set no longer holds is refused, and so is every key when the set is
// emptied (a revocation, not a failed load).
func TestAKeyRemovedFromTheSetStopsVerifying(t *testing.T) {
	idp := authtest.New(t, issuer, audience)
	srv := newJWKSServer(t, idp.JWKS(t))
	a := newAuth(t, auth.Config{JWKSURL: srv.URL, HTTPClient: srv.Client(), RefreshInterval: time.Hour, MinRefreshInterval: time.Nanosecond})
	ctx := context.Background()
	rsaTok := idp.Sign(t, authtest.RS256, authtest.Claims{Subject: "alice"})
	edTok := idp.Sign(t, authtest.EdDSA, authtest.Claims{Subject: "alice"})
	for _, tok := range []string{rsaTok, edTok} {
		if _, err := a.Verify(ctx, "Bearer "+tok); err != nil {
			t.Fatal(err)
		}
	}
	// One key leaves the set: a token under a kid the set does not hold
	// makes it reload (and waits for it).
	idp.Rotate(t, authtest.RS256)
	srv.serve(idp.JWKS(t))
	if _, err := a.Verify(ctx, "Bearer "+idp.Sign(t, authtest.RS256, authtest.Claims{Subject: "alice"})); err != nil {
		t.Fatalf("the new RSA key: %v", err)
	}
	var te *auth.TokenError
	if _, err := a.Verify(ctx, "Bearer "+rsaTok); !errors.As(err, &te) {
		t.Fatalf("the removed RSA key: %v; want a *TokenError", err)
	}
	if _, err := a.Verify(ctx, "Bearer "+edTok); err != nil {
		t.Fatalf("the EdDSA key still in the set: %v", err)
	}
	// The set is emptied: every key is revoked after the next reload.
	srv.serve([]byte(`{"keys":[]}`))
	forger := authtest.New(t, issuer, audience)
	forger.Rotate(t, authtest.ES256)
	_, _ = a.Verify(ctx, "Bearer "+forger.Sign(t, authtest.ES256, authtest.Claims{Subject: "x"})) // an unknown kid: reloads
	if id, err := a.Verify(ctx, "Bearer "+edTok); !errors.As(err, &te) {
		t.Fatalf("a key of an emptied set: %+v, %v; want a *TokenError", id, err)
	}
}

// TestTokenLifetimeAndType: a token longer-lived than MaxLifetime (by
// exp − iat, or exp − now without iat) is refused, and so is a typ other
// than JWT or at+jwt; within the maximum, and with those types, tokens
// pass.
func TestTokenLifetimeAndType(t *testing.T) {
	idp := authtest.New(t, issuer, audience)
	a := newAuth(t, auth.Config{JWKSURL: idp.Serve(t), HTTPClient: idp.HTTPClient(), MaxLifetime: 2 * time.Hour})
	now := time.Now()
	for name, c := range map[string]struct {
		claims authtest.Claims
		ok     bool
	}{
		"1h":                     {authtest.Claims{Subject: "alice", Expires: now.Add(time.Hour)}, true},
		"3h":                     {authtest.Claims{Subject: "alice", Expires: now.Add(3 * time.Hour)}, false},
		"3h, issued 2h ago":      {authtest.Claims{Subject: "alice", IssuedAt: now.Add(-2 * time.Hour), Expires: now.Add(time.Hour)}, false},
		"3h left, no iat":        {authtest.Claims{Subject: "alice", NoIssuedAt: true, Expires: now.Add(3 * time.Hour)}, false},
		"1h left, no iat":        {authtest.Claims{Subject: "alice", NoIssuedAt: true, Expires: now.Add(time.Hour)}, true},
		"typ at+jwt":             {authtest.Claims{Subject: "alice", Type: "at+jwt"}, true},
		"typ application/at+JWT": {authtest.Claims{Subject: "alice", Type: "application/at+JWT"}, true},
		"typ jwt":                {authtest.Claims{Subject: "alice", Type: "jwt"}, true},
		"typ secevent+jwt":       {authtest.Claims{Subject: "alice", Type: "secevent+jwt"}, false},
		"typ JOSE":               {authtest.Claims{Subject: "alice", Type: "JOSE"}, false},
		"typ dpop+jwt":           {authtest.Claims{Subject: "alice", Type: "dpop+jwt"}, false},
	} {
		_, err := a.Verify(context.Background(), "Bearer "+idp.Sign(t, authtest.ES256, c.claims))
		var te *auth.TokenError
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: %v; want accepted", name, err)
		case !c.ok && !errors.As(err, &te):
			t.Errorf("%s: %v; want a *TokenError", name, err)
		case !c.ok:
			t.Logf("%s: %s", name, te.Reason)
		}
	}
	// The default maximum is a day.
	d := newAuth(t, auth.Config{JWKSURL: idp.Serve(t), HTTPClient: idp.HTTPClient()})
	if _, err := d.Verify(context.Background(), "Bearer "+idp.Sign(t, authtest.RS256, authtest.Claims{Subject: "alice", Expires: now.Add(25 * time.Hour)})); err == nil {
		t.Error("a 25h token passed the default maximum")
	}
}

// TestFailedLoadsBackOff: before the first successful load, requests get
// 503 without a fetch each: failed loads are retried with backoff (at
// least 500ms after a first failure, jitter included), however long the
// requests take on a busy machine; once the server answers, a load
// after the backoff brings the keys.
func TestFailedLoadsBackOff(t *testing.T) {
	idp := authtest.New(t, issuer, audience)
	var fetches atomic.Int64
	var up atomic.Bool
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches.Add(1)
		if !up.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write(idp.JWKS(t))
	}))
	t.Cleanup(srv.Close)
	a := newAuth(t, auth.Config{JWKSURL: srv.URL, HTTPClient: srv.Client()})
	h := a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	tok := idp.Sign(t, authtest.EdDSA, authtest.Claims{Subject: "alice"})
	began := time.Now()
	for range 30 {
		if r := serve(t, h, "GET", "/todo/a", tok); r.status != 503 || r.body.Code != "auth_unavailable" {
			t.Fatalf("while the JWKS server fails: %+v; want 503 auth_unavailable", r)
		}
	}
	took := time.Since(began)
	if n, most := fetches.Load(), 1+int64(took/(500*time.Millisecond)); n > most {
		t.Errorf("30 requests in %v fetched the failing JWKS %d times; want at most %d", took, n, most)
	}
	up.Store(true)
	integration.Await(t, "the keys load once the server answers", func() error {
		if r := serve(t, h, "GET", "/todo/a", tok); r.status != 200 {
			return fmt.Errorf("%d %+v", r.status, r.body)
		}
		return nil
	})
}
