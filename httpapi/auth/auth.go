// Package auth authenticates requests to the HTTP API with JWT bearer
// tokens (RFC 6750) and authorizes them with a Policy.
//
// A token must be a compact JWS signed with RS256, ES256 (P-256) or EdDSA
// (Ed25519) by a key of the configured JWKS, carry the configured issuer
// and audience and a subject, be within its exp, nbf and iat (with a
// small leeway), live no longer than MaxLifetime and have no typ but JWT
// or at+jwt. Anything else — no token, "none", HMAC, another algorithm,
// an unknown key — is refused with 401. Keys come from a file or an
// https:// URL and are loaded in the background (see Config.JWKSURL). The verified identity
// is put in the request's context (FromContext); handlers that dispatch
// commands ask the Policy with RequireCommand and RequireRead, and the
// middleware asks it for every other resource, so that once auth is on
// nothing is allowed that the policy does not grant.
package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/health"
	"github.com/eventpipe/eventpipe/httpapi"
)

// Realm is the realm of every WWW-Authenticate challenge.
const Realm = "eventpipe"

// MaxTokenBytes bounds the bearer token; a longer one is refused with 401
// before it is parsed.
const MaxTokenBytes = 8 << 10

// DefaultOpen are the paths served without a token when Config.Open is
// nil: /healthz and the health probes (package health), which an
// orchestrator asks without credentials.
var DefaultOpen = append([]string{"/healthz"}, health.Paths...)

// Config configures an Authenticator. Exactly one of JWKSFile and JWKSURL
// is required, and so are Issuer, Audience and Policy.
type Config struct {
	// JWKSFile is a JSON Web Key Set file. It is read again in the
	// background when its size or modification time changes, and when a
	// token names an unknown key (at most once per MinRefreshInterval),
	// so a rotation needs no restart. A file that cannot be read or does
	// not parse keeps the previous keys; a set with fewer keys (or none)
	// replaces them.
	JWKSFile string
	// JWKSURL is a JSON Web Key Set URL (an identity provider's jwks_uri).
	// It must be https:// (an http:// URL is refused: anyone on the path
	// could hand out signing keys). It is fetched on the first request,
	// again every RefreshInterval, and when a token names an unknown key
	// (at most once per MinRefreshInterval), always in the background,
	// one fetch at a time, without following redirects, within
	// FetchTimeout and MaxJWKSBytes. A failed fetch keeps the previous
	// keys and is retried with backoff; a set with fewer keys (or none)
	// replaces them.
	JWKSURL string
	// Issuer is the required "iss" claim.
	Issuer string
	// Audience is the audience the "aud" claim must contain.
	Audience string
	// Leeway is the clock skew allowed on exp, nbf and iat (default 30s,
	// at most 5m).
	Leeway time.Duration
	// MaxLifetime is the longest lifetime a token may have: exp − iat,
	// or exp − now when it has no iat (default DefaultMaxLifetime). A
	// longer-lived token is refused, so a leaked token is not good for
	// ever.
	MaxLifetime time.Duration
	// RefreshInterval is how often the key set is loaded again when
	// tokens are verified (default 15m); it bounds how long a key removed
	// from JWKSURL's set keeps verifying. A JWKSFile is instead read
	// again when it changes.
	RefreshInterval time.Duration
	// MinRefreshInterval bounds the reloads that unknown key ids trigger
	// (default 30s), so tokens with made-up kids cannot hammer the
	// identity provider; it is also the longest backoff between failed
	// loads.
	MinRefreshInterval time.Duration
	// FetchTimeout bounds one load of the key set, from connecting to
	// the last byte (default 10s).
	FetchTimeout time.Duration
	// Policy decides what each identity may do. Required: with auth on,
	// what the policy does not grant is refused.
	Policy *Policy
	// Open are paths served without a token (default: DefaultOpen,
	// /healthz and the health probes /livez, /readyz and /startupz).
	Open []string
	// Delegated are resources (first path segments) whose handlers ask
	// the policy themselves (RequireCommand, RequireRead); the middleware
	// only authenticates requests to them. Every other resource needs the
	// policy's Read grant for GET and HEAD and its Write grant otherwise.
	Delegated []string
	// HTTPClient fetches JWKSURL (default: http.DefaultTransport). Its
	// redirect policy is replaced: a redirect is never followed.
	HTTPClient *http.Client
	// Logger logs refused tokens at debug and key reloads (default
	// slog.Default()). Tokens are never logged.
	Logger *slog.Logger
}

