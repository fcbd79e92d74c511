package privacy

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe/eventstore"
)

func memKeyStore(t *testing.T) *KeyStore {
	t.Helper()
	ks, err := NewKeyStore(KeyStoreConfig{DB: &memTable{}, KMS: &memKMS{}})
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

// TestSealPayloadSealsOnlyThePersonalFields: the declared fields are
// sealed (nested ones too), the subject's id and the other fields stay
// in clear, and OpenPayload gives the payload back; sealed under one
// event, a payload does not open under another.
func TestSealPayloadSealsOnlyThePersonalFields(t *testing.T) {
	ctx := context.Background()
	keys := memKeyStore(t)
	p := Personal{Subject: "/owner", Fields: []string{"/title", "/contact/email", "/absent"}}
	b := Binding{AggregateType: "todo", AggregateID: "t1", Item: "event/TodoCreated/1"}
	in := []byte(`{"owner":"alice","title":"Call Dr Who","done":false,"contact":{"email":"alice@example.org","n":3}}`)
	sealed, err := SealPayload(ctx, keys, p, b, in)
	if err != nil {
		t.Fatal(err)
	}
	for _, clear := range []string{"Call Dr Who", "alice@example.org"} {
		if strings.Contains(string(sealed), clear) {
			t.Fatalf("sealed payload %s holds %q in clear", sealed, clear)
		}
	}
	if !strings.Contains(string(sealed), `"owner":"alice"`) || !strings.Contains(string(sealed), `"n":3`) {
		t.Fatalf("sealed payload %s: the subject and other fields must stay as they were", sealed)
	}
	opened, forgotten, err := OpenPayload(ctx, keys, p, b, sealed)
	if err != nil || forgotten {
		t.Fatalf("open: %v, forgotten %v", err, forgotten)
	}
	var got, want any
	_ = json.Unmarshal(opened, &got)
	_ = json.Unmarshal(in, &want)
	if gb, _ := json.Marshal(got); string(gb) != func() string { b, _ := json.Marshal(want); return string(b) }() {
		t.Fatalf("opened %s, want %s", opened, in)
	}
	other := b
	other.Item = "event/TodoCreated/2"
	if _, _, err := OpenPayload(ctx, keys, p, other, sealed); !errors.Is(err, eventstore.ErrMalformed) {
		t.Fatalf("open under another event: %v, want a DecodeError", err)
	}
}

// TestOpenPayloadOfAForgottenSubject: after Forget, the subject's fields
// read as ForgottenText, another subject's still open, and sealing for
// the forgotten subject is refused.
func TestOpenPayloadOfAForgottenSubject(t *testing.T) {
	ctx := context.Background()
	keys := memKeyStore(t)
	p := Personal{SubjectIsAggregate: true, Fields: []string{"/holder"}}
	seal := func(id, holder string) []byte {
		b, err := SealPayload(ctx, keys, p, Binding{AggregateType: "bankaccount", AggregateID: id, Item: "event/AccountOpened/1"}, []byte(`{"holder":"`+holder+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, c := seal("acc-a", "Ada"), seal("acc-c", "Cy")
	if f, err := keys.Forget(ctx, "acc-a"); err != nil || !f.HadKey {
		t.Fatalf("forget: %+v, %v", f, err)
	}
	opened, forgotten, err := OpenPayload(ctx, keys, p, Binding{AggregateType: "bankaccount", AggregateID: "acc-a", Item: "event/AccountOpened/1"}, a)
	if err != nil || !forgotten || string(opened) != `{"holder":"[forgotten]"}` {
		t.Fatalf("open forgotten: %s, %v, %v", opened, forgotten, err)
	}
	opened, forgotten, err = OpenPayload(ctx, keys, p, Binding{AggregateType: "bankaccount", AggregateID: "acc-c", Item: "event/AccountOpened/1"}, c)
	if err != nil || forgotten || string(opened) != `{"holder":"Cy"}` {
		t.Fatalf("open the other: %s, %v, %v", opened, forgotten, err)
	}
	_, err = SealPayload(ctx, keys, p, Binding{AggregateType: "bankaccount", AggregateID: "acc-a", Item: "event/Deposited/2"}, []byte(`{"holder":"Ada again"}`))
	if !errors.Is(err, ErrForgotten) {
		t.Fatalf("seal for a forgotten subject: %v, want ErrForgotten", err)
	}
	if again, err := keys.Forget(ctx, "acc-a"); err != nil || again.HadKey || again.At.IsZero() {
		t.Fatalf("forget again: %+v, %v; want a no-op reporting the first time", again, err)
	}
}

func TestPersonalDeclarationsAndPayloadsRefused(t *testing.T) {
	for name, p := range map[string]Personal{
		"no subject":           {Fields: []string{"/a"}},
		"two subjects":         {Subject: "/o", SubjectIsAggregate: true, Fields: []string{"/a"}},
		"no field":             {Subject: "/o"},
		"not a pointer":        {Subject: "/o", Fields: []string{"a"}},
		"subject is personal":  {Subject: "/o", Fields: []string{"/o"}},
		"field twice":          {Subject: "/o", Fields: []string{"/a", "/a"}},
		"empty reference part": {Subject: "/o", Fields: []string{"/a//b"}},
	} {
		var ve *eventstore.ValidationError
		if err := p.Validate(); !errors.As(err, &ve) {
			t.Errorf("%s: Validate = %v, want a ValidationError", name, err)
		}
	}
	ctx := context.Background()
	keys := memKeyStore(t)
	p := Personal{Subject: "/owner", Fields: []string{"/title"}}
	b := Binding{AggregateType: "todo", AggregateID: "t1", Item: "event/TodoCreated/1"}
	for name, payload := range map[string]string{
		"no subject id":    `{"title":"x"}`,
		"numeric subject":  `{"owner":7,"title":"x"}`,
		"non-string field": `{"owner":"alice","title":{"a":1}}`,
		"not an object":    `["owner"]`,
		"trailing garbage": `{"owner":"alice"} {}`,
	} {
		if _, err := SealPayload(ctx, keys, p, b, []byte(payload)); !eventstore.IsPermanent(err) {
			t.Errorf("%s: SealPayload = %v, want a permanent error", name, err)
		}
	}
	if _, _, err := OpenPayload(ctx, keys, p, b, []byte(`{"owner":"alice","title":"in clear"}`)); !errors.Is(err, eventstore.ErrMalformed) {
		t.Errorf("open a personal field in clear: %v, want a DecodeError", err)
	}
}
