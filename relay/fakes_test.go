package relay_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	st "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/eventpipe/eventpipe/relay"
)

// trimmingStreams is the real stream, except that the records after any
// checkpoint are gone: GetShardIterator AFTER_SEQUENCE_NUMBER answers as
// DynamoDB Streams does for a sequence number past its retention.
type trimmingStreams struct{ relay.StreamsAPI }

func (s *trimmingStreams) GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	if in.ShardIteratorType == st.ShardIteratorTypeAfterSequenceNumber {
		return nil, &st.TrimmedDataAccessException{Message: aws.String("the requested sequence number is beyond the trim horizon")}
	}
	return s.StreamsAPI.GetShardIterator(ctx, in, opts...)
}

// fakeShard is a shard of fakeStreams: its records, and whether it is
// closed (no NextShardIterator after the last record).
type fakeShard struct {
	id, parent string
	records    []st.Record
	closed     bool
}

// fakeStreams serves shards from memory, for unit tests of the shard
// graph; iterators are "shard/position".
type fakeStreams struct {
	mu     sync.Mutex
	arn    string
	shards []*fakeShard
	reads  []string // shard ids in the order GetRecords returned records
}

func (f *fakeStreams) DescribeStream(_ context.Context, in *dynamodbstreams.DescribeStreamInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	desc := &st.StreamDescription{StreamArn: aws.String(f.arn)}
	for _, s := range f.shards {
		sh := st.Shard{ShardId: aws.String(s.id)}
		if s.parent != "" {
			sh.ParentShardId = aws.String(s.parent)
		}
		desc.Shards = append(desc.Shards, sh)
	}
	return &dynamodbstreams.DescribeStreamOutput{StreamDescription: desc}, nil
}

func (f *fakeStreams) shard(id string) *fakeShard {
	for _, s := range f.shards {
		if s.id == id {
			return s
		}
	}
	return nil
}

func (f *fakeStreams) GetShardIterator(_ context.Context, in *dynamodbstreams.GetShardIteratorInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.shard(aws.ToString(in.ShardId))
	if s == nil {
		return nil, &st.ResourceNotFoundException{Message: aws.String("no shard " + aws.ToString(in.ShardId))}
	}
	pos := 0
	if in.ShardIteratorType == st.ShardIteratorTypeAfterSequenceNumber {
		pos = -1
		for i, r := range s.records {
			if aws.ToString(r.Dynamodb.SequenceNumber) == aws.ToString(in.SequenceNumber) {
				pos = i + 1
			}
		}
		if pos < 0 {
			return nil, &st.TrimmedDataAccessException{Message: aws.String("unknown sequence number")}
		}
	}
	return &dynamodbstreams.GetShardIteratorOutput{ShardIterator: aws.String(fmt.Sprintf("%s/%d", s.id, pos))}, nil
}

func (f *fakeStreams) GetRecords(_ context.Context, in *dynamodbstreams.GetRecordsInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var id string
	var pos int
	it := aws.ToString(in.ShardIterator)
	for i := len(it) - 1; i >= 0; i-- {
		if it[i] == '/' {
			id = it[:i]
			fmt.Sscan(it[i+1:], &pos)
			break
		}
	}
	s := f.shard(id)
	end := min(len(s.records), pos+int(aws.ToInt32(in.Limit)))
	out := &dynamodbstreams.GetRecordsOutput{Records: s.records[pos:end]}
	if len(out.Records) > 0 {
		f.reads = append(f.reads, s.id)
	}
	if end < len(s.records) || !s.closed {
		out.NextShardIterator = aws.String(fmt.Sprintf("%s/%d", s.id, end))
	}
	return out, nil
}

// recordingPublisher keeps what was published, in order.
type recordingPublisher struct {
	mu   sync.Mutex
	msgs []*message.Message
}

func (p *recordingPublisher) Publish(_ string, msgs ...*message.Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.msgs = append(p.msgs, msgs...)
	return nil
}

func (p *recordingPublisher) Close() error { return nil }

func (p *recordingPublisher) published() []*message.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*message.Message(nil), p.msgs...)
}
