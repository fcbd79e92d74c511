package httpapi_test

import (
	"errors"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/httpapi"
	"github.com/eventpipe/eventpipe/sagas"
)

func TestParseIdempotencyKeyAcceptsStructuredAndBareKeysAndRefusesBadOnes(t *testing.T) {
	for _, c := range []struct {
		name    string
		headers []string
		key     string
		present bool
		invalid bool
	}{
		{name: "absent"},
		{name: "sf-string", headers: []string{`"8e03978e-40d5-43e8-bc93-6894a57f9324"`}, key: "8e03978e-40d5-43e8-bc93-6894a57f9324", present: true},
		{name: "bare", headers: []string{"order-42"}, key: "order-42", present: true},
		{name: "escapes", headers: []string{`"a\"b\\c"`}, key: `a"b\c`, present: true},
		{name: "inner space", headers: []string{"a b"}, key: "a b", present: true},
		{name: "255 bytes", headers: []string{strings.Repeat("k", 255)}, key: strings.Repeat("k", 255), present: true},
		{name: "empty", headers: []string{""}, invalid: true},
		{name: "empty string", headers: []string{`""`}, invalid: true},
		{name: "256 bytes", headers: []string{strings.Repeat("k", 256)}, invalid: true},
		{name: "control character", headers: []string{"a\x01b"}, invalid: true},
		{name: "non-ASCII", headers: []string{"clé"}, invalid: true},
		{name: "unterminated", headers: []string{`"abc`}, invalid: true},
		{name: "after the string", headers: []string{`"abc"def`}, invalid: true},
		{name: "bad escape", headers: []string{`"a\nb"`}, invalid: true},
		{name: "twice", headers: []string{"a", "b"}, invalid: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, _ := http.NewRequest("POST", "/todo", nil)
			for _, h := range c.headers {
				r.Header.Add(httpapi.IdempotencyKeyHeader, h)
			}
			k, ok, err := httpapi.ParseIdempotencyKey(r, "alice")
			var ve *eventstore.ValidationError
			switch {
			case c.invalid:
				if !errors.As(err, &ve) || ve.Field != httpapi.IdempotencyKeyHeader {
					t.Fatalf("err = %v, want a *ValidationError on %s", err, httpapi.IdempotencyKeyHeader)
				}
			case err != nil:
				t.Fatal(err)
			case ok != c.present || k.Key != c.key:
				t.Fatalf("got %q present %v, want %q present %v", k.Key, ok, c.key, c.present)
			}
		})
	}
}

func TestIdempotencyKeysAreScopedPerSubjectAndMakeStorableIDs(t *testing.T) {
	key := func(subject, k string) httpapi.IdempotencyKey {
		t.Helper()
		out, _, err := httpapi.NewIdempotencyKey(subject, k)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	alice, bob := key("alice", "k1"), key("bob", "k1")
	if alice.CommandID() == bob.CommandID() || alice.Derive("todo") == bob.Derive("todo") {
		t.Fatal("two subjects' equal keys share ids")
	}
	if key("alice", "k1").CommandID() != alice.CommandID() || key("alice", "k1").Derive("todo") != alice.Derive("todo") {
		t.Fatal("the same key derives different ids")
	}
	// "ab"+"c" and "a"+"bc" must not collide either.
	if key("ab", "c").ID() == key("a", "bc").ID() {
		t.Fatal("subject and key are not separated")
	}
	if !regexp.MustCompile(`^idem\.[a-z2-7]{52}$`).MatchString(alice.CommandID()) {
		t.Fatalf("command id %q", alice.CommandID())
	}
	if !regexp.MustCompile(`^[a-z2-7]{26}$`).MatchString(alice.Derive("todo")) {
		t.Fatalf("derived id %q", alice.Derive("todo"))
	}
	if err := eventstore.ValidateName("command_id", alice.CommandID()); err != nil {
		t.Fatal(err)
	}
	// A saga named like the prefix still cannot read it as one of its
	// "<saga>.<instance>.<step>" ids.
	if _, _, ok := sagas.ParseCommandID("idem", alice.CommandID()); ok {
		t.Fatalf("%q parses as a saga command id", alice.CommandID())
	}
}

func TestFingerprintCoversMethodPathAndBody(t *testing.T) {
	base := httpapi.Fingerprint("POST", "/todo", []byte(`{"title":"a"}`))
	for _, other := range []string{
		httpapi.Fingerprint("PUT", "/todo", []byte(`{"title":"a"}`)),
		httpapi.Fingerprint("POST", "/todo/x", []byte(`{"title":"a"}`)),
		httpapi.Fingerprint("POST", "/todo", []byte(`{"title":"b"}`)),
		httpapi.Fingerprint("POST", "/tod", []byte(`o{"title":"a"}`)),
	} {
		if other == base {
			t.Fatalf("fingerprint %s repeats for another request", base)
		}
	}
	if httpapi.Fingerprint("POST", "/todo", []byte(`{"title":"a"}`)) != base {
		t.Fatal("fingerprint is not deterministic")
	}
}

func TestInFlightLetsOneRequestPerKeyIn(t *testing.T) {
	var f httpapi.InFlight
	k, _, _ := httpapi.NewIdempotencyKey("", "k")
	var got atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	releases := make(chan func(), 50)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if release, ok := f.Acquire(k); ok {
				got.Add(1)
				releases <- release
			}
		}()
	}
	close(start)
	wg.Wait()
	if got.Load() != 1 {
		t.Fatalf("%d requests acquired the key, want 1", got.Load())
	}
	(<-releases)()
	release, ok := f.Acquire(k)
	if !ok {
		t.Fatal("the key is still held after its release")
	}
	release()
}
