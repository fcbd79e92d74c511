package dynamodb_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/eventstore"
	store "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	migrations "github.com/eventpipe/eventpipe/migrations/dynamodb"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// newTable creates a uniquely named events table with the migration and
// deletes it when tb ends.
func newTable(tb testing.TB) (*ddb.Client, string) {
	tb.Helper()
	client := testenv.DynamoDB(tb)
	name := testenv.UniqueName(tb, "events")
	if err := migrations.CreateEventsTable(context.Background(), client, name); err != nil {
		tb.Fatalf("create table: %v", err)
	}
	tb.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &ddb.DeleteTableInput{TableName: aws.String(name)})
	})
	return client, name
}

// newStore returns a store on a fresh table; mod adjusts the config.
func newStore(tb testing.TB, mod func(*store.Config)) (*store.Store, *ddb.Client, string) {
	tb.Helper()
	client, table := newTable(tb)
	cfg := store.Config{Client: client, Table: table}
	if mod != nil {
		mod(&cfg)
	}
	s, err := store.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return s, client, table
}

// dumpTable renders every item of the table (strongly consistent scan) in
// a canonical, sorted form, so that two dumps are byte-for-byte equal
// exactly when the table holds the same items with the same values.
func dumpTable(tb testing.TB, client *ddb.Client, table string) string {
	tb.Helper()
	var rows []string
	var start map[string]types.AttributeValue
	for {
		out, err := client.Scan(context.Background(), &ddb.ScanInput{
			TableName: aws.String(table), ConsistentRead: aws.Bool(true), ExclusiveStartKey: start,
		})
		if err != nil {
			tb.Fatalf("scan: %v", err)
		}
		for _, it := range out.Items {
			rows = append(rows, canonical(it))
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		start = out.LastEvaluatedKey
	}
	sort.Strings(rows)
	return strings.Join(rows, "\n")
}

// dumpPartition is dumpTable for one aggregate's partition (a Query).
func dumpPartition(tb testing.TB, client *ddb.Client, table string, ref eventstore.Ref) []string {
	tb.Helper()
	out, err := client.Query(context.Background(), &ddb.QueryInput{
		TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: store.PartitionKey(ref)}},
	})
	if err != nil {
		tb.Fatalf("query partition: %v", err)
	}
	rows := make([]string, len(out.Items))
	for i, it := range out.Items {
		rows[i] = canonical(it)
	}
	return rows
}

func canonical(it map[string]types.AttributeValue) string {
	names := make([]string, 0, len(it))
	for n := range it {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s=%s;", n, canonicalValue(it[n]))
	}
	return b.String()
}

func canonicalValue(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		q, _ := json.Marshal(v.Value)
		return "S" + string(q)
	case *types.AttributeValueMemberN:
		return "N" + v.Value
	case *types.AttributeValueMemberL:
		parts := make([]string, len(v.Value))
		for i, e := range v.Value {
			parts[i] = canonicalValue(e)
		}
		return "L[" + strings.Join(parts, ",") + "]"
	case *types.AttributeValueMemberM:
		return "M{" + canonical(v.Value) + "}"
	default:
		return fmt.Sprintf("%T%v", v, v)
	}
}

// appendEvents prepares and appends events of the given types (payload
// {"n": i}) to ref at expected.
func appendEvents(tb testing.TB, s *store.Store, ref eventstore.Ref, expected int64, types ...string) eventstore.AppendResult {
	tb.Helper()
	res, err := s.Append(context.Background(), prepareEvents(tb, s, ref, expected, types...))
	if err != nil {
		tb.Fatalf("append: %v", err)
	}
	return res
}

// prepareEvents prepares the append appendEvents makes.
func prepareEvents(tb testing.TB, s *store.Store, ref eventstore.Ref, expected int64, types ...string) eventstore.AppendRequest {
	tb.Helper()
	var ch eventstore.Change
	for i, t := range types {
		ch.Events = append(ch.Events, eventstore.Event(t, map[string]int{"n": i}))
	}
	req, err := eventstore.Prepare(ref, expected, ch, s.Schema())
	if err != nil {
		tb.Fatalf("prepare: %v", err)
	}
	return req
}

func ctxT(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	tb.Cleanup(cancel)
	return ctx
}
