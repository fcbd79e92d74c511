package auth

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
)

// TestConfigFromEnv: no variable is auth off; a complete set gives the
// configuration with its policy loaded; a partial set is an error, so
// a half-configured server does not start open.
func TestConfigFromEnv(t *testing.T) {
	policy := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(policy, []byte(`{"rules":[{"subjects":["alice"],"commands":["CreateTodo"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	lookup := func(env map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	}
	if cfg, err := configFromLookup(lookup(map[string]string{EnvIssuer: "  "})); cfg != nil || err != nil {
		t.Fatalf("blank variables: %+v %v; want auth off", cfg, err)
	}
	full := map[string]string{EnvJWKSURL: "https://idp.test/jwks", EnvIssuer: "https://idp.test/", EnvAudience: "api", EnvPolicyFile: policy, EnvLeeway: "10s", EnvMaxLifetime: "1h"}
	cfg, err := configFromLookup(lookup(full))
	if err != nil || cfg.Issuer != "https://idp.test/" || cfg.Leeway != 10*time.Second || cfg.MaxLifetime != time.Hour || len(cfg.Policy.Rules) != 1 || !cfg.Policy.AllowsCommand(Identity{Subject: "alice"}, "CreateTodo") {
		t.Fatalf("full: %+v %v", cfg, err)
	}
	var ve *eventstore.ValidationError
	for _, drop := range []string{EnvAudience, EnvIssuer, EnvJWKSURL, EnvPolicyFile} {
		env := map[string]string{}
		for k, v := range full {
			if k != drop {
				env[k] = v
			}
		}
		if cfg, err := configFromLookup(lookup(env)); !errors.As(err, &ve) {
			t.Errorf("without %s: %+v %v; want a *eventstore.ValidationError", drop, cfg, err)
		}
	}
	full[EnvJWKSURL] = "http://idp.test/jwks"
	if _, err := configFromLookup(lookup(full)); !errors.As(err, &ve) || ve.Field != "auth JWKSURL" {
		t.Errorf("http:// JWKS URL: %v; want a *eventstore.ValidationError on auth JWKSURL", err)
	}
	full[EnvJWKSURL] = "https://idp.test/jwks"
	full[EnvMaxLifetime] = "a while"
	if _, err := configFromLookup(lookup(full)); !errors.As(err, &ve) || ve.Field != EnvMaxLifetime {
		t.Errorf("bad max lifetime: %v", err)
	}
	full[EnvMaxLifetime] = ""
	full[EnvLeeway] = "soon"
	if _, err := configFromLookup(lookup(full)); !errors.As(err, &ve) {
		t.Errorf("bad leeway: %v", err)
	}
}
