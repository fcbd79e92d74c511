package auth_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/httpapi/auth"
	"github.com/eventpipe/eventpipe/httpapi/auth/authtest"
)

// FuzzVerifyAuthorization feeds Authorization headers through Verify
// (the header parsing, the JWS parsing, the key choice and the claim
// checks): it must never panic, every failure is ErrNoToken or a
// *TokenError, and the only headers it accepts carry one of the tokens
// the test signed, unchanged.
func FuzzVerifyAuthorization(f *testing.F) {
	idp := authtest.New(f, issuer, audience)
	path := filepath.Join(f.TempDir(), "jwks.json")
	idp.WriteFile(f, path)
	a, err := auth.New(auth.Config{JWKSFile: path, Issuer: issuer, Audience: audience, Policy: testPolicy, MinRefreshInterval: time.Hour})
	if err != nil {
		f.Fatal(err)
	}
	valid := map[string]bool{}
	for _, alg := range authtest.Algorithms {
		tok := idp.Sign(f, alg, authtest.Claims{Subject: "alice", Expires: time.Now().Add(time.Hour)})
		valid[tok] = true
		f.Add("Bearer " + tok)
		f.Add("bearer " + tok + "=")
		f.Add("Bearer " + tok[:len(tok)-3])
		f.Add("Bearer " + strings.Replace(tok, ".", "..", 1))
	}
	for _, tok := range refusals(f, idp) {
		f.Add("Bearer " + tok)
	}
	for _, s := range []string{"", "Bearer", "Bearer ", "Basic Zm9vOmJhcg==", "Bearer ...", "Bearer a.b.c", "Bearer e30.e30.", "Bearer eyJhbGciOiJub25lIn0.e30.", "Bearer \x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		id, err := a.Verify(context.Background(), header)
		if err != nil {
			var te *auth.TokenError
			if !errors.Is(err, auth.ErrNoToken) && !errors.As(err, &te) {
				t.Fatalf("Verify(%q): %T %v", header, err, err)
			}
			return
		}
		tok, _ := auth.BearerToken(header)
		if !valid[tok] || id.Subject != "alice" {
			t.Fatalf("Verify(%q) authenticated %+v", header, id)
		}
	})
}
