package privacy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	ddbstore "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	migrations "github.com/eventpipe/eventpipe/migrations/dynamodb"
	"github.com/eventpipe/eventpipe/privacy"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// sealRig is an events table of the test's own, a key store and the
// built-in todo and bank account domains' handlers on a store that seals.
type sealRig struct {
	keysRig
	events string
	keys   *privacy.KeyStore
	sealer *privacy.Sealer
	es     *ddbstore.Store
	domain map[string]commands.Domain
}

func newSealRig(t testing.TB) *sealRig {
	t.Helper()
	r := &sealRig{keysRig: newKeysRig(t)}
	r.events = integration.UniqueName(t, "events")
	if err := migrations.CreateEventsTable(context.Background(), r.db, r.events); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { integration.DeleteTable(t, r.db, r.events) })
	r.keys = r.store(t, nil)
	var err error
	r.sealer, err = privacy.NewSealer(privacy.SealerConfig{Keys: r.keys, Personal: map[string]map[string]privacy.Personal{
		todo.AggregateType: todo.Personal, bankaccount.AggregateType: bankaccount.Personal}})
	if err != nil {
		t.Fatal(err)
	}
	r.es = r.eventStore(t, r.sealer)
	r.domain = map[string]commands.Domain{todo.AggregateType: todo.Domain(), bankaccount.AggregateType: bankaccount.Domain()}
	return r
}

func (r *sealRig) eventStore(t testing.TB, sealer eventstore.Sealer) *ddbstore.Store {
	t.Helper()
	s, err := ddbstore.New(ddbstore.Config{Client: r.db, Table: r.events, Sealer: sealer})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// send handles one command on store, its actor verified.
func (r *sealRig) send(t testing.TB, store eventstore.Store, typ, aggType, id, actor string, payload any) (commands.Result, error) {
	t.Helper()
	cmd, err := commands.NewJSON(typ, aggType, id, payload)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Actor, cmd.ActorSource = actor, eventstore.ActorHTTP
	hs, err := r.domain[aggType].NewHandlers(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if h.CommandType() == typ {
			return h.Handle(context.Background(), cmd)
		}
	}
	t.Fatalf("no handler of %s", typ)
	return commands.Result{}, nil
}

func (r *sealRig) accept(t testing.TB, typ, aggType, id, actor string, payload any) {
	t.Helper()
	res, err := r.send(t, r.es, typ, aggType, id, actor, payload)
	if err != nil || res.Status != commands.StatusAccepted {
		t.Fatalf("%s %s/%s: %+v, %v", typ, aggType, id, res, err)
	}
}

// scan returns every item of the events table as its raw attribute
// bytes, joined (what a backup or a stream record holds).
func (r *sealRig) scan(t *testing.T) (raw []byte, items int) {
	t.Helper()
	p := dynamodb.NewScanPaginator(r.db, &dynamodb.ScanInput{TableName: aws.String(r.events), ConsistentRead: aws.Bool(true)})
	var b bytes.Buffer
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			items++
			for name, v := range it {
				fmt.Fprintf(&b, "%s=%s\n", name, attrText(v))
			}
		}
	}
	return b.Bytes(), items
}

