// Package dynamodb defines eventpipe's DynamoDB tables and creates them
// idempotently. `eventpipe migrate` calls these functions; tests call them
// to make their own uniquely named tables.
package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	store "github.com/eventpipe/eventpipe/eventstore/dynamodb"
)

// API is the part of *dynamodb.Client the migrations use.
type API interface {
	CreateTable(ctx context.Context, in *ddb.CreateTableInput, optFns ...func(*ddb.Options)) (*ddb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *ddb.DescribeTableInput, optFns ...func(*ddb.Options)) (*ddb.DescribeTableOutput, error)
	UpdateTable(ctx context.Context, in *ddb.UpdateTableInput, optFns ...func(*ddb.Options)) (*ddb.UpdateTableOutput, error)
	DescribeTimeToLive(ctx context.Context, in *ddb.DescribeTimeToLiveInput, optFns ...func(*ddb.Options)) (*ddb.DescribeTimeToLiveOutput, error)
	UpdateTimeToLive(ctx context.Context, in *ddb.UpdateTimeToLiveInput, optFns ...func(*ddb.Options)) (*ddb.UpdateTimeToLiveOutput, error)
}

// ActiveTimeout bounds how long CreateEventsTable waits for the table
// to become ACTIVE.
const ActiveTimeout = 5 * time.Minute

// EventsTable is the definition of the event store table (see
// eventstore/dynamodb for the items): keys pk/sk (S), GSI1 gsi1pk/gsi1sk
// projecting ALL, a NEW_IMAGE stream for the relay, on-demand billing.
func EventsTable(name string) *ddb.CreateTableInput {
	s := types.ScalarAttributeTypeS
	return &ddb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(store.AttrPK), AttributeType: s},
			{AttributeName: aws.String(store.AttrSK), AttributeType: s},
			{AttributeName: aws.String(store.AttrGSI1PK), AttributeType: s},
			{AttributeName: aws.String(store.AttrGSI1SK), AttributeType: s},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(store.AttrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(store.AttrSK), KeyType: types.KeyTypeRange},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(store.IndexByType),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(store.AttrGSI1PK), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(store.AttrGSI1SK), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}},
		StreamSpecification: &types.StreamSpecification{
			StreamEnabled:  aws.Bool(true),
			StreamViewType: types.StreamViewTypeNewImage,
		},
	}
}

// CreateEventsTable makes sure the events table `name` exists as
// EventsTable defines it: it creates the table when missing (a concurrent
// creator is fine), waits until it is ACTIVE, enables its stream if an
// existing table has none, and enables TTL on attribute `ttl`. An
// existing table whose keys or GSI1 differ is an error, never changed.
// Running it again is a no-op.
func CreateEventsTable(ctx context.Context, client API, name string) error {
	return ensureTable(ctx, client, EventsTable(name), store.AttrTTL)
}

func describe(ctx context.Context, client API, name string) (*types.TableDescription, error) {
	out, err := client.DescribeTable(ctx, &ddb.DescribeTableInput{TableName: aws.String(name)})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("describe table: %w", err)
	}
	return out.Table, nil
}

// waitActive polls until the table and all its indexes are ACTIVE.
func waitActive(ctx context.Context, client API, name string) (*types.TableDescription, error) {
	ctx, cancel := context.WithTimeout(ctx, ActiveTimeout)
	defer cancel()
	for delay := 50 * time.Millisecond; ; delay = min(delay*2, 2*time.Second) {
		desc, err := describe(ctx, client, name)
		if err != nil {
			return nil, err
		}
		if desc != nil && desc.TableStatus == types.TableStatusActive && indexesActive(desc) {
			return desc, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for table ACTIVE: %w", ctx.Err())
		case <-time.After(delay):
		}
	}
}

func indexesActive(d *types.TableDescription) bool {
	for _, g := range d.GlobalSecondaryIndexes {
		if g.IndexStatus != "" && g.IndexStatus != types.IndexStatusActive {
			return false
		}
	}
	return true
}

func sameKeys(got []types.KeySchemaElement, want map[string]types.KeyType) error {
	if len(got) != len(want) {
		return fmt.Errorf("has %d key attributes, want %d", len(got), len(want))
	}
	for _, k := range got {
		if want[aws.ToString(k.AttributeName)] != k.KeyType {
			return fmt.Errorf("key %s %s is not in the definition", aws.ToString(k.AttributeName), k.KeyType)
		}
	}
	return nil
}

func enableTTL(ctx context.Context, client API, name, attr string) error {
	out, err := client.DescribeTimeToLive(ctx, &ddb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	if err != nil {
		return fmt.Errorf("migrate %s: describe TTL: %w", name, err)
	}
	if d := out.TimeToLiveDescription; d != nil {
		switch d.TimeToLiveStatus {
		case types.TimeToLiveStatusEnabled, types.TimeToLiveStatusEnabling:
			if aws.ToString(d.AttributeName) != attr {
				return fmt.Errorf("migrate %s: TTL is on attribute %q, want %q", name, aws.ToString(d.AttributeName), attr)
			}
			return nil
		}
	}
	if _, err := client.UpdateTimeToLive(ctx, &ddb.UpdateTimeToLiveInput{
		TableName:               aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(attr), Enabled: aws.Bool(true)},
	}); err != nil {
		return fmt.Errorf("migrate %s: enable TTL on %s: %w", name, attr, err)
	}
	return nil
}
