package dynamodb_test

import (
	"context"
	"sort"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/eventstore"
	store "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	"github.com/eventpipe/eventpipe/eventstore/storetest"
)

// TestContract runs the store contract suite against DynamoDB Local,
// each subtest on a fresh table.
func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, schema eventstore.Schema) storetest.Subject {
		s, client, table := newStore(t, func(c *store.Config) { c.Schema = schema })
		return storetest.Subject{Store: s, Outbound: func(ctx context.Context, ref eventstore.Ref) ([]eventstore.OutboundRecord, error) {
			return readOutbound(ctx, client, table, ref)
		}}
	})
}

// readOutbound returns the OUTBOUND items of ref's partition, decoded and
// in (Seq, Index) order.
func readOutbound(ctx context.Context, client *ddb.Client, table string, ref eventstore.Ref) ([]eventstore.OutboundRecord, error) {
	var out []eventstore.OutboundRecord
	p := ddb.NewQueryPaginator(client, &ddb.QueryInput{
		TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :prefix)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk":     &types.AttributeValueMemberS{Value: store.PartitionKey(ref)},
			":prefix": &types.AttributeValueMemberS{Value: store.SKOutboundPrefix},
		},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			o, err := store.OutboundFromItem(it)
			if err != nil {
				return nil, err
			}
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Seq != out[j].Seq {
			return out[i].Seq < out[j].Seq
		}
		return out[i].Index < out[j].Index
	})
	return out, nil
}
