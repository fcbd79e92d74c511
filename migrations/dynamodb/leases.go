package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

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
	desc, err := describe(ctx, client, name)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", name, err)
	}
	if desc == nil {
		_, err := client.CreateTable(ctx, LeasesTable(name))
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) {
			return fmt.Errorf("migrate %s: create table: %w", name, err)
		}
		slog.Default().InfoContext(ctx, "created lease table", "table", name)
	}
	if desc, err = waitActive(ctx, client, name); err != nil {
		return fmt.Errorf("migrate %s: %w", name, err)
	}
	want := map[string]types.KeyType{relay.AttrStreamARN: types.KeyTypeHash, relay.AttrShardID: types.KeyTypeRange}
	if err := sameKeys(desc.KeySchema, want); err != nil {
		return fmt.Errorf("migrate %s: existing table differs from the lease table definition: key schema: %w", name, err)
	}
	return nil
}
