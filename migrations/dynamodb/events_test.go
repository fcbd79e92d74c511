package dynamodb_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/dev/testenv"
	migrations "github.com/eventpipe/eventpipe/migrations/dynamodb"
)

// TestCreateEventsTableIsIdempotentAndEnablesStreamAndTTL runs the
// migration twice on a fresh table and checks the table it leaves.
func TestCreateEventsTableIsIdempotentAndEnablesStreamAndTTL(t *testing.T) {
	ctx := context.Background()
	db := testenv.DynamoDB(t)
	name := testenv.UniqueName(t, "events")
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &ddb.DeleteTableInput{TableName: aws.String(name)})
	})
	for i := range 2 {
		if err := migrations.CreateEventsTable(ctx, db, name); err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
	}
	out, err := db.DescribeTable(ctx, &ddb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	d := out.Table
	if d.TableStatus != types.TableStatusActive {
		t.Errorf("status %s, want ACTIVE", d.TableStatus)
	}
	if s := d.StreamSpecification; s == nil || !aws.ToBool(s.StreamEnabled) || s.StreamViewType != types.StreamViewTypeNewImage {
		t.Errorf("stream %+v, want NEW_IMAGE enabled", s)
	}
	if len(d.GlobalSecondaryIndexes) != 1 || aws.ToString(d.GlobalSecondaryIndexes[0].IndexName) != "gsi1" {
		t.Errorf("indexes %+v, want gsi1", d.GlobalSecondaryIndexes)
	}
	if d.BillingModeSummary == nil || d.BillingModeSummary.BillingMode != types.BillingModePayPerRequest {
		t.Errorf("billing %+v, want PAY_PER_REQUEST", d.BillingModeSummary)
	}
	ttl, err := db.DescribeTimeToLive(ctx, &ddb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	if d := ttl.TimeToLiveDescription; d == nil || d.TimeToLiveStatus != types.TimeToLiveStatusEnabled || aws.ToString(d.AttributeName) != "ttl" {
		t.Errorf("TTL %+v, want ENABLED on ttl", d)
	}
}

// TestCreateEventsTableRefusesATableOfAnotherShape leaves a foreign table
// alone and says why.
func TestCreateEventsTableRefusesATableOfAnotherShape(t *testing.T) {
	ctx := context.Background()
	db := testenv.DynamoDB(t)
	name := testenv.UniqueName(t, "other")
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &ddb.DeleteTableInput{TableName: aws.String(name)})
	})
	if _, err := db.CreateTable(ctx, &ddb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := migrations.CreateEventsTable(ctx, db, name); err == nil {
		t.Fatal("migration accepted a table with key id")
	}
}