func attrText(v ddbtypes.AttributeValue) string {
	switch v := v.(type) {
	case *ddbtypes.AttributeValueMemberS:
		return v.Value
	case *ddbtypes.AttributeValueMemberB:
		return string(v.Value)
	case *ddbtypes.AttributeValueMemberN:
		return v.Value
	case *ddbtypes.AttributeValueMemberM:
		var parts []string
		for k, e := range v.Value {
			parts = append(parts, k+":"+attrText(e))
		}
		return strings.Join(parts, ",")
	case *ddbtypes.AttributeValueMemberL:
		var parts []string
		for _, e := range v.Value {
			parts = append(parts, attrText(e))
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(v)
}

// TestSealingStoreKeepsPersonalDataSealedAtRest, on DynamoDB Local and
// the local KMS, through the built-in domains' command handlers: the
// personal values are in no item of the table (events, STATE,
// snapshots), yet every read of the store gives them in clear; after
// forgetting, reads give the events with the fields forgotten, the STATE
// and snapshot cannot be read, commands are refused with
// privacy.CodeForgotten and nothing is written.
func TestSealingStoreKeepsPersonalDataSealedAtRest(t *testing.T) {
	r := newSealRig(t)
	ctx := context.Background()
	secrets := []string{"Buy milk for Ada", "at the corner shop", "then call Grace", "Lovelace-Ada", "Byron", "rent to Mr Babbage"}
	r.accept(t, todo.CreateTodo, todo.AggregateType, "t1", "u1", todo.TodoData{Title: secrets[0], Message: secrets[1]})
	r.accept(t, todo.UpdateTodo, todo.AggregateType, "t1", "u1", todo.TodoData{Title: secrets[2], Message: secrets[1]})
	r.accept(t, bankaccount.OpenAccount, bankaccount.AggregateType, "a1", "ops", struct{}{})
	// An account without personal data yet has no key: its STATE is clear.
	if st, err := r.es.State(ctx, eventstore.Ref{Type: bankaccount.AggregateType, ID: "a1"}); err != nil || !bytes.HasPrefix(st.Data, []byte("{")) {
		t.Fatalf("STATE of a1 before personal data = %s, %v; want clear JSON", st.Data, err)
	}
	r.accept(t, bankaccount.RenameOwner, bankaccount.AggregateType, "a1", "ops", bankaccount.OwnerRenamedData{OwnerFirst: secrets[3], OwnerLast: secrets[4]})
	r.accept(t, bankaccount.RecordTransaction, bankaccount.AggregateType, "a1", "ops", bankaccount.TransactionAcceptedData{Desc: secrets[5], Amount: 500})
	snap, err := r.domain[bankaccount.AggregateType].NewSnapshot(r.es, nil)
	if err != nil {
		t.Fatal(err)
	}
	if seq, err := snap(ctx, "a1"); err != nil || seq != 3 {
		t.Fatalf("snapshot of a1 = %d, %v; want 3", seq, err)
	}

	raw, items := r.scan(t)
	for _, s := range secrets {
		if bytes.Contains(raw, []byte(s)) {
			t.Errorf("the events table holds %q in clear", s)
		}
	}
	if n := bytes.Count(raw, []byte(privacy.SealedPrefix)); n < 8 {
		t.Errorf("the table holds %d sealed values, want at least 8 (5 events' fields, 2 STATEs, 1 snapshot)", n)
	}
	events, err := r.es.Load(ctx, eventstore.Ref{Type: todo.AggregateType, ID: "t1"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	created, err := todo.TodoCreatedEvent.Decode(events[0])
	if err != nil || created.Title != secrets[0] || created.Message != secrets[1] || created.Owner != "u1" {
		t.Fatalf("Load t1#1 = %+v, %v", created, err)
	}
	facet, err := todo.NewFacet(r.es, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := facet.Get(ctx, "t1"); err != nil || st.Item.Title != secrets[2] {
		t.Fatalf("todo t1 = %+v, %v; want the title %q", st.Item, err, secrets[2])
	}
	acct, err := bankaccount.NewFacet(r.es, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := acct.Load(ctx, "a1"); err != nil || st.Item.OwnerFirst != secrets[3] || st.Item.Balance != 500 {
		t.Fatalf("account a1 from its snapshot = %+v, %v", st.Item, err)
	}
	page, err := r.es.ListByType(ctx, eventstore.TypeQuery{EventType: bankaccount.TransactionAccepted})
	if err != nil || len(page.Events) != 1 || !bytes.Contains(page.Events[0].Payload, []byte(secrets[5])) {
		t.Fatalf("ListByType = %+v, %v; want the description in clear", page, err)
	}

	// Forget the todo's owner: the todo's data is gone, the account's stays.
	if _, err := r.keys.Forget(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	events, err = r.es.Load(ctx, eventstore.Ref{Type: todo.AggregateType, ID: "t1"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		d, err := todo.TodoUpdatedEvent.Decode(eventstore.Envelope{EventType: todo.TodoUpdated, Payload: e.Payload})
		if err != nil || d.Title != privacy.ForgottenText || d.Message != privacy.ForgottenText {
			t.Fatalf("after forgetting, %s = %+v, %v; want its fields %q", e, d, err, privacy.ForgottenText)
		}
	}
	if _, err := facet.Get(ctx, "t1"); !errors.Is(err, privacy.ErrForgotten) {
		t.Fatalf("STATE of a forgotten todo: %v, want privacy.ErrForgotten", err)
	}
	_, before := r.scan(t)
	for _, typ := range []string{todo.UpdateTodo, todo.DeleteTodo} {
		var payload any = struct{}{}
		if typ == todo.UpdateTodo {
			payload = todo.TodoData{Title: "new title"}
		}
		res, err := r.send(t, r.es, typ, todo.AggregateType, "t1", "u1", payload)
		if err != nil || res.Status != commands.StatusRejected || res.Code != privacy.CodeForgotten {
			t.Fatalf("%s on a forgotten todo = %+v, %v; want rejected, code %s", typ, res, err, privacy.CodeForgotten)
		}
	}
	if _, after := r.scan(t); after != before {
		t.Fatalf("the refused commands wrote: %d items, then %d", before, after)
	}
	if st, err := acct.Load(ctx, "a1"); err != nil || st.Item.OwnerLast != secrets[4] {
		t.Fatalf("account a1 after forgetting another subject = %+v, %v", st.Item, err)
	}
	// The account is its own subject.
	if _, err := r.keys.Forget(ctx, "a1"); err != nil {
		t.Fatal(err)
	}
	if _, err := snap(ctx, "a1"); !errors.Is(err, privacy.ErrForgotten) {
		t.Fatalf("snapshot of a forgotten account: %v, want privacy.ErrForgotten", err)
	}
	res, err := r.send(t, r.es, bankaccount.RecordTransaction, bankaccount.AggregateType, "a1", "ops", bankaccount.TransactionAcceptedData{Desc: "again", Amount: 1})
	if err != nil || res.Code != privacy.CodeForgotten {
		t.Fatalf("a transaction on a forgotten account = %+v, %v", res, err)
	}
	if items == 0 {
		t.Fatal("scanned nothing")
	}
}

// TestSealingStoreRefusesTamperingAndReadsWhatWasStoredBefore: events
// appended before sealing began read as they were; a sealed value moved
// to another event does not open (a permanent decode error).
func TestSealingStoreRefusesTamperingAndReadsWhatWasStoredBefore(t *testing.T) {
	r := newSealRig(t)
	ctx := context.Background()
	clear := r.eventStore(t, nil)
	if res, err := r.send(t, clear, todo.CreateTodo, todo.AggregateType, "old", "u9", todo.TodoData{Title: "stored in clear"}); err != nil || res.Status != commands.StatusAccepted {
		t.Fatalf("%+v, %v", res, err)
	}
	st, err := r.es.State(ctx, eventstore.Ref{Type: todo.AggregateType, ID: "old"})
	if err != nil || !bytes.Contains(st.Data, []byte("stored in clear")) {
		t.Fatalf("STATE stored before sealing = %s, %v", st.Data, err)
	}
	// Its next append seals: the key is made for the aggregate itself
	// (an update names no owner, so the todo is its own subject).
	r.accept(t, todo.UpdateTodo, todo.AggregateType, "old", "u9", todo.TodoData{Title: "sealed from now on"})
	if raw, _ := r.scan(t); bytes.Contains(raw, []byte("sealed from now on")) {
		t.Fatal("the update of a todo stored before sealing is in clear")
	}
	if scopes, err := r.keys.Scopes(ctx, "old"); err != nil || len(scopes) != 1 || scopes[0] != "todo/old" {
		t.Fatalf("scopes of the todo stored before sealing = %v, %v; want it its own subject", scopes, err)
	}
	if st, err := r.es.State(ctx, eventstore.Ref{Type: todo.AggregateType, ID: "old"}); err != nil || !bytes.Contains(st.Data, []byte("sealed from now on")) {
		t.Fatalf("STATE after the sealed update = %s, %v", st.Data, err)
	}
	r.accept(t, todo.CreateTodo, todo.AggregateType, "t2", "u2", todo.TodoData{Title: "first"})
	r.accept(t, todo.CreateTodo, todo.AggregateType, "t3", "u2", todo.TodoData{Title: "second"})
	item := func(id string) map[string]ddbtypes.AttributeValue {
		out, err := r.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(r.events), ConsistentRead: aws.Bool(true),
			Key: map[string]ddbtypes.AttributeValue{ddbstore.AttrPK: &ddbtypes.AttributeValueMemberS{Value: ddbstore.PartitionKey(eventstore.Ref{Type: todo.AggregateType, ID: id})},
				ddbstore.AttrSK: &ddbtypes.AttributeValueMemberS{Value: ddbstore.EventSK(1)}}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	// A process on another keys table does not take the data for
	// forgotten: it is a KeyError of "find", retried.
	other := integration.UniqueName(t, "keys")
	if err := migrations.CreateSubjectKeysTable(ctx, r.db, other); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { integration.DeleteTable(t, r.db, other) })
	wrong, err := privacy.NewSealer(privacy.SealerConfig{Keys: r.store(t, func(c *privacy.KeyStoreConfig) { c.Table = other }),
		Personal: map[string]map[string]privacy.Personal{todo.AggregateType: todo.Personal}})
	if err != nil {
		t.Fatal(err)
	}
	var ke *privacy.KeyError
	if _, err := r.eventStore(t, wrong).Load(ctx, eventstore.Ref{Type: todo.AggregateType, ID: "t2"}, 0); !errors.As(err, &ke) || ke.Op != "find" || errors.Is(err, privacy.ErrForgotten) || eventstore.IsPermanent(err) {
		t.Fatalf("Load with another keys table: %v, want a *KeyError of find, not permanent", err)
	}
	// Move t2's sealed payload into t3's first event.
	moved := item("t3")
	moved[ddbstore.AttrPayload] = item("t2")[ddbstore.AttrPayload]
	if _, err := r.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(r.events), Item: moved}); err != nil {
		t.Fatal(err)
	}
	_, err = r.es.Load(ctx, eventstore.Ref{Type: todo.AggregateType, ID: "t3"}, 0)
	if !errors.Is(err, eventstore.ErrMalformed) || !eventstore.IsPermanent(err) {
		t.Fatalf("Load of a moved sealed value: %v, want a permanent eventstore.ErrMalformed", err)
	}
}

// TestSealingStoreWritesNothingWhenTheKMSKeyFails, through the todo
// command handlers on a sealing store: with a KMS key that does not
// exist, a CreateTodo fails with a *privacy.KeyError (not an answer: the
// dispatcher retries it) and the table is unchanged; with the key
// disabled (revoked) after a todo was made, a process without the key in
// its cache can neither read the todo's STATE nor update it, and writes
// nothing; enabled again, the update goes through.
func TestSealingStoreWritesNothingWhenTheKMSKeyFails(t *testing.T) {
	r := newSealRig(t)
	ctx := context.Background()
	var ke *privacy.KeyError
	withKey := func(mod func(*privacy.KeyStoreConfig)) *ddbstore.Store {
		s, err := privacy.NewSealer(privacy.SealerConfig{Keys: r.store(t, mod), Personal: map[string]map[string]privacy.Personal{todo.AggregateType: todo.Personal}})
		if err != nil {
			t.Fatal(err)
		}
		return r.eventStore(t, s)
	}
	missing := withKey(func(c *privacy.KeyStoreConfig) { c.KeyID = "alias/eventpipe-no-such-key" })
	_, before := r.scan(t)
	if res, err := r.send(t, missing, todo.CreateTodo, todo.AggregateType, "k1", "u1", todo.TodoData{Title: "never stored"}); !errors.As(err, &ke) || ke.Op != "generate" || eventstore.IsPermanent(err) {
		t.Fatalf("create with a missing KMS key: %+v, %v; want a *KeyError of generate, retried", res, err)
	}
	if raw, after := r.scan(t); after != before || bytes.Contains(raw, []byte("never stored")) {
		t.Fatalf("a failed create wrote: %d items, then %d", before, after)
	}

	r.accept(t, todo.CreateTodo, todo.AggregateType, "k2", "u2", todo.TodoData{Title: "stored sealed"})
	if _, err := r.kms.DisableKey(ctx, &kms.DisableKeyInput{KeyId: aws.String(r.keyID)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = r.kms.EnableKey(context.Background(), &kms.EnableKeyInput{KeyId: aws.String(r.keyID)}) })
	other := withKey(nil) // another process: nothing cached
	_, before = r.scan(t)
	if _, err := other.State(ctx, eventstore.Ref{Type: todo.AggregateType, ID: "k2"}); !errors.As(err, &ke) || ke.Op != "decrypt" {
		t.Fatalf("STATE under a disabled KMS key: %v, want a *KeyError of decrypt", err)
	}
	if res, err := r.send(t, other, todo.UpdateTodo, todo.AggregateType, "k2", "u2", todo.TodoData{Title: "not now"}); !errors.As(err, &ke) || eventstore.IsPermanent(err) {
		t.Fatalf("update under a disabled KMS key: %+v, %v; want a *KeyError, retried", res, err)
	}
	if _, after := r.scan(t); after != before {
		t.Fatalf("a failed update wrote: %d items, then %d", before, after)
	}
	if _, err := r.kms.EnableKey(ctx, &kms.EnableKeyInput{KeyId: aws.String(r.keyID)}); err != nil {
		t.Fatal(err)
	}
	if res, err := r.send(t, withKey(nil), todo.UpdateTodo, todo.AggregateType, "k2", "u2", todo.TodoData{Title: "now"}); err != nil || res.Status != commands.StatusAccepted {
		t.Fatalf("update with the key enabled again: %+v, %v", res, err)
	}
}
