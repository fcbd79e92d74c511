package testenv_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/endpoints"
)

// TestDynamoDBStreamCarriesAWrittenItem proves DynamoDB Local is real: a
// table with a NEW_IMAGE stream, one item written, and the same item read
// back from the stream through DescribeStream, GetShardIterator and
// GetRecords.
func TestDynamoDBStreamCarriesAWrittenItem(t *testing.T) {
	ctx := context.Background()
	db := testenv.DynamoDB(t)
	streams := testenv.DynamoDBStreams(t)
	table := testenv.UniqueName(t, "probe")
	out, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		StreamSpecification: &ddbtypes.StreamSpecification{
			StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewImage,
		},
	})
	if err != nil {
		t.Fatalf("create table: %v", err)
	}
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	want := "hello-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(table),
		Item: map[string]ddbtypes.AttributeValue{
			"pk":   &ddbtypes.AttributeValueMemberS{Value: "item-1"},
			"body": &ddbtypes.AttributeValueMemberS{Value: want},
		},
	}); err != nil {
		t.Fatalf("put item: %v", err)
	}
	desc, err := streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: out.TableDescription.LatestStreamArn})
	if err != nil {
		t.Fatalf("describe stream: %v", err)
	}
	var got []string
	for _, shard := range desc.StreamDescription.Shards {
		it, err := streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
			StreamArn: out.TableDescription.LatestStreamArn, ShardId: shard.ShardId,
			ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			t.Fatalf("shard iterator: %v", err)
		}
		recs, err := streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil {
			t.Fatalf("get records: %v", err)
		}
		for _, r := range recs.Records {
			if body, ok := r.Dynamodb.NewImage["body"].(*streamtypes.AttributeValueMemberS); ok {
				got = append(got, body.Value)
			}
		}
	}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("stream records carried %q, want exactly [%q]", got, want)
	}
}

// TestPostgresRoundTrip writes a row in a transaction and reads it back.
func TestPostgresRoundTrip(t *testing.T) {
	ctx := context.Background()
	pool := testenv.Postgres(t)
	table := strings.ReplaceAll(testenv.UniqueName(t, "probe"), "-", "_")
	if _, err := pool.Exec(ctx, "CREATE TABLE "+table+" (id int PRIMARY KEY, body text NOT NULL)"); err != nil {
		t.Fatalf("create table: %v", err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP TABLE "+table) })
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1, $1)", "round trip"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var body, version string
	if err := pool.QueryRow(ctx, "SELECT body, current_setting('server_version') FROM "+table+" WHERE id = 1").Scan(&body, &version); err != nil {
		t.Fatal(err)
	}
	if body != "round trip" {
		t.Fatalf("read back %q", body)
	}
	t.Logf("PostgreSQL %s", version)
}

// failRecorder stands in for a test so that a helper's Fatalf can be
// observed instead of ending the real test.
type failRecorder struct {
	testing.TB
	mu      sync.Mutex
	failed  bool
	skipped bool
	msg     string
}

func (f *failRecorder) Helper() {}
func (f *failRecorder) Skip(args ...any) {
	f.mu.Lock()
	f.skipped = true
	f.msg = fmt.Sprint(args...)
	f.mu.Unlock()
	runtime.Goexit()
}
func (f *failRecorder) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.failed = true
	f.msg = format
	if len(args) > 0 {
		f.msg = strings.Join(strings.Fields(fmt.Sprintf(format, args...)), " ")
	}
	f.mu.Unlock()
	runtime.Goexit()
}

// TestHelpersFailLoudlyWhenAServiceIsDown points each helper at a closed
// port and checks that it fails the test (never skips) with a message
// naming the service and how to start it; under -short (the unit tier)
// it checks that the helper skips instead, as an integration test.
func TestHelpersFailLoudlyWhenAServiceIsDown(t *testing.T) {
	closed := strconv.Itoa(testenv.FreePort(t))
	cases := []struct {
		name, env, value string
		call             func(testing.TB)
	}{
		{"DynamoDB", endpoints.EnvDynamoDB, "http://127.0.0.1:" + closed, func(tb testing.TB) { testenv.DynamoDB(tb) }},
		{"Kafka", endpoints.EnvKafkaBrokers, "127.0.0.1:" + closed, func(tb testing.TB) { testenv.KafkaBrokers(tb) }},
		{"Postgres", endpoints.EnvPostgres, "postgres://eventpipe@127.0.0.1:" + closed + "/eventpipe?sslmode=disable&connect_timeout=2", func(tb testing.TB) { testenv.Postgres(tb) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			rec := &failRecorder{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				tc.call(rec)
			}()
			<-done
			if testing.Short() {
				if !rec.skipped || rec.failed || !strings.Contains(rec.msg, "integration test") {
					t.Fatalf("%s helper under -short: skipped %v, failed %v (%q); want it skipped as an integration test", tc.name, rec.skipped, rec.failed, rec.msg)
				}
				return
			}
			if !rec.failed {
				t.Fatalf("%s helper returned normally against a closed port", tc.name)
			}
			for _, want := range []string{tc.name, "not reachable", "stack", tc.env} {
				if !strings.Contains(rec.msg, want) {
					t.Errorf("failure message %q does not mention %q", rec.msg, want)
				}
			}
		})
	}
}
