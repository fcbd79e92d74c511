package relay_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	st "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/relay"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// watchedStreams is the real stream, counting what it answered: empty
// GetRecords reads (the first one closes firstEmptyRead) and
// TrimmedDataAccessExceptions.
type watchedStreams struct {
	relay.StreamsAPI
	once           sync.Once
	firstEmptyRead chan struct{}
	trimmed        atomic.Int64
}

func newWatchedStreams(inner relay.StreamsAPI) *watchedStreams {
	return &watchedStreams{StreamsAPI: inner, firstEmptyRead: make(chan struct{})}
}

func (w *watchedStreams) count(err error) {
	var trimmed *st.TrimmedDataAccessException
	if errors.As(err, &trimmed) {
		w.trimmed.Add(1)
	}
}

func (w *watchedStreams) GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	out, err := w.StreamsAPI.GetShardIterator(ctx, in, opts...)
	w.count(err)
	return out, err
}

func (w *watchedStreams) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	out, err := w.StreamsAPI.GetRecords(ctx, in, opts...)
	w.count(err)
	if err == nil && len(out.Records) == 0 {
		w.once.Do(func() { close(w.firstEmptyRead) })
	}
	return out, err
}

// runningRelay is a relay whose Run is watched: done closes when Run
// returns, with its error in err.
type runningRelay struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

func startRelay(t *testing.T, cfg relay.Config) *runningRelay {
	t.Helper()
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rr := &runningRelay{cancel: cancel, done: make(chan struct{})}
	go func() {
		rr.err = r.Run(ctx)
		close(rr.done)
	}()
	t.Cleanup(func() { rr.stop() })
	return rr
}

// stop cancels Run and returns its error.
func (rr *runningRelay) stop() error {
	rr.cancel()
	<-rr.done
	return rr.err
}

// awaitEvents reads topic from its start until every event of want
// (aggregate id → last sequence) arrived, failing t at once when the
// relay stops meanwhile, and when no new record arrives for
// integration.HangAfter.
func awaitEvents(t *testing.T, e *env, rr *runningRelay, topic string, want map[string]int64) []delivery {
	t.Helper()
	reader := newTopicReader(t, e.ep.KafkaBrokers, topic)
	defer reader.Close()
	hang := integration.HangAfter()
	var got []delivery
	for moved := time.Now(); !complete(want)(got); {
		select {
		case <-rr.done:
			t.Fatalf("the relay stopped before the expected events reached Kafka: %v", rr.err)
		default:
		}
		if stuck := time.Since(moved); stuck >= hang {
			t.Fatalf("%s: %d records, then none for %v (%s); not all expected events arrived", topic, len(got), stuck.Round(time.Millisecond), integration.EnvHangAfter)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		recs, _ := reader.Poll(ctx) // a failed fetch is retried; a stuck read fails above
		cancel()
		for _, r := range recs {
			env, err := eventstore.Unmarshal(r.Value)
			if err != nil {
				t.Fatalf("record %s/%d@%d: %v", r.Topic, r.Partition, r.Offset, err)
			}
			got = append(got, delivery{partition: r.Partition, offset: r.Offset, env: env})
			moved = time.Now()
		}
	}
	return got
}

// TestRelayOnAFreshTableKeepsRunningAndPublishesTheFirstEvents starts a
// relay on a freshly migrated, empty events table, waits until it has read
// the empty shard from TRIM_HORIZON, then appends within a second. The
// relay's own lease writes move DynamoDB Local's sequence counter (one for
// all tables) past the shard's start, so the shard's first record lies
// beyond where the early iterator points and DynamoDB Local answers
// TrimmedDataAccessException. Nothing was read and nothing can be lost, so
// the relay must keep running and publish the first events, and go on
// publishing later ones.
func TestRelayOnAFreshTableKeepsRunningAndPublishesTheFirstEvents(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	e := newEnv(t)
	cfg := e.relayConfig(t, "w1")
	streams := newWatchedStreams(cfg.Streams)
	cfg.Streams = streams
	rr := startRelay(t, cfg)

	select {
	case <-streams.firstEmptyRead:
	case <-rr.done:
		t.Fatalf("the relay stopped before reading the empty shard: %v", rr.err)
	case <-time.After(integration.HangAfter()):
		t.Fatalf("the relay did not read the empty shard within %v (%s)", integration.HangAfter(), integration.EnvHangAfter)
	}
	want := map[string]int64{}
	for _, id := range []string{"first-a", "first-b"} {
		e.appendTicks(t, eventstore.Ref{Type: "tick", ID: id}, 0, 2)
		want[id] = 2
	}
	got := awaitEvents(t, e, rr, e.topics.Events("tick"), want)
	if dups := coverage(t, got, want); dups != 0 {
		t.Errorf("%d duplicates without any crash", dups)
	}
	t.Logf("DynamoDB Local answered TrimmedDataAccessException %d times before the first records", streams.trimmed.Load())

	// Still running: events appended once the shard is idle arrive too.
	time.Sleep(2 * time.Second)
	e.appendTicks(t, eventstore.Ref{Type: "tick", ID: "first-a"}, 2, 1)
	want["first-a"] = 3
	coverage(t, awaitEvents(t, e, rr, e.topics.Events("tick"), want), want)
	if err := rr.stop(); err != nil {
		t.Fatalf("clean stop: %v", err)
	}
	if ls := e.leases(t); len(ls) != 1 || ls[0].Checkpoint == "" || ls[0].Owner != "" {
		t.Fatalf("leases after a clean stop: %+v, want one released lease with a checkpoint", ls)
	}
}

// trimmedHorizonStreams is the real stream, except that the first
// `times` GetShardIterator TRIM_HORIZON calls answer
// TrimmedDataAccessException. DynamoDB Local answers it from GetRecords
// instead (see above); this covers the same answer from GetShardIterator,
// which DynamoDB Streams documents for iterators.
type trimmedHorizonStreams struct {
	relay.StreamsAPI
	times    int64
	answered atomic.Int64
}

func (s *trimmedHorizonStreams) GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	if in.ShardIteratorType == st.ShardIteratorTypeTrimHorizon && s.answered.Add(1) <= s.times {
		return nil, &st.TrimmedDataAccessException{Message: aws.String("The operation attempted to read past the oldest stream record in a shard.")}
	}
	return s.StreamsAPI.GetShardIterator(ctx, in, opts...)
}

// TestTrimmedAnswerToTrimHorizonWithoutCheckpointIsRetried: a shard
// without a checkpoint whose TRIM_HORIZON iterator is refused as trimmed
// three times is retried with back-off, and its events are published; a
// TRIM_HORIZON start is never past anything, so it never stops the relay.
func TestTrimmedAnswerToTrimHorizonWithoutCheckpointIsRetried(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	e := newEnv(t)
	want := map[string]int64{"a": 3}
	e.appendTicks(t, eventstore.Ref{Type: "tick", ID: "a"}, 0, 3)
	cfg := e.relayConfig(t, "w1")
	streams := &trimmedHorizonStreams{StreamsAPI: cfg.Streams, times: 3}
	cfg.Streams = streams
	rr := startRelay(t, cfg)
	coverage(t, awaitEvents(t, e, rr, e.topics.Events("tick"), want), want)
	if n := streams.answered.Load(); n <= streams.times {
		t.Errorf("%d TRIM_HORIZON requests, want more than the %d refused ones", n, streams.times)
	}
	if err := rr.stop(); err != nil {
		t.Fatalf("clean stop: %v", err)
	}
}
