package dynamodb

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/analytics"
)

// AnalyticsTable is the definition of the analytics table (package
// analytics describes its items): keys pk/sk (S), GSI1 gsi1pk/gsi1sk
// projecting ALL (a user's sessions), a NEW_IMAGE stream for the
// aggregation consumer, on-demand billing. CreateAnalyticsTable also
// enables TTL on `ttl`.
func AnalyticsTable(name string) *ddb.CreateTableInput {
	s := types.ScalarAttributeTypeS
	key := func(hash, rng string) []types.KeySchemaElement {
		return []types.KeySchemaElement{
			{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(rng), KeyType: types.KeyTypeRange},
		}
	}
	return &ddb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(analytics.AttrPK), AttributeType: s},
			{AttributeName: aws.String(analytics.AttrSK), AttributeType: s},
			{AttributeName: aws.String(analytics.AttrGSI1PK), AttributeType: s},
			{AttributeName: aws.String(analytics.AttrGSI1SK), AttributeType: s},
		},
		KeySchema: key(analytics.AttrPK, analytics.AttrSK),
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName:  aws.String(analytics.IndexByUser),
			KeySchema:  key(analytics.AttrGSI1PK, analytics.AttrGSI1SK),
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}},
		StreamSpecification: &types.StreamSpecification{
			StreamEnabled:  aws.Bool(true),
			StreamViewType: types.StreamViewTypeNewImage,
		},
	}
}

// CreateAnalyticsTable makes sure the analytics table `name` exists as
// AnalyticsTable defines it: it creates the table when missing (a
// concurrent creator is fine) and waits until it is ACTIVE, enables TTL
// on `ttl`, and enables the stream if an existing table has none. An
// existing table whose keys, GSI1 or stream view type differ, or whose
// TTL is on another attribute, is an error and is left unchanged. Running
// it again is a no-op.
func CreateAnalyticsTable(ctx context.Context, client API, name string) error {
	return ensureTable(ctx, client, AnalyticsTable(name), analytics.AttrTTL)
}
