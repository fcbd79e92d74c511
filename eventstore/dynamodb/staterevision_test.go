package dynamodb_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/eventstore"
	store "github.com/eventpipe/eventpipe/eventstore/dynamodb"
)

// TestAStateWrittenBeforeRevisionsIsReadWithoutOneAndFencedByTheFirstRewrite
// removes the revision from a STATE item, as items written before stores
// kept revisions have none: State reads it with Revision "", an append
// with IfState "" goes through on it, and once a STATE-only rewrite has
// given it a revision an append decided on the old item (IfState "")
// fails with StateRewritten and writes nothing.
func TestAStateWrittenBeforeRevisionsIsReadWithoutOneAndFencedByTheFirstRewrite(t *testing.T) {
	ctx := ctxT(t)
	s, client, table := newStore(t, nil)
	ref := eventstore.Ref{Type: "account", ID: "legacy"}
	req := prepareEvents(t, s, ref, 0, "Opened")
	req.State = json.RawMessage(`{"balance":0}`)
	if _, err := s.Append(ctx, req); err != nil {
		t.Fatal(err)
	}
	dropRevision := func() {
		t.Helper()
		_, err := client.UpdateItem(ctx, &ddb.UpdateItemInput{
			TableName: aws.String(table),
			Key: map[string]types.AttributeValue{
				store.AttrPK: &types.AttributeValueMemberS{Value: store.PartitionKey(ref)},
				store.AttrSK: &types.AttributeValueMemberS{Value: store.SKState},
			},
			UpdateExpression:         aws.String("REMOVE #rev"),
			ExpressionAttributeNames: map[string]string{"#rev": store.AttrStateRevision},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	dropRevision()
	st, err := s.State(ctx, ref)
	if err != nil || st.Revision != "" {
		t.Fatalf("State of an item without revision: %+v, %v; want Revision \"\"", st, err)
	}
	next := prepareEvents(t, s, ref, 1, "Deposited")
	next.State, next.IfState = json.RawMessage(`{"balance":5}`), &eventstore.StateCondition{}
	if _, err := s.Append(ctx, next); err != nil {
		t.Fatalf("append on an item without revision, IfState \"\": %v", err)
	}

	dropRevision()
	if _, err := s.Append(ctx, eventstore.AppendRequest{Aggregate: ref, ExpectedVersion: 2, State: json.RawMessage(`{"balance":5,"fixed":1}`)}); err != nil {
		t.Fatalf("STATE-only rewrite: %v", err)
	}
	before := dumpPartition(t, client, table, ref)
	late := prepareEvents(t, s, ref, 2, "Deposited")
	late.State, late.IfState = json.RawMessage(`{"balance":10}`), &eventstore.StateCondition{}
	_, err = s.Append(ctx, late)
	if ce := asConflictErr(err); ce == nil || !ce.StateRewritten || ce.Actual != 2 {
		t.Fatalf("append decided on the item before the rewrite: %v; want *ConcurrencyError with StateRewritten", err)
	}
	if after := dumpPartition(t, client, table, ref); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("the refused append wrote:\n%v\n%v", before, after)
	}
}

func asConflictErr(err error) *eventstore.ConcurrencyError {
	var ce *eventstore.ConcurrencyError
	if errors.As(err, &ce) {
		return ce
	}
	return nil
}
