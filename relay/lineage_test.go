package relay_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	st "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/relay"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

func TestReadableWaitsForUnfinishedParents(t *testing.T) {
	cases := []struct {
		name   string
		leases []relay.Lease
		want   []string
	}{
		{"no parents", []relay.Lease{{ShardID: "a"}, {ShardID: "b"}}, []string{"a", "b"}},
		{"parent open", []relay.Lease{{ShardID: "p"}, {ShardID: "c", ParentShardID: "p"}}, []string{"p"}},
		{"parent finished", []relay.Lease{{ShardID: "p", Finished: true}, {ShardID: "c", ParentShardID: "p"}}, []string{"c"}},
		{"parent trimmed away", []relay.Lease{{ShardID: "c", ParentShardID: "gone"}}, []string{"c"}},
		{"grandchild waits for child", []relay.Lease{
			{ShardID: "p", Finished: true}, {ShardID: "c", ParentShardID: "p"}, {ShardID: "g", ParentShardID: "c"},
		}, []string{"c"}},
		{"split: two children", []relay.Lease{
			{ShardID: "p", Finished: true}, {ShardID: "c2", ParentShardID: "p"}, {ShardID: "c1", ParentShardID: "p"},
		}, []string{"c1", "c2"}},
		{"all finished", []relay.Lease{{ShardID: "p", Finished: true}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := relay.Readable(c.leases); !slices.Equal(got, c.want) {
				t.Fatalf("Readable = %v, want %v", got, c.want)
			}
		})
	}
}

// TestChildShardIsReadOnlyAfterItsParent serves real stream records of
// one aggregate split over a closed parent shard and its open child
// (DynamoDB Local never splits a shard, so the split is served from
// memory; the lease table is real). The relay publishes the whole parent,
// marks it finished, and only then reads the child: the aggregate's
// sequences are published strictly in order. A shard whose parent was
// trimmed away is read at once.
func TestChildShardIsReadOnlyAfterItsParent(t *testing.T) {
	e := newEnv(t)
	ref := eventstore.Ref{Type: "tick", ID: "x"}
	for v := int64(0); v < 60; v += 10 {
		e.appendTicks(t, ref, v, 10)
	}
	e.appendTicks(t, eventstore.Ref{Type: "tick", ID: "orphan"}, 0, 3)
	records := realRecords(t, e, 6*11+4) // per append: its events and the #METADATA item
	var x, orphan []st.Record
	for _, r := range records {
		if pk := r.Dynamodb.Keys["pk"].(*st.AttributeValueMemberS).Value; pk == "AGGREGATE#tick#orphan" {
			orphan = append(orphan, r)
		} else {
			x = append(x, r)
		}
	}
	half := len(x) / 2
	fake := &fakeStreams{arn: "arn:fake:stream/" + e.ep.EventsTable, shards: []*fakeShard{
		{id: "shard-child", parent: "shard-parent", records: x[half:]},
		{id: "shard-parent", records: x[:half], closed: true},
		{id: "shard-orphan", parent: "shard-trimmed-long-ago", records: orphan},
	}}
	pub := &recordingPublisher{}
	cfg := relay.Config{
		Streams: fake, DynamoDB: e.db, StreamARN: fake.arn, LeaseTable: e.ep.LeasesTable, Publisher: pub,
		Topics: e.topics, WorkerID: "w1", BatchSize: 7, LeaseDuration: time.Second, DiscoveryInterval: 50 * time.Millisecond,
	}
	stop := runRelay(t, cfg)
	integration.AwaitProgress(t, "events published", func() int64 { return int64(len(pub.published())) }, 63)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	orphans := 0
	for _, m := range pub.published() {
		ev, err := bus.EventFromMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		if ev.AggregateID == "orphan" {
			orphans++
			continue
		}
		seqs = append(seqs, ev.Sequence)
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("published sequences %v: position %d holds %d", seqs, i, s)
		}
	}
	if len(seqs) != 60 || orphans != 3 {
		t.Fatalf("published %d events of x and %d of orphan, want 60 and 3", len(seqs), orphans)
	}
	lastParentRead := slices.Index(fake.reads, "shard-child") - 1
	if lastParentRead < 0 || slices.Contains(fake.reads[lastParentRead+1:], "shard-parent") {
		t.Fatalf("read order %v: the child was read before the parent was done", fake.reads)
	}
	leases, err := relay.Status(context.Background(), &relay.Leases{Client: e.db, Table: e.ep.LeasesTable}, fake.arn)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		if l.ShardID == "shard-parent" && (!l.Finished || l.Checkpoint != aws.ToString(x[half-1].Dynamodb.SequenceNumber)) {
			t.Fatalf("parent lease %+v, want finished at its last record", l)
		}
	}
}

// realRecords reads n records of e's table from DynamoDB Local's stream.
func realRecords(t *testing.T, e *env, n int) []st.Record {
	t.Helper()
	ctx := context.Background()
	cfg := e.relayConfig(t, "reader")
	arn, err := relay.StreamARN(ctx, e.db, e.ep.EventsTable)
	if err != nil {
		t.Fatal(err)
	}
	shards, err := relay.Shards(ctx, cfg.Streams, arn)
	if err != nil {
		t.Fatal(err)
	}
	var out []st.Record
	for _, sh := range shards {
		it, err := cfg.Streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: aws.String(sh.ShardID), ShardIteratorType: st.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		iter := it.ShardIterator
		for iter != nil && len(out) < n {
			res, err := cfg.Streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, res.Records...)
			if len(res.Records) == 0 {
				break
			}
			iter = res.NextShardIterator
		}
	}
	if len(out) != n {
		t.Fatalf("stream holds %d records, want %d", len(out), n)
	}
	return out
}
