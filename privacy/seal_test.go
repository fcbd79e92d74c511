package privacy

import (
	"bytes"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe/eventstore"
)

func testKey(t *testing.T, subject string) *DataKey {
	t.Helper()
	plain := make([]byte, 32)
	if _, err := rand.Read(plain); err != nil {
		t.Fatal(err)
	}
	k, err := newDataKey(subject, "owner of "+subject, plain)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestSealOpensOnlyUnderItsSubjectKeyAndBinding: a sealed value opens
// with its subject's key and binding, and fails as a DecodeError when
// altered, opened under another binding (another event or field) or
// with another subject's key; two seals of one value differ.
func TestSealOpensOnlyUnderItsSubjectKeyAndBinding(t *testing.T) {
	alice, bob := testKey(t, "alice"), testKey(t, "bob")
	binding := []byte("todo/t1/3/title")
	plain := []byte(`"Call the dentist"`)
	sealed, err := Seal(alice, binding, plain)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sealed, SealedPrefix) || strings.Contains(sealed, "dentist") {
		t.Fatalf("sealed value %q: want the prefix and no clear text", sealed)
	}
	if s, err := ScopeOf(sealed); err != nil || s != "alice" {
		t.Fatalf("ScopeOf = %q, %v; want alice", s, err)
	}
	got, err := OpenWith(alice, binding, sealed)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("open = %q, %v; want %q", got, err, plain)
	}
	again, _ := Seal(alice, binding, plain)
	if again == sealed {
		t.Fatal("two seals of one value are equal: the nonce is not random")
	}
	flip := []byte(sealed)
	flip[len(flip)-3] ^= 1
	for name, tc := range map[string]struct {
		key     *DataKey
		binding []byte
		sealed  string
	}{
		"another binding":     {alice, []byte("todo/t1/3/message"), sealed},
		"another scope's key": {bob, binding, sealed},
		"altered":             {alice, binding, string(flip)},
		"not sealed":          {alice, binding, "Call the dentist"},
		"truncated":           {alice, binding, sealed[:len(SealedPrefix)+8]},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := OpenWith(tc.key, tc.binding, tc.sealed)
			var de *eventstore.DecodeError
			if !errors.As(err, &de) || !eventstore.IsPermanent(err) {
				t.Fatalf("open: %v, want a permanent *eventstore.DecodeError", err)
			}
		})
	}
}

func TestForgottenErrorIsPermanentAndMatches(t *testing.T) {
	err := error(&ForgottenError{Subject: "alice"})
	if !errors.Is(err, ErrForgotten) || !eventstore.IsPermanent(err) {
		t.Fatalf("%v: want errors.Is ErrForgotten and permanent", err)
	}
	if ke := (&KeyError{Scope: "a", Op: "decrypt", Err: errors.New("DisabledException")}); eventstore.IsPermanent(ke) {
		t.Fatalf("%v: a KMS failure must be retried, not poisoned", ke)
	}
}
