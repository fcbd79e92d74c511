package mint

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/httpapi/auth"
)

// WriteKeySet generates one EdDSA signing key and writes it, private, as a
// JSON Web Key Set to privatePath and its public half to publicPath (the
// file auth.Config.JWKSFile names). Both are written mode 0600 through a
// temporary file; their folder must exist.
func WriteKeySet(privatePath, publicPath string) error {
	key, err := NewKey(EdDSA, "local-"+time.Now().UTC().Format("20060102T150405Z"))
	if err != nil {
		return err
	}
	pub, err := jwk.PublicKeyOf(key)
	if err != nil {
		return fmt.Errorf("mint: %w", err)
	}
	for path, k := range map[string]jwk.Key{privatePath: key, publicPath: pub} {
		set := jwk.NewSet()
		if err := set.AddKey(k); err != nil {
			return fmt.Errorf("mint: %w", err)
		}
		b, err := json.MarshalIndent(set, "", "  ")
		if err != nil {
			return fmt.Errorf("mint: %w", err)
		}
		if err := writePrivate(path, append(b, '\n')); err != nil {
			return err
		}
	}
	return nil
}

// writePrivate writes b to path (mode 0600) through a temporary file, so
// that a reader never sees half a file.
func writePrivate(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("mint: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("mint: %w", err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("mint: write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("mint: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("mint: %w", err)
	}
	return nil
}

// Config configures an Issuer.
type Config struct {
	// KeyFile is a JSON Web Key Set holding private keys (WriteKeySet's
	// privatePath). Its first key with an "alg" signs. Required.
	KeyFile string
	// Issuer is the "iss" of the tokens. Required.
	Issuer string
	// Audience is the "aud" of the tokens. Required.
	Audience string
	// MaxLifetime bounds the lifetime Token accepts (default
	// auth.DefaultMaxLifetime, what `eventpipe serve` accepts by default).
	MaxLifetime time.Duration
	// DefaultLifetime is the lifetime of a token when Token is given
	// none (default an hour, or MaxLifetime when that is shorter).
	DefaultLifetime time.Duration
}

func (c *Config) setDefaults() {
	if c.MaxLifetime == 0 {
		c.MaxLifetime = auth.DefaultMaxLifetime
	}
	if c.DefaultLifetime == 0 {
		c.DefaultLifetime = min(time.Hour, c.MaxLifetime)
	}
}

// Validate reports the first invalid field as a *eventstore.ValidationError.
func (c Config) Validate() error {
	bad := func(field, reason string) error {
		return fmt.Errorf("mint: Config: %w", &eventstore.ValidationError{Field: field, Reason: reason})
	}
	switch {
	case c.KeyFile == "":
		return bad("KeyFile", "is empty")
	case c.Issuer == "":
		return bad("Issuer", "is empty")
	case c.Audience == "":
		return bad("Audience", "is empty")
	case c.MaxLifetime < 0:
		return bad("MaxLifetime", "is negative")
	case c.DefaultLifetime < 0 || c.DefaultLifetime > c.MaxLifetime:
		return bad("DefaultLifetime", fmt.Sprintf("%v is not between 0 and MaxLifetime (%v)", c.DefaultLifetime, c.MaxLifetime))
	}
	return nil
}

// Issuer signs tokens for named subjects with a local private key set.
// It is safe for concurrent use.
type Issuer struct {
	cfg Config
	key jwk.Key
	alg string
}

// New loads cfg.KeyFile and returns an Issuer.
func New(cfg Config) (*Issuer, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("mint: signing keys: %w", err)
	}
	set, err := jwk.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("mint: signing keys %s: %w", cfg.KeyFile, err)
	}
	for i := range set.Len() {
		key, _ := set.Key(i)
		alg, ok := key.Algorithm()
		if !ok {
			continue
		}
		if !isPrivate(key) {
			continue
		}
		return &Issuer{cfg: cfg, key: key, alg: alg.String()}, nil
	}
	return nil, fmt.Errorf("mint: %s holds no private key with an \"alg\"", cfg.KeyFile)
}

// isPrivate reports whether key has a private part.
func isPrivate(key jwk.Key) bool {
	switch key.(type) {
	case jwk.RSAPrivateKey, jwk.ECDSAPrivateKey, jwk.OKPPrivateKey:
		return true
	}
	return false
}

// TokenOptions are a token's optional claims.
type TokenOptions struct {
	// Scopes become the "scope" claim, space separated.
	Scopes []string
	// Lifetime is how long the token is valid (default
	// Config.DefaultLifetime); longer than Config.MaxLifetime is refused.
	Lifetime time.Duration
}

// Token returns a token for subject, issued now, signed with the key set's
// key: what `serve` accepts when configured with the set's public half,
// the Issuer and Audience.
func (i *Issuer) Token(ctx context.Context, subject string, opts TokenOptions) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if strings.TrimSpace(subject) == "" {
		return "", &eventstore.ValidationError{Field: "subject", Reason: "is empty"}
	}
	life := opts.Lifetime
	if life == 0 {
		life = i.cfg.DefaultLifetime
	}
	if life < 0 || life > i.cfg.MaxLifetime {
		return "", &eventstore.ValidationError{Field: "lifetime", Reason: fmt.Sprintf("%v is not between 0 and the maximum of %v (a longer-lived token is refused by serve)", life, i.cfg.MaxLifetime)}
	}
	now := time.Now().Truncate(time.Second)
	return Sign(i.key, i.alg, Claims{
		Subject: subject, Scope: strings.Join(opts.Scopes, " "),
		Issuer: i.cfg.Issuer, Audience: i.cfg.Audience,
		IssuedAt: now, Expires: now.Add(life),
	})
}

// Issuer returns the configured issuer.
func (i *Issuer) Issuer() string { return i.cfg.Issuer }
