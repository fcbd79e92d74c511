package auth

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
)

// Environment variables `eventpipe serve` reads its auth configuration
// from. They are read from the environment only (never flags), and the
// files they name are never logged or printed (`eventpipe stack env`
// prints the variables themselves, file paths only, for the secured
// local stack's key set and policy).
const (
	EnvJWKSFile   = "EVENTPIPE_AUTH_JWKS_FILE"
	EnvJWKSURL    = "EVENTPIPE_AUTH_JWKS_URL"
	EnvIssuer     = "EVENTPIPE_AUTH_ISSUER"
	EnvAudience   = "EVENTPIPE_AUTH_AUDIENCE"
	EnvPolicyFile = "EVENTPIPE_AUTH_POLICY_FILE"
	EnvLeeway     = "EVENTPIPE_AUTH_LEEWAY"
	// EnvMaxLifetime is the longest token lifetime accepted, a Go
	// duration (Config.MaxLifetime; default DefaultMaxLifetime).
	EnvMaxLifetime = "EVENTPIPE_AUTH_MAX_TOKEN_LIFETIME"
	// EnvAuth=off serves the API without authentication (local
	// development only); `serve --no-auth` is the same.
	EnvAuth = "EVENTPIPE_AUTH"
)

// ConfigFromEnv returns the auth configuration the EVENTPIPE_AUTH_*
// variables give, with its policy file loaded: nil and no error when
// none of them is set (auth off), an error when some are set but the
// configuration is incomplete or invalid, so a half-configured server
// does not start open.
func ConfigFromEnv() (*Config, error) {
	return configFromLookup(os.LookupEnv)
}

func configFromLookup(lookup func(string) (string, bool)) (*Config, error) {
	get := func(name string) string {
		v, _ := lookup(name)
		return strings.TrimSpace(v)
	}
	var cfg Config
	cfg.JWKSFile, cfg.JWKSURL = get(EnvJWKSFile), get(EnvJWKSURL)
	cfg.Issuer, cfg.Audience = get(EnvIssuer), get(EnvAudience)
	policy, leeway, lifetime := get(EnvPolicyFile), get(EnvLeeway), get(EnvMaxLifetime)
	if cfg.JWKSFile == "" && cfg.JWKSURL == "" && cfg.Issuer == "" && cfg.Audience == "" && policy == "" && leeway == "" && lifetime == "" {
		return nil, nil
	}
	for _, d := range []struct {
		env, value string
		to         *time.Duration
	}{{EnvLeeway, leeway, &cfg.Leeway}, {EnvMaxLifetime, lifetime, &cfg.MaxLifetime}} {
		if d.value == "" {
			continue
		}
		v, err := time.ParseDuration(d.value)
		if err != nil {
			return nil, &eventstore.ValidationError{Field: d.env, Reason: err.Error()}
		}
		*d.to = v
	}
	if policy == "" {
		return nil, &eventstore.ValidationError{Field: EnvPolicyFile, Reason: "required when auth is configured"}
	}
	p, err := LoadPolicy(policy)
	if err != nil {
		return nil, err
	}
	cfg.Policy = p
	c := cfg
	c.setDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("auth from %s, %s, %s, %s: %w", EnvJWKSFile, EnvJWKSURL, EnvIssuer, EnvAudience, err)
	}
	return &cfg, nil
}

// OffFromEnv reports whether EVENTPIPE_AUTH says "off" (the API served
// without authentication, for local development). "on" or unset is
// false; any other value is an *eventstore.ValidationError.
func OffFromEnv() (bool, error) {
	switch v := strings.ToLower(strings.TrimSpace(os.Getenv(EnvAuth))); v {
	case "", "on", "jwt":
		return false, nil
	case "off":
		return true, nil
	default:
		return false, &eventstore.ValidationError{Field: EnvAuth, Reason: fmt.Sprintf("%q is not on or off", v)}
	}
}
