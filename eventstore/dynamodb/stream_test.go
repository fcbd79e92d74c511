package dynamodb_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/eventstore"
	store "github.com/eventpipe/eventpipe/eventstore/dynamodb"
)

// TestStreamCarriesEveryEventAndOutboundItem covers the stream: every event
// appended (and every OUTBOUND item) appears on the table stream, and its
// NEW_IMAGE decodes to the same envelope the store loads.
func TestStreamCarriesEveryEventAndOutboundItem(t *testing.T) {
	ctx := ctxT(t)
	s, client, table := newStore(t, nil)
	streams := testenv.DynamoDBStreams(t)
	f, err := eventstore.NewFacet(eventstore.FacetConfig[tally]{
		Store: s, AggregateType: "tally",
		Processor: eventstore.Processor[tally]{Initial: func() tally { return tally{} }, Rules: map[string]eventstore.Rule[tally]{
			"Added": eventstore.On(func(st tally, a added, out *eventstore.Outbox) (tally, error) {
				st.Sum += a.N
				if st.Sum >= 10 && st.Sum-a.N < 10 {
					out.Publish("reachedTen", map[string]int64{"sum": st.Sum})
				}
				return st, nil
			}),
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// b's events were appended by a traced command; a's were not.
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	meta := map[string]eventstore.Metadata{"b": {TraceParent: traceparent}}
	for _, id := range []string{"a", "b"} {
		for _, n := range []int64{4, 4, 4} {
			if _, err := f.Append(ctx, id, eventstore.Change{Metadata: meta[id], Events: []eventstore.NewEvent{eventstore.Event("Added", added{N: n})}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	desc, err := client.DescribeTable(ctx, &ddb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	sd, err := streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: desc.Table.LatestStreamArn})
	if err != nil {
		t.Fatal(err)
	}
	fromStream := map[string]string{}
	var outbound []eventstore.OutboundRecord
	for _, sh := range sd.StreamDescription.Shards {
		it, err := streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
			StreamArn: desc.Table.LatestStreamArn, ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			t.Fatal(err)
		}
		iter := it.ShardIterator
		for iter != nil {
			recs, err := streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs.Records {
				item := store.ItemFromStreamImage(r.Dynamodb.NewImage)
				sk := attrString(item["sk"])
				switch {
				case strings.HasPrefix(sk, store.SKEventPrefix):
					e, err := store.EnvelopeFromItem(item)
					if err != nil {
						t.Fatal(err)
					}
					fromStream[e.EventID] = string(mustMarshal(t, e))
				case strings.HasPrefix(sk, store.SKOutboundPrefix):
					o, err := store.OutboundFromItem(item)
					if err != nil {
						t.Fatal(err)
					}
					outbound = append(outbound, o)
				}
			}
			if len(recs.Records) == 0 {
				break
			}
			iter = recs.NextShardIterator
		}
	}
	var total int
	for _, id := range []string{"a", "b"} {
		events, err := s.Load(ctx, eventstore.Ref{Type: "tally", ID: id}, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			total++
			if fromStream[e.EventID] != string(mustMarshal(t, e)) {
				t.Fatalf("event %s: stream gave %q", e, fromStream[e.EventID])
			}
		}
	}
	if total != 6 || len(fromStream) != 6 {
		t.Fatalf("%d events stored, %d on the stream", total, len(fromStream))
	}
	if len(outbound) != 2 || outbound[0].Name != "reachedTen" || outbound[0].Seq != 3 || string(outbound[0].Payload) != `{"sum":12}` {
		t.Fatalf("outbound on the stream: %+v", outbound)
	}
	for _, o := range outbound {
		if o.Metadata.TraceParent != meta[o.AggregateID].TraceParent {
			t.Errorf("outbound of %s: traceparent %q, want %q", o.AggregateID, o.Metadata.TraceParent, meta[o.AggregateID].TraceParent)
		}
	}
}

func attrString(v types.AttributeValue) string {
	if s, ok := v.(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}
