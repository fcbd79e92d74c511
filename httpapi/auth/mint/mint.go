// Package mint makes signing keys and signs JWTs that package
// httpapi/auth verifies. It is a local identity provider: `eventpipe
// stack up` writes a key set with it (KeySet.WriteFiles), `eventpipe auth
// token` and the demo sign tokens with it (Issuer), and the test identity
// provider (httpapi/auth/authtest) builds on its NewKey and Sign. A
// deployment takes its tokens from a real identity provider instead.
package mint

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/eventpipe/eventpipe/eventstore"
)

// The algorithms keys are made for; package auth accepts exactly these.
const (
	RS256 = "RS256"
	ES256 = "ES256"
	EdDSA = "EdDSA"
)

// Algorithms lists RS256, ES256 and EdDSA.
var Algorithms = []string{RS256, ES256, EdDSA}

// NewKey generates a private signing key for alg (RSA 2048, P-256 or
// Ed25519) with kid as its key id and alg as its "alg".
func NewKey(alg, kid string) (jwk.Key, error) {
	var raw any
	var err error
	switch alg {
	case RS256:
		raw, err = rsa.GenerateKey(rand.Reader, 2048)
	case ES256:
		raw, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case EdDSA:
		_, raw, err = ed25519.GenerateKey(rand.Reader)
	default:
		return nil, &eventstore.ValidationError{Field: "alg", Reason: fmt.Sprintf("%q is not one of %s", alg, strings.Join(Algorithms, ", "))}
	}
	if err != nil {
		return nil, fmt.Errorf("mint: generate %s key: %w", alg, err)
	}
	key, err := jwk.Import(raw)
	if err != nil {
		return nil, fmt.Errorf("mint: %w", err)
	}
	sa, _ := jwa.LookupSignatureAlgorithm(alg)
	if err := key.Set(jwk.KeyIDKey, kid); err != nil {
		return nil, fmt.Errorf("mint: %w", err)
	}
	if err := key.Set(jwk.AlgorithmKey, sa); err != nil {
		return nil, fmt.Errorf("mint: %w", err)
	}
	return key, nil
}

// Claims are a token's claims and header type. Sign puts in exactly what
// is set: it applies no defaults and no bounds (Issuer.Token does).
type Claims struct {
	Subject  string
	Scope    string // the "scope" claim, space separated; left out when empty
	Issuer   string
	Audience string
	IssuedAt time.Time
	Expires  time.Time
	// NotBefore is left out when zero.
	NotBefore time.Time
	// NoIssuedAt leaves "iat" out.
	NoIssuedAt bool
	// Type is the header's "typ" (default JWT).
	Type string
}

// Sign returns a compact JWT with c, signed by key (a private key of
// NewKey or of a key set) with alg, under key's kid.
func Sign(key jwk.Key, alg string, c Claims) (string, error) {
	b := jwt.NewBuilder().Subject(c.Subject).Issuer(c.Issuer).Audience([]string{c.Audience}).Expiration(c.Expires)
	if !c.NoIssuedAt {
		b = b.IssuedAt(c.IssuedAt)
	}
	if !c.NotBefore.IsZero() {
		b = b.NotBefore(c.NotBefore)
	}
	if c.Scope != "" {
		b = b.Claim("scope", c.Scope)
	}
	tok, err := b.Build()
	if err != nil {
		return "", fmt.Errorf("mint: %w", err)
	}
	sa, ok := jwa.LookupSignatureAlgorithm(alg)
	if !ok {
		return "", &eventstore.ValidationError{Field: "alg", Reason: fmt.Sprintf("%q is not a signature algorithm", alg)}
	}
	hdrs := jws.NewHeaders()
	if c.Type != "" {
		if err := hdrs.Set(jws.TypeKey, c.Type); err != nil {
			return "", fmt.Errorf("mint: %w", err)
		}
	}
	signed, err := jwt.Sign(tok, jwt.WithKey(sa, key, jws.WithProtectedHeaders(hdrs)))
	if err != nil {
		return "", fmt.Errorf("mint: sign: %w", err)
	}
	return string(signed), nil
}