// DefaultMaxLifetime is Config.MaxLifetime's default: a day.
const DefaultMaxLifetime = 24 * time.Hour

// MaxJWKSBytes bounds a key set document; a larger one is not loaded.
const MaxJWKSBytes = 1 << 20

func (c *Config) setDefaults() {
	if c.Leeway == 0 {
		c.Leeway = 30 * time.Second
	}
	if c.MaxLifetime == 0 {
		c.MaxLifetime = DefaultMaxLifetime
	}
	if c.RefreshInterval == 0 {
		c.RefreshInterval = 15 * time.Minute
	}
	if c.MinRefreshInterval == 0 {
		c.MinRefreshInterval = 30 * time.Second
	}
	if c.FetchTimeout == 0 {
		c.FetchTimeout = 10 * time.Second
	}
	if c.Open == nil {
		c.Open = slices.Clone(DefaultOpen)
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first invalid field as a *eventstore.ValidationError.
func (c Config) Validate() error {
	invalid := func(field, reason string) error {
		return &eventstore.ValidationError{Field: "auth " + field, Reason: reason}
	}
	switch {
	case (c.JWKSFile == "") == (c.JWKSURL == ""):
		return invalid("JWKSFile/JWKSURL", "exactly one is required")
	case c.JWKSURL != "":
		if err := validJWKSURL(c.JWKSURL); err != "" {
			return invalid("JWKSURL", err)
		}
	}
	switch {
	case c.Issuer == "":
		return invalid("Issuer", "required")
	case c.Audience == "":
		return invalid("Audience", "required")
	case c.Leeway < 0 || c.Leeway > 5*time.Minute:
		return invalid("Leeway", "must be between 0 and 5m")
	case c.MaxLifetime < 0:
		return invalid("MaxLifetime", "negative")
	case c.RefreshInterval < 0 || c.MinRefreshInterval < 0:
		return invalid("RefreshInterval", "negative")
	case c.FetchTimeout < 0:
		return invalid("FetchTimeout", "negative")
	case c.Policy == nil:
		return invalid("Policy", "required (deny by default: an empty policy refuses everything)")
	}
	return c.Policy.Validate()
}

// validJWKSURL returns why u cannot be a JWKS URL, or "".
func validJWKSURL(u string) string {
	parsed, err := url.Parse(u)
	switch {
	case err != nil:
		return "not a URL"
	case strings.EqualFold(parsed.Scheme, "http"):
		return "http:// is refused: signing keys must come over https:// (or from a file, " + EnvJWKSFile + "), or anyone on the path could hand out keys"
	case !strings.EqualFold(parsed.Scheme, "https") || parsed.Host == "":
		return "not an https:// URL"
	case parsed.User != nil:
		return "must not carry credentials"
	}
	return ""
}

// Identity is an authenticated caller.
type Identity struct {
	// Subject is the token's "sub" claim, never empty.
	Subject string
	// Issuer is the token's "iss" claim.
	Issuer string
	// Scopes are the token's "scope" (space separated) or "scp" claim.
	Scopes []string
}

type ctxKey struct{}

// WithIdentity returns ctx carrying id.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// FromContext returns the identity the middleware verified, and false on
// a request that was not authenticated (auth off, or an open path).
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(ctxKey{}).(Identity)
	return id, ok
}

// Authenticator verifies bearer tokens and holds the policy.
type Authenticator struct {
	cfg  Config
	keys *keyring
}

// New returns an Authenticator. It does not read or fetch the keys: that
// happens on the first request, so a JWKS URL that is down at start does
// not stop the server (its requests get 503 until it answers; failed
// loads are retried with backoff, not on every request). An
// Authenticator is safe for concurrent use.
func New(cfg Config) (*Authenticator, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var k *keyring
	if cfg.JWKSFile != "" {
		k = newKeyring(cfg, "file "+cfg.JWKSFile, fileSource(cfg.JWKSFile))
	} else {
		k = newKeyring(cfg, "url "+cfg.JWKSURL, urlSource(cfg.HTTPClient, cfg.JWKSURL))
	}
	return &Authenticator{cfg: cfg, keys: k}, nil
}

// Policy returns the policy the Authenticator was configured with, and
// nil on a nil Authenticator (auth off).
func (a *Authenticator) Policy() *Policy {
	if a == nil {
		return nil
	}
	return a.cfg.Policy
}

// TokenError is why a token was refused; its message becomes the
// error_description of the 401's challenge.
type TokenError struct {
	Reason string
	Err    error
}

func (e *TokenError) Error() string {
	if e.Err == nil {
		return "auth: " + e.Reason
	}
	return "auth: " + e.Reason + ": " + e.Err.Error()
}

func (e *TokenError) Unwrap() error { return e.Err }

// ErrNoToken is returned by BearerToken and Verify when the request has
// no Authorization header.
var ErrNoToken = errors.New("auth: no bearer token")

// ErrKeysUnavailable is wrapped by Verify when the signing keys could
// never be loaded (a JWKS URL that has not answered yet).
var ErrKeysUnavailable = errors.New("auth: signing keys unavailable")

// BearerToken returns the token of an "Authorization: Bearer <token>"
// header: ErrNoToken without the header, a *TokenError when it is not a
// single bearer token in the RFC 6750 syntax or longer than
// MaxTokenBytes.
func BearerToken(header string) (string, error) {
	if header == "" {
		return "", ErrNoToken
	}
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", &TokenError{Reason: "the Authorization header is not a Bearer token"}
	}
	token = strings.TrimLeft(token, " ")
	switch {
	case token == "":
		return "", &TokenError{Reason: "empty bearer token"}
	case len(token) > MaxTokenBytes:
		return "", &TokenError{Reason: fmt.Sprintf("bearer token longer than %d bytes", MaxTokenBytes)}
	}
	// b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
	body := strings.TrimRight(token, "=")
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~+/", c) >= 0) {
			return "", &TokenError{Reason: "malformed bearer token"}
		}
	}
	return token, nil
}

