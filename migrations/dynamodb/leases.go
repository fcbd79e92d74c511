package dynamodb

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/relay"
)

// LeasesTable is the definition of the relay's lease table: one item per
// stream shard, keyed by the stream ARN (hash) and the shard id (range),
// on-demand billing, no stream.
func LeasesTable(name string) *ddb.CreateTableInput {
	s := types.ScalarAttributeTypeS
	return &ddb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(relay.AttrStreamARN), AttributeType: s},
			{AttributeName: aws.String(relay.AttrShardID), AttributeType: s},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(relay.AttrStreamARN), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(relay.AttrShardID), KeyType: types.KeyTypeRange},
		},
	}
}

// CreateLeasesTable makes sure the lease table `name` exists as
// LeasesTable defines it and is ACTIVE. An existing table with other keys
// is an error, never changed. Running it again is a no-op.
func CreateLeasesTable(ctx context.Context, client API, name string) error {
	return ensureKeyedTable(ctx, client, LeasesTable(name), "lease table")
}
