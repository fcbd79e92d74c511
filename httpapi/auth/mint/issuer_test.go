package mint_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/httpapi/auth"
	"github.com/eventpipe/eventpipe/httpapi/auth/mint"
)

// TestIssuerTokensVerifyWithThePublicKeySet writes a key set, signs a
// token for a subject and has package auth verify it against the public
// half; the private half stays 0600 and out of the public file.
func TestIssuerTokensVerifyWithThePublicKeySet(t *testing.T) {
	dir := t.TempDir()
	private, public := filepath.Join(dir, "keys.json"), filepath.Join(dir, "jwks.json")
	if err := mint.WriteKeySet(private, public); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{private, public} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v, want 0600", p, err, st.Mode().Perm())
		}
	}
	pub, err := os.ReadFile(public)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(pub), `"d"`) {
		t.Fatalf("the public key set holds a private part: %s", pub)
	}
	ctx := context.Background()
	iss, err := mint.New(mint.Config{KeyFile: private, Issuer: "local", Audience: "eventpipe"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := iss.Token(ctx, "alice", mint.TokenOptions{Scopes: []string{"todo:write", "todo:read"}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(auth.Config{JWKSFile: public, Issuer: "local", Audience: "eventpipe",
		Policy: &auth.Policy{Rules: []auth.Rule{{Subjects: []string{"alice"}, Read: []string{"*"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	id, err := a.VerifyToken(ctx, tok)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if id.Subject != "alice" || strings.Join(id.Scopes, " ") != "todo:write todo:read" {
		t.Fatalf("identity %+v", id)
	}

	// The public key set cannot sign, and lifetimes are bounded.
	if _, err := mint.New(mint.Config{KeyFile: public, Issuer: "local", Audience: "eventpipe"}); err == nil {
		t.Error("an issuer on the public key set")
	}
	var ve *eventstore.ValidationError
	for _, life := range []time.Duration{auth.DefaultMaxLifetime + time.Second, -time.Second} {
		if _, err := iss.Token(ctx, "alice", mint.TokenOptions{Lifetime: life}); !errors.As(err, &ve) || ve.Field != "lifetime" {
			t.Errorf("lifetime %v: %v, want a ValidationError on lifetime", life, err)
		}
	}
	if _, err := iss.Token(ctx, " ", mint.TokenOptions{}); !errors.As(err, &ve) || ve.Field != "subject" {
		t.Errorf("empty subject: %v", err)
	}
	long, err := iss.Token(ctx, "alice", mint.TokenOptions{Lifetime: auth.DefaultMaxLifetime})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.VerifyToken(ctx, long); err != nil {
		t.Errorf("a token of the maximum lifetime is refused: %v", err)
	}
}

// TestConfigValidateNamesTheField: each missing field is named.
func TestConfigValidateNamesTheField(t *testing.T) {
	for field, cfg := range map[string]mint.Config{
		"KeyFile":         {Issuer: "i", Audience: "a"},
		"Issuer":          {KeyFile: "k", Audience: "a"},
		"Audience":        {KeyFile: "k", Issuer: "i"},
		"DefaultLifetime": {KeyFile: "k", Issuer: "i", Audience: "a", MaxLifetime: time.Minute, DefaultLifetime: time.Hour},
	} {
		_, err := mint.New(cfg)
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("%s: %v", field, err)
		}
	}
}