// Verify checks the request's bearer token and returns its identity:
// ErrNoToken without one, an error wrapping ErrKeysUnavailable when no
// keys could be loaded, and a *TokenError for every token it refuses.
func (a *Authenticator) Verify(ctx context.Context, header string) (Identity, error) {
	raw, err := BearerToken(header)
	if err != nil {
		return Identity{}, err
	}
	return a.VerifyToken(ctx, raw)
}

// VerifyToken is Verify on a bare token.
func (a *Authenticator) VerifyToken(ctx context.Context, raw string) (Identity, error) {
	if strings.Count(raw, ".") != 2 {
		return Identity{}, &TokenError{Reason: "not a compact JWS"}
	}
	var keysErr error
	provider := jws.KeyProviderFunc(func(ctx context.Context, sink jws.KeySink, sig *jws.Signature, _ *jws.Message) error {
		key, alg, err := a.key(ctx, sig)
		if err != nil {
			if errors.Is(err, ErrKeysUnavailable) {
				keysErr = err
			}
			return err
		}
		sink.Key(alg, key)
		return nil
	})
	tok, err := jwt.Parse([]byte(raw),
		jwt.WithKeyProvider(provider),
		jwt.WithContext(ctx),
		jwt.WithValidate(true),
		jwt.WithIssuer(a.cfg.Issuer),
		jwt.WithAudience(a.cfg.Audience),
		jwt.WithAcceptableSkew(a.cfg.Leeway),
		jwt.WithRequiredClaim("exp"),
		jwt.WithRequiredClaim("sub"),
	)
	if keysErr != nil {
		return Identity{}, keysErr
	}
	if err != nil {
		return Identity{}, &TokenError{Reason: reason(err), Err: err}
	}
	if err := a.checkLifetime(tok); err != nil {
		return Identity{}, err
	}
	id := Identity{}
	id.Subject, _ = tok.Subject()
	id.Issuer, _ = tok.Issuer()
	if id.Subject == "" {
		return Identity{}, &TokenError{Reason: "the token has no subject"}
	}
	var scope string
	if tok.Get("scope", &scope) == nil {
		id.Scopes = strings.Fields(scope)
	} else {
		var scp []string
		if tok.Get("scp", &scp) == nil {
			id.Scopes = scp
		} else if tok.Get("scp", &scope) == nil {
			id.Scopes = strings.Fields(scope)
		}
	}
	return id, nil
}

