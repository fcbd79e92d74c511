package privacy

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/eventpipe/eventpipe/eventstore"
)

// SealedPrefix begins every sealed value: "pii1." + base64url(subject) +
// "." + base64url(nonce ‖ AES-256-GCM ciphertext and tag).
const SealedPrefix = "pii1."

// associated builds the data a seal is bound to: the format, the subject
// and what the caller names (e.g. the event's identity and the field), so
// a sealed value copied to another event, field or subject fails to open.
func associated(subject string, binding []byte) []byte {
	b := make([]byte, 0, len(SealedPrefix)+len(subject)+len(binding)+2)
	b = append(b, SealedPrefix...)
	b = append(b, 0)
	b = append(b, subject...)
	b = append(b, 0)
	return append(b, binding...)
}

// Seal encrypts plain with key, bound to binding, and returns the sealed
// value (SealedPrefix…), a string that names its subject in clear (a
// subject id is a key, not personal content: pick opaque ids).
func Seal(key *DataKey, binding, plain []byte) (string, error) {
	nonce := make([]byte, key.aead.NonceSize(), key.aead.NonceSize()+len(plain)+key.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("privacy: nonce: %w", err)
	}
	sealed := key.aead.Seal(nonce, nonce, plain, associated(key.subject, binding))
	return SealedPrefix + base64.RawURLEncoding.EncodeToString([]byte(key.subject)) + "." + base64.RawURLEncoding.EncodeToString(sealed), nil
}

// SubjectOf returns the subject a sealed value names, a
// *eventstore.DecodeError when it is not a sealed value.
func SubjectOf(sealed string) (string, error) {
	subject, _, err := parse(sealed)
	return subject, err
}

func parse(sealed string) (subject string, ciphertext []byte, err error) {
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
	if err != nil || validSubject(string(sub)) != nil {
		return "", nil, bad("has no valid subject")
	}
	ct, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", nil, bad("ciphertext is not base64url")
	}
	return string(sub), ct, nil
}

// Open decrypts a sealed value with its subject's key from keys, checking
// it was sealed with that binding. A forgotten subject is a
// *ForgottenError; a value altered, or sealed under another binding, a
// *eventstore.DecodeError.
func Open(ctx context.Context, keys *KeyStore, binding []byte, sealed string) ([]byte, error) {
	subject, _, err := parse(sealed)
	if err != nil {
		return nil, err
	}
	key, err := keys.KeyForOpening(ctx, subject)
	if err != nil {
		return nil, err
	}
	return OpenWith(key, binding, sealed)
}

// OpenWith is Open with the subject's key in hand.
func OpenWith(key *DataKey, binding []byte, sealed string) ([]byte, error) {
	subject, ct, err := parse(sealed)
	if err != nil {
		return nil, err
	}
	if subject != key.subject {
		return nil, fmt.Errorf("privacy: %w", &eventstore.DecodeError{What: "sealed value", Reason: fmt.Sprintf("is %s's, not %s's", subject, key.subject)})
	}
	n := key.aead.NonceSize()
	if len(ct) < n+key.aead.Overhead() {
		return nil, fmt.Errorf("privacy: %w", &eventstore.DecodeError{What: "sealed value", Reason: "is too short"})
	}
	plain, err := key.aead.Open(nil, ct[:n], ct[n:], associated(subject, binding))
	if err != nil {
		return nil, fmt.Errorf("privacy: %w", &eventstore.DecodeError{What: "sealed value of " + subject, Reason: "does not authenticate (altered, or sealed for another event or field)"})
	}
	return plain, nil
}
