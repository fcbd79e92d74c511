package privacy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/eventpipe/eventpipe/eventstore"
	migrations "github.com/eventpipe/eventpipe/migrations/dynamodb"
	"github.com/eventpipe/eventpipe/privacy"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// keysRig is a keys table of the test's own on DynamoDB Local and a KMS
// key of its own on the stack's local KMS.
type keysRig struct {
	db    *dynamodb.Client
	kms   *kms.Client
	table string
	keyID string // the test's KMS key's ARN
}

func newKeysRig(t testing.TB) keysRig {
	t.Helper()
	ctx := context.Background()
	db := integration.DynamoDB(t)
	table := integration.UniqueName(t, "keys")
	if err := migrations.CreateSubjectKeysTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { integration.DeleteTable(t, db, table) })
	k := integration.KMS(t)
	key, err := k.CreateKey(ctx, &kms.CreateKeyInput{Description: aws.String(t.Name())})
	if err != nil {
		t.Fatalf("create a KMS key: %v", err)
	}
	return keysRig{db: db, kms: k, table: table, keyID: aws.ToString(key.KeyMetadata.Arn)}
}

func (r keysRig) store(t testing.TB, mod func(*privacy.KeyStoreConfig)) *privacy.KeyStore {
	t.Helper()
	cfg := privacy.KeyStoreConfig{DB: r.db, Table: r.table, KMS: privacy.AWSKMS{Client: r.kms}, KeyID: r.keyID}
	if mod != nil {
		mod(&cfg)
	}
	ks, err := privacy.NewKeyStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

// keyItem reads the key item of scope.
func (r keysRig) keyItem(t *testing.T, scope string) map[string]ddbtypes.AttributeValue {
	t.Helper()
	out, err := r.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(r.table), ConsistentRead: aws.Bool(true),
		Key: map[string]ddbtypes.AttributeValue{
			privacy.AttrPK: &ddbtypes.AttributeValueMemberS{Value: "key#" + scope},
			privacy.AttrSK: &ddbtypes.AttributeValueMemberS{Value: "key"},
		}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// TestKeyStoreSealsAcrossProcessesAndForgets, on DynamoDB Local and the
// local KMS: a value sealed by one store opens in another (the key
// unwrapped by the KMS); the table holds the key only wrapped; after
// Forget no store opens or seals for the subject, the other subject is
// untouched, and a store that had the key cached loses it within its
// CacheTTL.
func TestKeyStoreSealsAcrossProcessesAndForgets(t *testing.T) {
	ctx := context.Background()
	rig := newKeysRig(t)
	a := rig.store(t, nil)
	b := rig.store(t, func(c *privacy.KeyStoreConfig) { c.CacheTTL = 200 * time.Millisecond })
	binding := []byte("todo/t1/event/TodoCreated/1/title")
	seal := func(ks *privacy.KeyStore, scope, subject, value string) string {
		k, err := ks.KeyForSealing(ctx, scope, subject)
		if err != nil {
			t.Fatal(err)
		}
		s, err := privacy.Seal(k, binding, []byte(value))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	alice, carol := seal(a, "todo/t1", "alice", "Alice Liddell"), seal(a, "todo/t2", "carol", "Carol Danvers")
	alice2 := seal(b, "todo/t3", "alice", "Alice again")
	if got, err := privacy.Open(ctx, b, binding, alice); err != nil || string(got) != "Alice Liddell" {
		t.Fatalf("another store opens: %q, %v", got, err)
	}
	item := rig.keyItem(t, "todo/t1")
	wrapped, _ := item[privacy.AttrWrapped].(*ddbtypes.AttributeValueMemberB)
	if wrapped == nil || len(wrapped.Value) < 32 {
		t.Fatalf("item %v: want the key wrapped", item)
	}
	if arn, _ := item[privacy.AttrKMSKey].(*ddbtypes.AttributeValueMemberS); arn == nil || arn.Value != rig.keyID {
		t.Fatalf("item's kms_key %v, want %s", item[privacy.AttrKMSKey], rig.keyID)
	}

	f, err := a.Forget(ctx, "alice")
	if err != nil || f.Scopes != 2 || f.Erased != 2 {
		t.Fatalf("forget: %+v, %v; want alice's 2 scopes erased", f, err)
	}
	for _, scope := range []string{"todo/t1", "todo/t3"} {
		if item := rig.keyItem(t, scope); item[privacy.AttrWrapped] != nil || item[privacy.AttrForgottenAt] == nil {
			t.Fatalf("after forget the key of %s is %v, want a tombstone without the wrapped key", scope, item)
		}
	}
	if again, err := a.Forget(ctx, "alice"); err != nil || again.Erased != 0 || !again.At.Equal(f.At) {
		t.Fatalf("forget again: %+v, %v; want nothing erased and the first time %v", again, err, f.At)
	}
	fresh := rig.store(t, nil)
	for name, ks := range map[string]*privacy.KeyStore{"the forgetting store": a, "a fresh store": fresh} {
		for _, v := range []string{alice, alice2} {
			if _, err := privacy.Open(ctx, ks, binding, v); !errors.Is(err, privacy.ErrForgotten) {
				t.Errorf("%s opens a forgotten value: %v, want ErrForgotten", name, err)
			}
		}
		if _, err := ks.KeyForSealing(ctx, "todo/t4", "alice"); !errors.Is(err, privacy.ErrForgotten) {
			t.Errorf("%s makes a key for a forgotten subject: %v, want ErrForgotten", name, err)
		}
		if _, err := ks.KeyForSealing(ctx, "todo/t1", ""); !errors.Is(err, privacy.ErrForgotten) {
			t.Errorf("%s seals into a forgotten scope: %v, want ErrForgotten", name, err)
		}
	}
	if got, err := privacy.Open(ctx, fresh, binding, carol); err != nil || string(got) != "Carol Danvers" {
		t.Fatalf("the other subject after forgetting alice: %q, %v", got, err)
	}
	// b cached alice's key before the forgetting: it opens until its
	// CacheTTL passes, then never again.
	integration.Await(t, "the other store to drop the forgotten key", func() error {
		if _, err := privacy.Open(ctx, b, binding, alice); !errors.Is(err, privacy.ErrForgotten) {
			return fmt.Errorf("still opens (%v)", err)
		}
		return nil
	})
}

// TestKeyStoreFirstKeyRace: many goroutines of several stores (as many
// processes) ask for the first key of the same subjects at once; each
// subject ends with one key, which opens what every one of them sealed.
func TestKeyStoreFirstKeyRace(t *testing.T) {
	ctx := context.Background()
	rig := newKeysRig(t)
	stores := []*privacy.KeyStore{rig.store(t, nil), rig.store(t, nil), rig.store(t, nil), rig.store(t, nil)}
	const subjects, perStore = 8, 4
	type sealed struct{ subject, value, sealed string }
	var (
		mu  sync.Mutex
		all []sealed
		wg  sync.WaitGroup
	)
	start := make(chan struct{})
	for si, ks := range stores {
		for g := range perStore {
			wg.Go(func() {
				<-start
				for s := range subjects {
					subject := fmt.Sprintf("race-%d", s)
					k, err := ks.KeyForSealing(ctx, "scope/"+subject, subject)
					if err != nil {
						t.Error(err)
						return
					}
					value := fmt.Sprintf("value of %s from store %d goroutine %d", subject, si, g)
					v, err := privacy.Seal(k, []byte("race"), []byte(value))
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					all = append(all, sealed{subject, value, v})
					mu.Unlock()
				}
			})
		}
	}
	close(start)
	wg.Wait()
	check := rig.store(t, nil)
	for _, s := range all {
		got, err := privacy.Open(ctx, check, []byte("race"), s.sealed)
		if err != nil || !bytes.Equal(got, []byte(s.value)) {
			t.Fatalf("%s: a value sealed during the race opens as %q, %v: two keys were made", s.subject, got, err)
		}
	}
	t.Logf("%d values sealed by %d stores × %d goroutines for %d subjects, all open with the one stored key each", len(all), len(stores), perStore, subjects)
}

// TestKeyStoreKMSFailuresWriteNothing: a KMS key that does not exist, or
// is disabled, is a *KeyError and writes no item; a disabled key also
// fails to unwrap an existing subject's key, which opens again once the
// key is enabled; a wrapped key moved to another subject's item does not
// unwrap (the encryption context names the subject).
func TestKeyStoreKMSFailuresWriteNothing(t *testing.T) {
	ctx := context.Background()
	rig := newKeysRig(t)
	var ke *privacy.KeyError

	missing := rig.store(t, func(c *privacy.KeyStoreConfig) { c.KeyID = "alias/eventpipe-no-such-key" })
	if _, err := missing.KeyForSealing(ctx, "s/dora", "dora"); !errors.As(err, &ke) || ke.Op != "generate" {
		t.Fatalf("a missing KMS key: %v, want a *KeyError of generate", err)
	}
	if item := rig.keyItem(t, "s/dora"); item != nil {
		t.Fatalf("a failed generate wrote %v", item)
	}

	ks := rig.store(t, nil)
	k, err := ks.KeyForSealing(ctx, "s/erin", "erin")
	if err != nil {
		t.Fatal(err)
	}
	sealed, _ := privacy.Seal(k, nil, []byte("Erin"))
	if _, err := rig.kms.DisableKey(ctx, &kms.DisableKeyInput{KeyId: aws.String(rig.keyID)}); err != nil {
		t.Fatal(err)
	}
	if _, err := rig.store(t, nil).KeyForSealing(ctx, "s/fred", "fred"); !errors.As(err, &ke) {
		t.Fatalf("a disabled KMS key: %v, want a *KeyError", err)
	}
	if item := rig.keyItem(t, "s/fred"); item != nil {
		t.Fatalf("a generate under a disabled key wrote %v", item)
	}
	if _, err := privacy.Open(ctx, rig.store(t, nil), nil, sealed); !errors.As(err, &ke) || ke.Op != "decrypt" {
		t.Fatalf("unwrap under a disabled key: %v, want a *KeyError of decrypt", err)
	}
	if _, err := rig.kms.EnableKey(ctx, &kms.EnableKeyInput{KeyId: aws.String(rig.keyID)}); err != nil {
		t.Fatal(err)
	}
	if got, err := privacy.Open(ctx, rig.store(t, nil), nil, sealed); err != nil || string(got) != "Erin" {
		t.Fatalf("after enabling the key again: %q, %v", got, err)
	}

	// erin's wrapped key in another scope's item.
	item := rig.keyItem(t, "s/erin")
	item[privacy.AttrPK] = &ddbtypes.AttributeValueMemberS{Value: "key#s/gina"}
	if _, err := rig.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(rig.table), Item: item}); err != nil {
		t.Fatal(err)
	}
	if _, err := rig.store(t, nil).KeyForOpening(ctx, "s/gina"); !errors.As(err, &ke) {
		t.Fatalf("another scope's wrapped key: %v, want a *KeyError", err)
	}
}

// TestSealPayloadSealsOnlyThePersonalFields: the declared fields are
// sealed (nested ones too), the subject's id and the other fields stay
// in clear, and OpenPayload gives the payload back; a later event of the
// aggregate without the subject's field seals with the key made for the
// first; sealed under one event, a payload does not open under another.
func TestSealPayloadSealsOnlyThePersonalFields(t *testing.T) {
	ctx := context.Background()
	keys := newKeysRig(t).store(t, nil)
	created := privacy.Personal{Subject: "/owner", Fields: []string{"/title", "/contact/email", "/absent"}}
	updated := privacy.Personal{Subject: "/owner", Fields: []string{"/title"}}
	b := privacy.Binding{AggregateType: "todo", AggregateID: "t1", Item: "event/TodoCreated/1"}
	in := []byte(`{"owner":"alice","title":"Call Dr Who","done":false,"contact":{"email":"alice@example.org","n":3}}`)
	sealed, err := privacy.SealPayload(ctx, keys, created, b, in)
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
	opened, forgotten, err := privacy.OpenPayload(ctx, keys, created, b, sealed)
	if err != nil || forgotten || !sameJSON(t, opened, in) {
		t.Fatalf("open: %s, %v, forgotten %v; want %s", opened, err, forgotten, in)
	}
	later := privacy.Binding{AggregateType: "todo", AggregateID: "t1", Item: "event/TodoUpdated/2"}
	upd, err := privacy.SealPayload(ctx, keys, updated, later, []byte(`{"title":"Call Dr No"}`))
	if err != nil {
		t.Fatalf("a later event without the owner: %v", err)
	}
	if opened, _, err := privacy.OpenPayload(ctx, keys, updated, later, upd); err != nil || string(opened) != `{"title":"Call Dr No"}` {
		t.Fatalf("open the later event: %s, %v", opened, err)
	}
	if _, _, err := privacy.OpenPayload(ctx, keys, created, later, sealed); !errors.Is(err, eventstore.ErrMalformed) {
		t.Fatalf("open under another event: %v, want a DecodeError", err)
	}
	other := privacy.Binding{AggregateType: "todo", AggregateID: "t9", Item: "event/TodoUpdated/2"}
	var ve *eventstore.ValidationError
	if _, err := privacy.SealPayload(ctx, keys, updated, other, []byte(`{"title":"x"}`)); !errors.As(err, &ve) {
		t.Fatalf("the first personal event of an aggregate without its subject: %v, want a ValidationError", err)
	}
}

// TestOpenPayloadOfAForgottenSubject: after Forget, the subject's fields
// read as ForgottenText in every scope, another subject's still open,
// and sealing for the forgotten subject is refused.
func TestOpenPayloadOfAForgottenSubject(t *testing.T) {
	ctx := context.Background()
	keys := newKeysRig(t).store(t, nil)
	p := privacy.Personal{SubjectIsAggregate: true, Fields: []string{"/holder"}}
	bind := func(id string, seq int) privacy.Binding {
		return privacy.Binding{AggregateType: "bankaccount", AggregateID: id, Item: fmt.Sprintf("event/AccountOpened/%d", seq)}
	}
	seal := func(id, holder string) []byte {
		b, err := privacy.SealPayload(ctx, keys, p, bind(id, 1), []byte(`{"holder":"`+holder+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, c := seal("acc-a", "Ada"), seal("acc-c", "Cy")
	if f, err := keys.Forget(ctx, "acc-a"); err != nil || f.Erased != 1 {
		t.Fatalf("forget: %+v, %v", f, err)
	}
	opened, forgotten, err := privacy.OpenPayload(ctx, keys, p, bind("acc-a", 1), a)
	if err != nil || !forgotten || string(opened) != `{"holder":"[forgotten]"}` {
		t.Fatalf("open forgotten: %s, %v, %v", opened, forgotten, err)
	}
	opened, forgotten, err = privacy.OpenPayload(ctx, keys, p, bind("acc-c", 1), c)
	if err != nil || forgotten || string(opened) != `{"holder":"Cy"}` {
		t.Fatalf("open the other: %s, %v, %v", opened, forgotten, err)
	}
	if _, err := privacy.SealPayload(ctx, keys, p, bind("acc-a", 2), []byte(`{"holder":"Ada again"}`)); !errors.Is(err, privacy.ErrForgotten) {
		t.Fatalf("seal for a forgotten subject: %v, want ErrForgotten", err)
	}
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// TestOrAggregateMakesAnOwnerlessAggregateItsOwnSubject: a TodoCreated
// without an owner is sealed for the todo itself, and forgetting the
// todo's id forgets it.
func TestOrAggregateMakesAnOwnerlessAggregateItsOwnSubject(t *testing.T) {
	ctx := context.Background()
	keys := newKeysRig(t).store(t, nil)
	p := privacy.Personal{Subject: "/owner", OrAggregate: true, Fields: []string{"/title"}}
	b := privacy.Binding{AggregateType: "todo", AggregateID: "t5", Item: "event/TodoCreated/1"}
	sealed, err := privacy.SealPayload(ctx, keys, p, b, []byte(`{"owner":"","title":"anonymous"}`))
	if err != nil {
		t.Fatal(err)
	}
	if scopes, err := keys.Scopes(ctx, "t5"); err != nil || len(scopes) != 1 || scopes[0] != "todo/t5" {
		t.Fatalf("scopes of t5: %v, %v; want [todo/t5]", scopes, err)
	}
	if _, err := keys.Forget(ctx, "t5"); err != nil {
		t.Fatal(err)
	}
	if opened, forgotten, err := privacy.OpenPayload(ctx, keys, p, b, sealed); err != nil || !forgotten || !strings.Contains(string(opened), privacy.ForgottenText) {
		t.Fatalf("after forgetting t5: %s, %v, %v", opened, forgotten, err)
	}
}