// checkLifetime refuses a token whose lifetime (exp − iat, or exp − now
// without iat) exceeds MaxLifetime.
func (a *Authenticator) checkLifetime(tok jwt.Token) error {
	exp, _ := tok.Expiration() // required: Parse checked it is there
	from, ok := tok.IssuedAt()
	if !ok {
		from = time.Now()
	}
	if life := exp.Sub(from); life > a.cfg.MaxLifetime {
		return &TokenError{Reason: fmt.Sprintf("the token's lifetime exceeds the maximum of %v", a.cfg.MaxLifetime)}
	}
	return nil
}

// acceptedType reports whether a JWS "typ" header is one a token may
// carry: none, JWT or at+jwt (RFC 8725 §3.11, RFC 9068 §2.1), in any
// case and with or without the "application/" prefix (RFC 7515 §4.1.9).
func acceptedType(typ string) bool {
	t := strings.ToLower(typ)
	t = strings.TrimPrefix(t, "application/")
	return t == "jwt" || t == "at+jwt"
}

// reason turns a jwx error into a short, client-safe description.
func reason(err error) string {
	switch {
	case errors.Is(err, jwt.TokenExpiredError()):
		return "the token has expired"
	case errors.Is(err, jwt.TokenNotYetValidError()):
		return "the token is not valid yet"
	case errors.Is(err, jwt.InvalidIssuedAtError()):
		return "the token was issued in the future"
	case errors.Is(err, jwt.InvalidIssuerError()):
		return "wrong issuer"
	case errors.Is(err, jwt.InvalidAudienceError()):
		return "wrong audience"
	case errors.Is(err, jwt.MissingRequiredClaimError()):
		return "a required claim (exp, sub) is missing"
	case errors.Is(err, errAlgorithm):
		return "signature algorithm not accepted (RS256, ES256, EdDSA)"
	case errors.Is(err, errUnknownKey):
		return "unknown signing key"
	case errors.Is(err, errType):
		return "token type not accepted (typ must be JWT or at+jwt)"
	}
	return "invalid token"
}

var (
	errAlgorithm  = errors.New("signature algorithm not accepted")
	errUnknownKey = errors.New("unknown signing key")
	errType       = errors.New("token type not accepted")
)

// accepted maps each accepted algorithm to a check of the public key type.
var accepted = map[string]func(any) bool{
	jwa.RS256().String(): func(k any) bool {
		rk, ok := k.(*rsa.PublicKey)
		return ok && rk.N.BitLen() >= 2048
	},
	jwa.ES256().String(): func(k any) bool {
		ek, ok := k.(*ecdsa.PublicKey)
		return ok && ek.Curve == elliptic.P256()
	},
	jwa.EdDSA().String(): func(k any) bool {
		_, ok := k.(ed25519.PublicKey)
		return ok
	},
}

// key returns the public key and algorithm to verify sig with: the
// header's alg must be accepted, its kid known, and the key's type match
// the alg (so an RSA key is never used as an HMAC secret).
func (a *Authenticator) key(ctx context.Context, sig *jws.Signature) (any, jwa.SignatureAlgorithm, error) {
	h := sig.ProtectedHeaders()
	alg, ok := h.Algorithm()
	if !ok {
		return nil, alg, errAlgorithm
	}
	fits, ok := accepted[alg.String()]
	if !ok {
		return nil, alg, fmt.Errorf("%w: %q", errAlgorithm, alg.String())
	}
	if typ, ok := h.Type(); ok && !acceptedType(typ) {
		return nil, alg, fmt.Errorf("%w: %q", errType, typ)
	}
	kid, _ := h.KeyID()
	jk, err := a.keys.lookup(ctx, kid)
	if err != nil {
		return nil, alg, err
	}
	pub, err := jwk.PublicKeyOf(jk)
	if err != nil {
		return nil, alg, fmt.Errorf("%w: %v", errUnknownKey, err)
	}
	var raw any
	if err := jwk.Export(pub, &raw); err != nil || !fits(raw) {
		return nil, alg, fmt.Errorf("%w: key %q does not fit %s", errAlgorithm, kid, alg.String())
	}
	if ka, ok := jk.Algorithm(); ok && ka.String() != alg.String() {
		return nil, alg, fmt.Errorf("%w: key %q is for %s", errAlgorithm, kid, ka.String())
	}
	return raw, alg, nil
}

