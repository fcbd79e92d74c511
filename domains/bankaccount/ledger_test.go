package bankaccount_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
	store "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	migrations "github.com/eventpipe/eventpipe/migrations/dynamodb"
)

// newStore is a DynamoDB store on an events table of tb's own, deleted
// when tb ends.
func newStore(tb testing.TB) (*store.Store, *ddb.Client, string) {
	tb.Helper()
	client := testenv.DynamoDB(tb)
	table := testenv.UniqueName(tb, "ledger")
	if err := migrations.CreateEventsTable(context.Background(), client, table); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &ddb.DeleteTableInput{TableName: aws.String(table)})
	})
	s, err := store.New(store.Config{Client: client, Table: table})
	if err != nil {
		tb.Fatal(err)
	}
	return s, client, table
}

func newLedger(t *testing.T) (*eventstore.Facet[bankaccount.Account], *store.Store, *ddb.Client, string) {
	t.Helper()
	s, client, table := newStore(t)
	l, err := bankaccount.NewFacet(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l, s, client, table
}

func partition(t *testing.T, client *ddb.Client, table, id string) []map[string]types.AttributeValue {
	t.Helper()
	out, err := client.Query(context.Background(), &ddb.QueryInput{
		TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "AGGREGATE#" + bankaccount.AggregateType + "#" + id}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Items
}

func render(items []map[string]types.AttributeValue) string {
	b, _ := json.Marshal(items)
	return string(b)
}

func balanceJSON(a bankaccount.Account) string {
	b, _ := json.Marshal(a)
	return string(b)
}

// TestLedgerWalkThroughOfSeed003 reproduces the seed's demonstration and
// its printed results.
func TestLedgerWalkThroughOfSeed003(t *testing.T) {
	ctx := context.Background()
	ledger, s, client, table := newLedger(t)
	id := "476118"
	one := func(e eventstore.NewEvent) eventstore.Change {
		return eventstore.Change{Events: []eventstore.NewEvent{e}}
	}

	if _, err := ledger.Append(ctx, id, one(bankaccount.Opened(id))); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.Append(ctx, id, one(bankaccount.Renamed("John", "Brown"))); err != nil {
		t.Fatal(err)
	}
	// Two transactions in a single append.
	res, err := ledger.Append(ctx, id, eventstore.Change{Events: []eventstore.NewEvent{
		bankaccount.Transacted("Transaction A", 200), bankaccount.Transacted("Transaction B", -300),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Events) != 2 || res.State.Seq != 4 {
		t.Fatalf("two-event append wrote %d events, version %d", len(res.Events), res.State.Seq)
	}
	if len(res.Outbound) != 1 || res.Outbound[0].Name != "accountOverdrawn" || string(res.Outbound[0].Payload) != `{"accountId":"476118"}` {
		t.Fatalf("published %+v, want one accountOverdrawn", res.Outbound)
	}
	t.Logf("Published event: {\"type\":%q,\"event\":%s}", res.Outbound[0].Name, res.Outbound[0].Payload)

	// Another separate transaction, then appendTo against the state just
	// returned, without reading it again.
	resC, err := ledger.Append(ctx, id, one(bankaccount.Transacted("Transaction C", 50)))
	if err != nil {
		t.Fatal(err)
	}
	resD, err := ledger.AppendTo(ctx, resC.State, one(bankaccount.Transacted("Transaction D", 25)))
	if err != nil {
		t.Fatal(err)
	}
	want := bankaccount.Account{ID: id, OwnerFirst: "John", OwnerLast: "Brown", Balance: -25, MinimumBalance: -1000}
	if resD.State.Item != want {
		t.Fatalf("after AppendTo %+v, want %+v", resD.State.Item, want)
	}
	got, err := ledger.Get(ctx, id)
	if err != nil || got.Item != want {
		t.Fatalf("Account details: %+v (%v), want %+v", got.Item, err, want)
	}
	t.Logf("Account details: %s", balanceJSON(got.Item))

	verified, err := ledger.Recalculate(ctx, id, eventstore.Change{})
	if err != nil || verified.State.Item != want || len(verified.Outbound) != 0 {
		t.Fatalf("Verified balance: %+v (%v), outbound %v", verified.State.Item, err, verified.Outbound)
	}
	t.Logf("Verified balance: %s", balanceJSON(verified.State.Item))

	final, err := ledger.Recalculate(ctx, id, one(bankaccount.Transacted("Transaction E", 25)))
	if err != nil {
		t.Fatal(err)
	}
	want.Balance = 0
	if final.State.Item != want || final.State.Seq != 7 {
		t.Fatalf("Final balance: %+v at %d, want %+v at 7", final.State.Item, final.State.Seq, want)
	}
	t.Logf("Final balance: %s", balanceJSON(final.State.Item))

	// The table: 7 events, one OUTBOUND item (from sequence 4), STATE at 7.
	var events, outbound int
	for _, it := range partition(t, client, table, id) {
		sk := it["sk"].(*types.AttributeValueMemberS).Value
		switch {
		case strings.HasPrefix(sk, "EVENT#"):
			events++
		case strings.HasPrefix(sk, "OUTBOUND#"):
			outbound++
			if sk != "OUTBOUND#000000000004#0" {
				t.Errorf("outbound item %s, want OUTBOUND#000000000004#0", sk)
			}
			rec, err := store.OutboundFromItem(it)
			if err != nil || rec.Name != "accountOverdrawn" || string(rec.Payload) != `{"accountId":"476118"}` || rec.EventID != res.Events[1].EventID {
				t.Errorf("outbound record %+v, %v", rec, err)
			}
		case sk == "STATE":
			if seq := it["seq"].(*types.AttributeValueMemberN).Value; seq != "7" {
				t.Errorf("STATE at %s, want 7", seq)
			}
		}
	}
	if events != 7 || outbound != 1 {
		t.Fatalf("%d events and %d outbound items, want 7 and 1", events, outbound)
	}

	// Past the overdraft: rejected, nothing stored.
	before := render(partition(t, client, table, id))
	_, err = ledger.Append(ctx, id, one(bankaccount.Transacted("Transaction F", -1001)))
	var rej *eventstore.RuleRejection
	if !errors.As(err, &rej) || !errors.Is(err, bankaccount.ErrInsufficientFunds) || rej.Reason != "insufficient funds" {
		t.Fatalf("transaction past the overdraft: %v", err)
	}
	if after := render(partition(t, client, table, id)); after != before {
		t.Fatal("a rejected transaction changed the partition")
	}
	if v, _ := s.Version(ctx, eventstore.Ref{Type: bankaccount.AggregateType, ID: id}); v != 7 {
		t.Fatalf("version %d after a rejection, want 7", v)
	}
}

// TestLedgerRedeliveredCommandReturnsOriginalResult: a command applied
// once comes back with its first result, even when the rules would now
// reject it (the balance moved since).
func TestLedgerRedeliveredCommandReturnsOriginalResult(t *testing.T) {
	ctx := context.Background()
	ledger, _, client, table := newLedger(t)
	id := "acc-dup"
	if _, err := ledger.Append(ctx, id, eventstore.Change{Events: []eventstore.NewEvent{bankaccount.Opened(id)}}); err != nil {
		t.Fatal(err)
	}
	withdraw := eventstore.Change{CommandID: "cmd-withdraw-600", Events: []eventstore.NewEvent{bankaccount.Transacted("W", -600)}}
	first, err := ledger.Append(ctx, id, withdraw)
	if err != nil {
		t.Fatal(err)
	}
	before := render(partition(t, client, table, id))
	for i := range 2 {
		again, err := ledger.Append(ctx, id, withdraw) // -1200 would be past the overdraft
		if err != nil {
			t.Fatalf("redelivery %d: %v", i, err)
		}
		if !again.Duplicate || fmt.Sprint(again.Append.EventIDs) != fmt.Sprint(first.Append.EventIDs) || again.State.Item.Balance != -600 {
			t.Fatalf("redelivery %d: %+v", i, again)
		}
	}
	if after := render(partition(t, client, table, id)); after != before {
		t.Fatal("a redelivered command changed the partition")
	}
}

// TestLedgerCommandsCloseAnAccountAndStillTakeRefunds runs the ledger's
// handlers on the real store: a closed account keeps its balance, refuses
// debits and credits (rejected: account closed) and accepts a refund;
// closing an unknown account is not_found, a closed one conflict; a
// refund that is a debit is invalid.
func TestLedgerCommandsCloseAnAccountAndStillTakeRefunds(t *testing.T) {
	ctx := context.Background()
	ledger, s, _, _ := newLedger(t)
	hs, err := bankaccount.Domain().NewHandlers(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := &commands.Registry{}
	if err := reg.Register(hs...); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name, typ, id, payload string
		want                   commands.Status
		reason                 string
		code                   eventstore.Code
		version                int64
	}{
		{"close unknown", bankaccount.CloseAccount, "c1", `{}`, commands.StatusNotFound, "account c1 does not exist", bankaccount.ErrNotFound, 0},
		{"open", bankaccount.OpenAccount, "c1", `{}`, commands.StatusAccepted, "", "", 1},
		{"deposit", bankaccount.RecordTransaction, "c1", `{"desc":"in","amount":500}`, commands.StatusAccepted, "", "", 2},
		{"close", bankaccount.CloseAccount, "c1", `{"reason":"customer left"}`, commands.StatusAccepted, "", "", 3},
		{"close again", bankaccount.CloseAccount, "c1", `{}`, commands.StatusConflict, "account c1 is already closed", bankaccount.ErrAlreadyClosed, 3},
		{"debit closed", bankaccount.RecordTransaction, "c1", `{"desc":"out","amount":-100}`, commands.StatusRejected, "account closed", bankaccount.ErrClosed, 3},
		{"credit closed", bankaccount.RecordTransaction, "c1", `{"desc":"in","amount":100}`, commands.StatusRejected, "account closed", bankaccount.ErrClosed, 3},
		{"refund closed", bankaccount.RecordTransaction, "c1", `{"desc":"refund","amount":70,"refund":true}`, commands.StatusAccepted, "", "", 4},
		{"refund as a debit", bankaccount.RecordTransaction, "c1", `{"desc":"refund","amount":-70,"refund":true}`, commands.StatusInvalid, "invalid amount: is -70, want > 0 for a refund", "", 4},
	}
	for _, st := range steps {
		h, ok := reg.Lookup(st.typ)
		if !ok {
			t.Fatalf("no handler for %s", st.typ)
		}
		res, err := h.Handle(ctx, commands.New(st.typ, bankaccount.AggregateType, st.id, json.RawMessage(st.payload)))
		var invalid *commands.InvalidError
		switch {
		case st.want == commands.StatusInvalid && !errors.As(err, &invalid):
			t.Errorf("%s: %+v, %v; want an InvalidError", st.name, res, err)
		case st.want != commands.StatusInvalid && err != nil:
			t.Errorf("%s: %v", st.name, err)
		case res.Status != st.want || res.Version != st.version || res.Reason != st.reason || res.Code != st.code:
			t.Errorf("%s: %s at version %d (%q, code %q), want %s at %d (%q, code %q)", st.name, res.Status, res.Version, res.Reason, res.Code, st.want, st.version, st.reason, st.code)
		case st.code != "" && !errors.Is(res.Err(), st.code):
			t.Errorf("%s: the answer's Err %v does not match %s", st.name, res.Err(), st.code)
		}
	}
	got, err := ledger.Get(ctx, "c1")
	want := bankaccount.Account{ID: "c1", Balance: 570, MinimumBalance: bankaccount.DefaultMinimumBalance, Closed: true}
	if err != nil || got.Item != want || got.Seq != 4 {
		t.Fatalf("account c1: %+v at %d, %v; want %+v at 4", got.Item, got.Seq, err, want)
	}
}
