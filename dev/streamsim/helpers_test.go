package streamsim

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/eventpipe/eventpipe/testkit/integration"
)

// fakeClock is a Config.Clock that moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func start(t *testing.T, cfg Config) *Sim {
	t.Helper()
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// ctxT is the context of a test's calls: one that only a hang outlives
// (integration.HangAfter), cancelled when the test ends.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	t.Cleanup(cancel)
	return ctx
}

// keyRec is a record of item pk=key with attribute n=i.
func keyRec(key string, i int) Record {
	return Record{NewImage: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: key},
		"n":  &types.AttributeValueMemberN{Value: strconv.Itoa(i)},
	}}
}

func mustPut(t *testing.T, s *Sim, key string, rec Record) Stored {
	t.Helper()
	st, err := s.Put(key, rec)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func iter(t *testing.T, ctx context.Context, c *dynamodbstreams.Client, s *Sim, shard string, typ types.ShardIteratorType, seq string) *string {
	t.Helper()
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(s.StreamARN()), ShardId: aws.String(shard), ShardIteratorType: typ}
	if seq != "" {
		in.SequenceNumber = aws.String(seq)
	}
	out, err := c.GetShardIterator(ctx, in)
	if err != nil {
		t.Fatalf("GetShardIterator %s %s: %v", typ, seq, err)
	}
	return out.ShardIterator
}

// readAll reads from it until an empty batch of an open shard or the end
// of a closed one; closed reports which.
func readAll(t *testing.T, ctx context.Context, c *dynamodbstreams.Client, it *string, limit int32) (recs []types.Record, closed bool) {
	t.Helper()
	for {
		out, err := c.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(limit)})
		if err != nil {
			t.Fatalf("GetRecords: %v", err)
		}
		recs = append(recs, out.Records...)
		if out.NextShardIterator == nil {
			return recs, true
		}
		if len(out.Records) == 0 {
			return recs, false
		}
		it = out.NextShardIterator
	}
}

func seqs(recs []types.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = aws.ToString(r.Dynamodb.SequenceNumber)
	}
	return out
}

func storedSeqs(recs []Stored) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.SequenceNumber()
	}
	return out
}

func wantErr[E error](t *testing.T, err error) E {
	t.Helper()
	var e E
	if !errors.As(err, &e) {
		t.Fatalf("err = %T %v, want %T", err, err, e)
	}
	return e
}

func describeAll(t *testing.T, ctx context.Context, c *dynamodbstreams.Client, s *Sim, limit int32) (shards []types.Shard, pages int) {
	t.Helper()
	var start *string
	for {
		out, err := c.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(s.StreamARN()), Limit: aws.Int32(limit), ExclusiveStartShardId: start})
		if err != nil {
			t.Fatalf("DescribeStream: %v", err)
		}
		pages++
		shards = append(shards, out.StreamDescription.Shards...)
		if start = out.StreamDescription.LastEvaluatedShardId; start == nil {
			return shards, pages
		}
	}
}
