// Package authtest is a test identity provider for package httpapi/auth:
// it generates an RSA, an ECDSA P-256 and an Ed25519 signing key
// (package mint, which also signs its tokens), serves
// their public JWKS (from an httptest server or a file), signs tokens with
// them, rotates them, and forges the tokens a verifier must refuse ("alg":
// "none", HS256 keyed with a public key). It is for tests only.
package authtest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/eventpipe/eventpipe/httpapi/auth/mint"
)

// The algorithms the provider signs with (package mint's).
const (
	RS256 = mint.RS256
	ES256 = mint.ES256
	EdDSA = mint.EdDSA
)

// Algorithms lists RS256, ES256 and EdDSA.
var Algorithms = mint.Algorithms

// Provider is a test identity provider. Its methods are safe for
// concurrent use.
type Provider struct {
	// Issuer and Audience are the defaults of the tokens Sign makes.
	Issuer, Audience string

	mu      sync.Mutex
	keys    map[string]jwk.Key // alg → private key with its kid
	gen     int
	fetches atomic.Int64
	client  *http.Client
}

// New returns a provider with one fresh key per algorithm.
func New(t testing.TB, issuer, audience string) *Provider {
	t.Helper()
	p := &Provider{Issuer: issuer, Audience: audience, keys: map[string]jwk.Key{}}
	for _, alg := range Algorithms {
		p.Rotate(t, alg)
	}
	return p
}

// Rotate replaces alg's key with a fresh one under a new kid and returns
// the old and new kids (old is "" the first time). The old key leaves the
// JWKS.
func (p *Provider) Rotate(t testing.TB, alg string) (oldKid, newKid string) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gen++
	newKid = fmt.Sprintf("%s-%d", alg, p.gen)
	key, err := mint.NewKey(alg, newKid)
	if err != nil {
		t.Fatalf("authtest: %v", err)
	}
	if old, ok := p.keys[alg]; ok {
		oldKid, _ = old.KeyID()
	}
	p.keys[alg] = key
	return oldKid, newKid
}

// Kid returns the kid of alg's current key.
func (p *Provider) Kid(alg string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	kid, _ := p.keys[alg].KeyID()
	return kid
}

// JWKS returns the public keys as a JSON Web Key Set.
func (p *Provider) JWKS(t testing.TB) []byte {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	set := jwk.NewSet()
	for _, alg := range Algorithms {
		pub, err := jwk.PublicKeyOf(p.keys[alg])
		if err != nil {
			t.Fatal(err)
		}
		if err := set.AddKey(pub); err != nil {
			t.Fatal(err)
		}
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Serve serves the current JWKS over HTTPS on an httptest server closed
// at the end of the test, and returns its URL; HTTPClient trusts its
// certificate.
func (p *Provider) Serve(t testing.TB) string {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		p.fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(p.JWKS(t))
	}))
	t.Cleanup(srv.Close)
	p.mu.Lock()
	p.client = srv.Client()
	p.mu.Unlock()
	return srv.URL
}

// HTTPClient returns a client that trusts the certificate of Serve's
// server (the auth.Config.HTTPClient to fetch its URL with); nil before
// Serve.
func (p *Provider) HTTPClient() *http.Client {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.client
}

// Fetches counts the requests Serve's server answered.
func (p *Provider) Fetches() int64 { return p.fetches.Load() }

// WriteFile writes the current JWKS to path.
func (p *Provider) WriteFile(t testing.TB, path string) {
	t.Helper()
	if err := os.WriteFile(path, p.JWKS(t), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Claims are a token's claims; zero fields take defaults: Issuer and
// Audience the Provider's, IssuedAt now, Expires now + 5m.
type Claims = mint.Claims

func (p *Provider) fill(c Claims) Claims {
	now := time.Now()
	if c.Issuer == "" {
		c.Issuer = p.Issuer
	}
	if c.Audience == "" {
		c.Audience = p.Audience
	}
	if c.IssuedAt.IsZero() {
		c.IssuedAt = now
	}
	if c.Expires.IsZero() {
		c.Expires = now.Add(5 * time.Minute)
	}
	return c
}

// Sign returns a compact JWT with c, signed with alg's current key (its
// kid in the header).
func (p *Provider) Sign(t testing.TB, alg string, c Claims) string {
	t.Helper()
	p.mu.Lock()
	key := p.keys[alg]
	p.mu.Unlock()
	if key == nil {
		t.Fatalf("authtest: unknown algorithm %q", alg)
	}
	signed, err := mint.Sign(key, alg, p.fill(c))
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

// ForgeNone returns an unsigned token ("alg":"none") with c and the kid
// of alg's current key.
func (p *Provider) ForgeNone(t testing.TB, alg string, c Claims) string {
	t.Helper()
	return p.forge(t, `{"alg":"none","typ":"JWT","kid":"`+p.Kid(alg)+`"}`, c, func(string) string { return "" })
}

// ForgeHS256 returns a token with c signed with HMAC-SHA256 keyed with
// the JSON of the RSA key's public JWK (the classic algorithm confusion
// attack), under that key's kid.
func (p *Provider) ForgeHS256(t testing.TB, c Claims) string {
	t.Helper()
	p.mu.Lock()
	pub, err := jwk.PublicKeyOf(p.keys[RS256])
	p.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	secret, err := json.Marshal(pub)
	if err != nil {
		t.Fatal(err)
	}
	return p.forge(t, `{"alg":"HS256","typ":"JWT","kid":"`+p.Kid(RS256)+`"}`, c, func(input string) string {
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(input))
		return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	})
}

func (p *Provider) forge(t testing.TB, header string, c Claims, sign func(string) string) string {
	t.Helper()
	c = p.fill(c)
	claims := map[string]any{"sub": c.Subject, "iss": c.Issuer, "aud": c.Audience, "iat": c.IssuedAt.Unix(), "exp": c.Expires.Unix()}
	body, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	input := base64.RawURLEncoding.EncodeToString([]byte(header)) + "." + base64.RawURLEncoding.EncodeToString(body)
	return input + "." + sign(input)
}
