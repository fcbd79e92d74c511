package httpapi

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/eventpipe/eventpipe/eventstore"
)

// IdempotencyKeyHeader is the request header of draft-ietf-httpapi-
// idempotency-key-header: a client-chosen key that makes a retried
// non-idempotent request (POST) answer what its first attempt answered
// instead of running again.
const IdempotencyKeyHeader = "Idempotency-Key"

// MaxIdempotencyKeyLength is the longest key accepted, in bytes (after
// unquoting a Structured Field string).
const MaxIdempotencyKeyLength = 255

// IdempotencyCommandPrefix starts every command id derived from an
// Idempotency-Key (IdempotencyKey.CommandID). Such an id has exactly one
// dot, so it never has a saga's "<saga>.<instance>.<step>" form.
const IdempotencyCommandPrefix = "idem."

// idemEncoding is lower-case base32 without padding: ids made of [a-z2-7],
// which the event store accepts as command and aggregate ids.
var idemEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// IdempotencyKey is a client's Idempotency-Key scoped to the subject that
// sent it: two subjects using the same key get different scoped keys, so
// clients cannot collide (or read each other's answers). The zero value
// is not a key; get one from ParseIdempotencyKey.
type IdempotencyKey struct {
	// Key is the key as the client sent it (unquoted).
	Key string
	// Subject is the authenticated subject it is scoped to ("" when
	// anonymous).
	Subject string
	sum     [sha256.Size]byte
}

// ParseIdempotencyKey reads the Idempotency-Key header of r and scopes it
// to subject. ok is false when the header is absent. The value is a
// Structured Field string ("…", with \" and \\ escapes) as the draft
// says, or, as many clients send it, the bare key; either way the key must
// be 1–255 printable ASCII characters (0x20–0x7E). An invalid key, or the
// header sent more than once, is a *eventstore.ValidationError on field
// "Idempotency-Key" (answer 400).
func ParseIdempotencyKey(r *http.Request, subject string) (key IdempotencyKey, ok bool, err error) {
	values := r.Header.Values(IdempotencyKeyHeader)
	switch len(values) {
	case 0:
		return IdempotencyKey{}, false, nil
	case 1:
	default:
		return IdempotencyKey{}, false, &eventstore.ValidationError{Field: IdempotencyKeyHeader, Reason: fmt.Sprintf("is sent %d times, at most once", len(values))}
	}
	raw := strings.Trim(values[0], " \t")
	k, err := unquoteKey(raw)
	if err != nil {
		return IdempotencyKey{}, false, err
	}
	return NewIdempotencyKey(subject, k)
}

// unquoteKey returns raw's key: the content of a Structured Field string,
// or raw itself.
func unquoteKey(raw string) (string, error) {
	invalid := func(reason string) error {
		return &eventstore.ValidationError{Field: IdempotencyKeyHeader, Reason: reason}
	}
	if !strings.HasPrefix(raw, `"`) {
		return raw, nil
	}
	var b strings.Builder
	for i := 1; i < len(raw); i++ {
		switch c := raw[i]; c {
		case '\\':
			i++
			if i >= len(raw) || (raw[i] != '"' && raw[i] != '\\') {
				return "", invalid("has a bad escape in its quoted string")
			}
			b.WriteByte(raw[i])
		case '"':
			if i != len(raw)-1 {
				return "", invalid("has characters after its quoted string")
			}
			return b.String(), nil
		default:
			b.WriteByte(c)
		}
	}
	return "", invalid("has an unterminated quoted string")
}

// NewIdempotencyKey checks key (1–255 printable ASCII characters) and
// scopes it to subject. It returns ok true with the scoped key, or a
// *eventstore.ValidationError.
func NewIdempotencyKey(subject, key string) (IdempotencyKey, bool, error) {
	invalid := func(reason string) error {
		return &eventstore.ValidationError{Field: IdempotencyKeyHeader, Reason: reason}
	}
	switch {
	case key == "":
		return IdempotencyKey{}, false, invalid("is empty")
	case len(key) > MaxIdempotencyKeyLength:
		return IdempotencyKey{}, false, invalid(fmt.Sprintf("is %d bytes long, at most %d are allowed", len(key), MaxIdempotencyKeyLength))
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return IdempotencyKey{}, false, invalid(fmt.Sprintf("has a character that is not printable ASCII at byte %d", i))
		}
	}
	h := sha256.New()
	h.Write([]byte("eventpipe idempotency-key v1\x00"))
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(subject)))
	h.Write(n[:])
	h.Write([]byte(subject))
	h.Write([]byte(key))
	k := IdempotencyKey{Key: key, Subject: subject}
	copy(k.sum[:], h.Sum(nil))
	return k, true, nil
}

// ID returns the scoped key as 52 characters of lower-case base32 (the
// SHA-256 of subject and key): the name of everything stored for it.
func (k IdempotencyKey) ID() string { return strings.ToLower(idemEncoding.EncodeToString(k.sum[:])) }

// CommandID returns the command id of the request the key guards:
// "idem.<ID>". Resending it is how a retry finds the command's recorded
// answer (the event store's command record).
func (k IdempotencyKey) CommandID() string { return IdempotencyCommandPrefix + k.ID() }

// Derive returns a 26-character lower-case base32 name derived from the
// scoped key and purpose (for example the id of the aggregate a create
// without an id makes), so that every retry names the same thing.
func (k IdempotencyKey) Derive(purpose string) string {
	h := sha256.New()
	h.Write(k.sum[:])
	h.Write([]byte(purpose))
	return strings.ToLower(idemEncoding.EncodeToString(h.Sum(nil)))[:26]
}

// Fingerprint returns the fingerprint of a request: "sha256:" and the
// unpadded base64url SHA-256 of its method, path and canonical body (the
// caller canonicalises it, e.g. by decoding it strictly and encoding it
// again, so that spacing and field order do not matter). A key reused
// with another fingerprint is answered 422.
func Fingerprint(method, path string, canonicalBody []byte) string {
	h := sha256.New()
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write([]byte(path))
	h.Write([]byte{0})
	h.Write(canonicalBody)
	return "sha256:" + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// InFlight is the set of idempotency keys whose requests this process is
// handling: a second request with a key in the set is answered 409 (the
// draft's "request is outstanding"). It only sees this process; across
// processes the event store's command record still lets a command run
// once. The zero value is ready; safe for concurrent use.
type InFlight struct {
	mu   sync.Mutex
	keys map[string]struct{}
}

// Acquire adds k to the set and returns the function that removes it;
// ok is false, and nothing is added, when k is in the set already.
func (f *InFlight) Acquire(k IdempotencyKey) (release func(), ok bool) {
	id := k.ID()
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, busy := f.keys[id]; busy {
		return nil, false
	}
	if f.keys == nil {
		f.keys = map[string]struct{}{}
	}
	f.keys[id] = struct{}{}
	return func() {
		f.mu.Lock()
		delete(f.keys, id)
		f.mu.Unlock()
	}, true
}
