package analytics_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/dev/testenv"
	migrations "github.com/eventpipe/eventpipe/migrations/dynamodb"
)

// newStore returns a store on a fresh analytics table, deleted when tb
// ends; mod adjusts the config.
func newStore(tb testing.TB, mod func(*analytics.Config)) (*analytics.Store, *ddb.Client, string) {
	tb.Helper()
	db := testenv.DynamoDB(tb)
	table := testenv.UniqueName(tb, "analytics")
	if err := migrations.CreateAnalyticsTable(context.Background(), db, table); err != nil {
		tb.Fatalf("create table: %v", err)
	}
	tb.Cleanup(func() { testenv.DeleteTable(tb, db, table) })
	cfg := analytics.Config{Client: db, Table: table}
	if mod != nil {
		mod(&cfg)
	}
	s, err := analytics.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return s, db, table
}

// countItems counts every item of the table (strongly consistent Scan).
func countItems(tb testing.TB, db *ddb.Client, table string) int {
	tb.Helper()
	n := 0
	p := ddb.NewScanPaginator(db, &ddb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true), Select: types.SelectCount})
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		if err != nil {
			tb.Fatalf("scan: %v", err)
		}
		n += int(out.Count)
	}
	return n
}

// put writes raw items, as the aggregation consumer will.
func put(tb testing.TB, db *ddb.Client, table string, items ...map[string]types.AttributeValue) {
	tb.Helper()
	for _, it := range items {
		if _, err := db.PutItem(context.Background(), &ddb.PutItemInput{TableName: aws.String(table), Item: it}); err != nil {
			tb.Fatalf("put %v: %v", it["sk"], err)
		}
	}
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// steppingClock returns a clock that starts at start and moves step
// further with every call.
func steppingClock(start time.Time, step time.Duration) func() time.Time {
	calls := make(chan time.Time, 1)
	calls <- start
	return func() time.Time {
		t := <-calls
		calls <- t.Add(step)
		return t
	}
}
