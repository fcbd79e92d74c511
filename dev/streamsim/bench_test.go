package streamsim

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// BenchmarkGetRecords1000 measures one full GetRecords call (1000
// records of a small item) through the SDK client: the simulator's own
// cost per batch, without read limits.
func BenchmarkGetRecords1000(b *testing.B) {
	s, err := Start(Config{ReadsPerSecondPerShard: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := range 1000 {
		if _, err := s.Put("k", keyRec("k", i)); err != nil {
			b.Fatal(err)
		}
	}
	ctx, c := context.Background(), s.Client()
	it, err := c.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(s.StreamARN()),
		ShardId: aws.String(s.OpenShards()[0]), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		out, err := c.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil || len(out.Records) != 1000 {
			b.Fatalf("%d records, %v", len(out.Records), err)
		}
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "records/s")
}
