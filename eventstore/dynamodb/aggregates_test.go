package dynamodb_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/eventstore"
	store "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// unindex removes the by-type index keys from ref's #METADATA item, as
// an aggregate last appended to before the keys existed lacks them.
func unindex(tb testing.TB, client *ddb.Client, table string, ref eventstore.Ref) {
	tb.Helper()
	_, err := client.UpdateItem(context.Background(), &ddb.UpdateItemInput{
		TableName: aws.String(table),
		Key: map[string]types.AttributeValue{
			store.AttrPK: &types.AttributeValueMemberS{Value: store.PartitionKey(ref)},
			store.AttrSK: &types.AttributeValueMemberS{Value: store.SKMetadata},
		},
		UpdateExpression: aws.String("REMOVE gsi1pk, gsi1sk"),
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// listAll pages through ListAggregates of typ, two ids a page.
func listAll(ctx context.Context, s *store.Store, typ string) ([]string, error) {
	var ids []string
	for q := (eventstore.AggregateQuery{Type: typ, Limit: 2}); ; {
		page, err := s.ListAggregates(ctx, q)
		if err != nil {
			return nil, err
		}
		ids = append(ids, page.IDs...)
		if !page.More || len(page.IDs) == 0 {
			return ids, nil
		}
		q.After = page.IDs[len(page.IDs)-1]
	}
}

// TestIndexAggregatesListsAggregatesWrittenBeforeTheIndexKeys strips the
// index keys from two of five accounts: the listing misses them and the
// table is not recorded as indexed; IndexAggregates gives exactly those
// two their keys and records the run; the listing then has all five, in
// id order, and none of the other type's. An append to an aggregate
// without keys writes them too.
func TestIndexAggregatesListsAggregatesWrittenBeforeTheIndexKeys(t *testing.T) {
	ctx := ctxT(t)
	s, client, table := newStore(t, nil)
	for _, id := range []string{"e", "b", "d", "a", "c"} {
		appendEvents(t, s, eventstore.Ref{Type: "account", ID: id}, 0, "Opened")
	}
	appendEvents(t, s, eventstore.Ref{Type: "order", ID: "o1"}, 0, "Placed")
	unindex(t, client, table, eventstore.Ref{Type: "account", ID: "b"})
	unindex(t, client, table, eventstore.Ref{Type: "account", ID: "d"})
	if done, _, err := s.AggregatesIndexed(ctx); err != nil || done {
		t.Fatalf("AggregatesIndexed on a fresh table: %v, %v; want false", done, err)
	}
	integration.Await(t, "the listing without b and d", func() error {
		ids, err := listAll(ctx, s, "account")
		if err == nil && fmt.Sprint(ids) != "[a c e]" {
			err = fmt.Errorf("listed %v", ids)
		}
		return err
	})

	res, err := s.IndexAggregates(ctx, nil)
	if err != nil || res.Indexed != 2 || res.Scanned < 6 {
		t.Fatalf("IndexAggregates: %+v, %v; want 2 indexed of at least 6 items scanned", res, err)
	}
	if done, at, err := s.AggregatesIndexed(ctx); err != nil || !done || at.IsZero() {
		t.Fatalf("AggregatesIndexed after the run: %v %v, %v; want true", done, at, err)
	}
	integration.Await(t, "the listing of all five", func() error {
		ids, err := listAll(ctx, s, "account")
		if err == nil && fmt.Sprint(ids) != "[a b c d e]" {
			err = fmt.Errorf("listed %v", ids)
		}
		return err
	})
	if again, err := s.IndexAggregates(ctx, nil); err != nil || again.Indexed != 0 {
		t.Fatalf("a second IndexAggregates: %+v, %v; want nothing to index", again, err)
	}

	unindex(t, client, table, eventstore.Ref{Type: "account", ID: "c"})
	appendEvents(t, s, eventstore.Ref{Type: "account", ID: "c"}, 1, "Deposited")
	integration.Await(t, "c listed after its append", func() error {
		ids, err := listAll(ctx, s, "account")
		if err == nil && fmt.Sprint(ids) != "[a b c d e]" {
			err = fmt.Errorf("listed %v", ids)
		}
		return err
	})
}
