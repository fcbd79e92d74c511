package privacy

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/eventpipe/eventpipe/eventstore"
)

// SealedPrefix begins every sealed value: "pii1." + base64url(scope) +
// "." + base64url(nonce ‖ AES-256-GCM ciphertext and tag).
const SealedPrefix = "pii1."

// associated builds the data a seal is bound to: the format, the scope
// and what the caller names (e.g. the event's identity and the field), so
// a sealed value copied to another event, field or scope fails to open.
func associated(scope string, binding []byte) []byte {
	b := make([]byte, 0, len(SealedPrefix)+len(scope)+len(binding)+2)
	b = append(b, SealedPrefix...)
	b = append(b, 0)
	b = append(b, scope...)
	b = append(b, 0)
	return append(b, binding...)
}

// Seal encrypts plain with key, bound to binding, and returns the sealed
// value (SealedPrefix…), a string that names its scope in clear (an
// aggregate's id, or a subject's: a key, not personal content; pick
// opaque ids).
func Seal(key *DataKey, binding, plain []byte) (string, error) {
	nonce := make([]byte, key.aead.NonceSize(), key.aead.NonceSize()+len(plain)+key.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("privacy: nonce: %w", err)
	}
	sealed := key.aead.Seal(nonce, nonce, plain, associated(key.scope, binding))
	return SealedPrefix + base64.RawURLEncoding.EncodeToString([]byte(key.scope)) + "." + base64.RawURLEncoding.EncodeToString(sealed), nil
}

// ScopeOf returns the scope a sealed value names, a
// *eventstore.DecodeError when it is not a sealed value.
func ScopeOf(sealed string) (string, error) {
	scope, _, err := parse(sealed)
	return scope, err
}

func parse(sealed string) (scope string, ciphertext []byte, err error) {
	bad := func(reason string) error {
		return fmt.Errorf("privacy: %w", &eventstore.DecodeError{What: "sealed value", Reason: reason})
	}
	rest, ok := strings.CutPrefix(sealed, SealedPrefix)
	if !ok {
		return "", nil, bad("does not begin with " + SealedPrefix)
	}
	s, c, ok := strings.Cut(rest, ".")
	if !ok {
		return "", nil, bad("lacks the ciphertext")
	}
	sub, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || validID("scope", string(sub)) != nil {
		return "", nil, bad("has no valid scope")
	}
	ct, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", nil, bad("ciphertext is not base64url")
	}
	return string(sub), ct, nil
}

// Open decrypts a sealed value with its scope's key from keys, checking
// it was sealed with that binding. A forgotten subject's value is a
// *ForgottenError; a value altered, or sealed under another binding, a
// *eventstore.DecodeError.
func Open(ctx context.Context, keys *KeyStore, binding []byte, sealed string) ([]byte, error) {
	scope, _, err := parse(sealed)
	if err != nil {
		return nil, err
	}
	key, err := keys.KeyForOpening(ctx, scope)
	if err != nil {
		return nil, err
	}
	return OpenWith(key, binding, sealed)
}

// OpenWith is Open with the subject's key in hand.
func OpenWith(key *DataKey, binding []byte, sealed string) ([]byte, error) {
	scope, ct, err := parse(sealed)
	if err != nil {
		return nil, err
	}
	if scope != key.scope {
		return nil, fmt.Errorf("privacy: %w", &eventstore.DecodeError{What: "sealed value", Reason: fmt.Sprintf("is of %s, not of %s", scope, key.scope)})
	}
	n := key.aead.NonceSize()
	if len(ct) < n+key.aead.Overhead() {
		return nil, fmt.Errorf("privacy: %w", &eventstore.DecodeError{What: "sealed value", Reason: "is too short"})
	}
	plain, err := key.aead.Open(nil, ct[:n], ct[n:], associated(scope, binding))
	if err != nil {
		return nil, fmt.Errorf("privacy: %w", &eventstore.DecodeError{What: "sealed value of " + scope, Reason: "does not authenticate (altered, or sealed for another event or field)"})
	}
	return plain, nil
}
