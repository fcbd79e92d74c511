package dynamodb_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/dev/testenv"
	migrate "github.com/eventpipe/eventpipe/migrations/dynamodb"
)

// TestCreateAnalyticsTableIsIdempotentWithStreamTTLAndUserIndex runs the
// migration twice on a fresh name and checks the table it leaves.
func TestCreateAnalyticsTableIsIdempotentWithStreamTTLAndUserIndex(t *testing.T) {
	ctx := context.Background()
	db := testenv.DynamoDB(t)
	name := testenv.UniqueName(t, "analytics")
	t.Cleanup(func() { testenv.DeleteTable(t, db, name) })
	for i := range 2 {
		if err := migrate.CreateAnalyticsTable(ctx, db, name); err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
	}
	want := "status ACTIVE; billing PAY_PER_REQUEST; keys pk HASH, sk RANGE; " +
		"index gsi1 gsi1pk HASH, gsi1sk RANGE projecting ALL; stream true NEW_IMAGE; ttl ENABLED on ttl"
	if got := tableShape(t, db, name); got != want {
		t.Errorf("table is\n  %s\nwant\n  %s", got, want)
	}
}

// TestCreateAnalyticsTableCompletesATableWithoutStreamOrTTL adopts a
// table of the right keys that lacks its stream and TTL.
func TestCreateAnalyticsTableCompletesATableWithoutStreamOrTTL(t *testing.T) {
	ctx := context.Background()
	db := testenv.DynamoDB(t)
	name := testenv.UniqueName(t, "analytics")
	t.Cleanup(func() { testenv.DeleteTable(t, db, name) })
	def := migrate.AnalyticsTable(name)
	def.StreamSpecification = nil
	if _, err := db.CreateTable(ctx, def); err != nil {
		t.Fatal(err)
	}
	if err := migrate.CreateAnalyticsTable(ctx, db, name); err != nil {
		t.Fatal(err)
	}
	if got := tableShape(t, db, name); !strings.HasSuffix(got, "stream true NEW_IMAGE; ttl ENABLED on ttl") {
		t.Errorf("table is %s, want its stream and TTL enabled", got)
	}
}

// TestCreateAnalyticsTableRefusesAnotherShapeAndLeavesItUnchanged offers
// the migration tables it must not adopt and checks that each is refused
// with the reason and is exactly as it was.
func TestCreateAnalyticsTableRefusesAnotherShapeAndLeavesItUnchanged(t *testing.T) {
	ctx := context.Background()
	db := testenv.DynamoDB(t)
	cases := []struct {
		name   string
		modify func(*ddb.CreateTableInput)
		ttlOn  string
		reason string
	}{
		{"key id", func(d *ddb.CreateTableInput) {
			d.AttributeDefinitions = []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}}
			d.KeySchema = []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}}
			d.GlobalSecondaryIndexes, d.StreamSpecification = nil, nil
		}, "", "key schema"},
		{"no user index", func(d *ddb.CreateTableInput) {
			d.AttributeDefinitions = d.AttributeDefinitions[:2]
			d.GlobalSecondaryIndexes, d.StreamSpecification = nil, nil
		}, "", "index gsi1 is missing"},
		{"index without a range key", func(d *ddb.CreateTableInput) {
			d.AttributeDefinitions = d.AttributeDefinitions[:3]
			d.GlobalSecondaryIndexes[0].KeySchema = d.GlobalSecondaryIndexes[0].KeySchema[:1]
			d.StreamSpecification = nil
		}, "", "index gsi1"},
		{"index projecting keys only", func(d *ddb.CreateTableInput) {
			d.GlobalSecondaryIndexes[0].Projection.ProjectionType = types.ProjectionTypeKeysOnly
			d.StreamSpecification = nil
		}, "", "does not project ALL"},
		{"keys-only stream", func(d *ddb.CreateTableInput) {
			d.StreamSpecification.StreamViewType = types.StreamViewTypeKeysOnly
		}, "", "view type KEYS_ONLY"},
		{"TTL on another attribute", func(d *ddb.CreateTableInput) {
			d.StreamSpecification = nil
		}, "expiresAt", `TTL is on attribute "expiresAt"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := testenv.UniqueName(t, "other")
			t.Cleanup(func() { testenv.DeleteTable(t, db, name) })
			def := migrate.AnalyticsTable(name)
			c.modify(def)
			if _, err := db.CreateTable(ctx, def); err != nil {
				t.Fatal(err)
			}
			if c.ttlOn != "" {
				if _, err := db.UpdateTimeToLive(ctx, &ddb.UpdateTimeToLiveInput{
					TableName:               aws.String(name),
					TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(c.ttlOn), Enabled: aws.Bool(true)},
				}); err != nil {
					t.Fatal(err)
				}
			}
			before := tableShape(t, db, name)
			err := migrate.CreateAnalyticsTable(ctx, db, name)
			if err == nil || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("CreateAnalyticsTable = %v, want an error saying %q", err, c.reason)
			}
			if after := tableShape(t, db, name); after != before {
				t.Errorf("refused table changed:\n  before %s\n  after  %s", before, after)
			}
		})
	}
}

// tableShape renders what the analytics migration decides on: status,
// billing, keys, indexes, stream and TTL.
func tableShape(t *testing.T, db *ddb.Client, name string) string {
	t.Helper()
	ctx := context.Background()
	out, err := db.DescribeTable(ctx, &ddb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	d := out.Table
	keys := func(ks []types.KeySchemaElement) string {
		var parts []string
		for _, k := range ks {
			parts = append(parts, aws.ToString(k.AttributeName)+" "+string(k.KeyType))
		}
		return strings.Join(parts, ", ")
	}
	parts := []string{"status " + string(d.TableStatus)}
	if d.BillingModeSummary != nil {
		parts = append(parts, "billing "+string(d.BillingModeSummary.BillingMode))
	}
	parts = append(parts, "keys "+keys(d.KeySchema))
	for _, g := range d.GlobalSecondaryIndexes {
		parts = append(parts, fmt.Sprintf("index %s %s projecting %s", aws.ToString(g.IndexName), keys(g.KeySchema), g.Projection.ProjectionType))
	}
	if s := d.StreamSpecification; s != nil {
		parts = append(parts, fmt.Sprintf("stream %t %s", aws.ToBool(s.StreamEnabled), s.StreamViewType))
	}
	ttl, err := db.DescribeTimeToLive(ctx, &ddb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	if td := ttl.TimeToLiveDescription; td != nil {
		parts = append(parts, fmt.Sprintf("ttl %s on %s", td.TimeToLiveStatus, aws.ToString(td.AttributeName)))
	}
	return strings.Join(parts, "; ")
}