// Middleware authenticates every request but those to Open paths: 401
// with a Bearer challenge when the token is missing or refused, 503 when
// the keys cannot be loaded. An authenticated request carries its
// Identity in its context. Requests to resources that are not Delegated
// are authorized here too: 403 unless the policy grants Read (GET, HEAD)
// or Write (other methods) on the resource.
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slices.Contains(a.cfg.Open, r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		id, err := a.Verify(r.Context(), r.Header.Get("Authorization"))
		var te *TokenError
		switch {
		case errors.Is(err, ErrNoToken):
			w.Header().Set("WWW-Authenticate", `Bearer realm="`+Realm+`"`)
			httpapi.WriteError(w, http.StatusUnauthorized, "unauthenticated", "a bearer token is required")
			return
		case errors.As(err, &te):
			a.cfg.Logger.Debug("auth: token refused", "path", r.URL.Path, "reason", te.Reason)
			w.Header().Set("WWW-Authenticate", challenge("invalid_token", te.Reason))
			httpapi.WriteError(w, http.StatusUnauthorized, "invalid_token", te.Reason)
			return
		case err != nil:
			a.cfg.Logger.WarnContext(r.Context(), "auth: cannot verify tokens", "request_id", httpapi.RequestID(r.Context()), "err", err)
			httpapi.WriteError(w, http.StatusServiceUnavailable, "auth_unavailable", "the signing keys cannot be loaded")
			return
		}
		r = r.WithContext(WithIdentity(r.Context(), id))
		res := Resource(r.URL.Path)
		if !slices.Contains(a.cfg.Delegated, res) {
			allowed := a.cfg.Policy.AllowsRead(id, res)
			what := "read " + res
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				allowed, what = a.cfg.Policy.AllowsWrite(id, res), "write "+res
			}
			if !allowed {
				Forbid(w, what)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// Resource is the resource of a path as the policy names it: its first
// segment without an extension ("/todo/a1" → "todo", "/status.json" →
// "status"; "/" → "").
func Resource(path string) string {
	seg, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	seg, _, _ = strings.Cut(seg, ".")
	return seg
}

// RequireCommand asks p what the request's identity may do with
// commands of type typ: GrantAll when p is nil (auth off); otherwise the
// grant, and false (with the refusal written: 401 without an identity,
// 403 when p grants nothing) when it allows nothing. A handler that acts
// on an owned aggregate checks Grant.OwnedBy before it does.
func RequireCommand(w http.ResponseWriter, r *http.Request, p *Policy, typ string) (Grant, bool) {
	return require(w, r, p, "send "+typ, func(id Identity) Grant { return p.Command(id, typ) })
}

// RequireRead is RequireCommand for a read of resource.
func RequireRead(w http.ResponseWriter, r *http.Request, p *Policy, resource string) (Grant, bool) {
	return require(w, r, p, "read "+resource, func(id Identity) Grant { return p.Read(id, resource) })
}

// RequireWrite is RequireCommand for a write of resource other than by
// a command.
func RequireWrite(w http.ResponseWriter, r *http.Request, p *Policy, resource string) (Grant, bool) {
	return require(w, r, p, "write "+resource, func(id Identity) Grant { return p.Write(id, resource) })
}

func require(w http.ResponseWriter, r *http.Request, p *Policy, what string, grant func(Identity) Grant) (Grant, bool) {
	if p == nil {
		return GrantAll, true
	}
	id, ok := FromContext(r.Context())
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="`+Realm+`"`)
		httpapi.WriteError(w, http.StatusUnauthorized, "unauthenticated", "a bearer token is required")
		return Grant{}, false
	}
	g := grant(id)
	if !g.Allowed() {
		Forbid(w, what)
		return g, false
	}
	return g, true
}

// Forbid writes 403 with an insufficient_scope challenge for what.
func Forbid(w http.ResponseWriter, what string) {
	msg := "the policy does not allow you to " + what
	w.Header().Set("WWW-Authenticate", challenge("insufficient_scope", msg))
	httpapi.WriteError(w, http.StatusForbidden, "insufficient_scope", msg)
}

// challenge is a Bearer challenge with an error code and a description
// restricted to the characters RFC 6750 allows in it.
func challenge(code, desc string) string {
	clean := strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return -1
		}
		return r
	}, desc)
	return fmt.Sprintf(`Bearer realm=%q, error=%q, error_description=%q`, Realm, code, clean)
}
