package streamsim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestLineageUnderConcurrentSplits runs 256 shards that split 64 times
// while 8 writers put concurrently, and a reader that, like the relay,
// discovers shards with paginated DescribeStream and reads a child only
// after its parent was read to its end (nil NextShardIterator), backing
// off when throttled at AWS's 5 reads/s/shard. It must get every record
// exactly once, each key's records in the order they were put, and per
// shard exactly what Truth holds. It has no deadline: it fails when no
// record is read for integration.HangAfter.
func TestLineageUnderConcurrentSplits(t *testing.T) {
	const (
		shards, splits         = 256, 64
		writers, perWriter     = 8, 600
		keysPerWriter          = 40
		pollIdle, pollThrottle = 50 * time.Millisecond, 200 * time.Millisecond
	)
	s := start(t, Config{Shards: shards})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := s.Client(NoRetries)

	var (
		mu       sync.Mutex
		byKey    = map[string][]string{} // key -> seqs in the order read
		byShard  = map[string][]string{}
		seen     = map[string]int{}
		total    int
		finished = map[string]chan struct{}{} // closed when the shard was read to its end
		started  = map[string]bool{}
	)
	gotAll := make(chan struct{})
	var wantTotal int // set once writers and splits are done
	var wantSet bool
	deliver := func(shard string, recs []types.Record) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range recs {
			seq := aws.ToString(r.Dynamodb.SequenceNumber)
			key := r.Dynamodb.Keys["pk"].(*types.AttributeValueMemberS).Value
			byKey[key] = append(byKey[key], seq)
			byShard[shard] = append(byShard[shard], seq)
			seen[seq]++
			total++
		}
		if wantSet && total >= wantTotal {
			select {
			case <-gotAll:
			default:
				close(gotAll)
			}
		}
	}
	readErr := make(chan error, 1)
	fail := func(err error) {
		select {
		case readErr <- err:
		default:
		}
	}

	readShard := func(ctx context.Context, id string, parentDone <-chan struct{}, done chan struct{}) {
		if parentDone != nil {
			select {
			case <-parentDone:
			case <-ctx.Done():
				return
			}
		}
		out, err := c.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(s.StreamARN()), ShardId: aws.String(id), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
		if err != nil {
			if ctx.Err() == nil {
				fail(fmt.Errorf("iterator %s: %w", id, err))
			}
			return
		}
		it := out.ShardIterator
		for {
			res, err := c.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
			var limit *types.LimitExceededException
			switch {
			case ctx.Err() != nil:
				return
			case errors.As(err, &limit):
				time.Sleep(pollThrottle)
				continue
			case errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
				// The connection dropped mid-response on a loaded machine:
				// the iterator is still good, so read it again, as a relay
				// retries a failed GetRecords.
				time.Sleep(pollThrottle)
				continue
			case err != nil:
				fail(fmt.Errorf("read %s: %w", id, err))
				return
			}
			deliver(id, res.Records)
			if res.NextShardIterator == nil {
				close(done)
				return
			}
			it = res.NextShardIterator
			if len(res.Records) == 0 {
				time.Sleep(pollIdle)
			}
		}
	}

	var readers sync.WaitGroup
	discover := func() error {
		var start *string
		for {
			out, err := c.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(s.StreamARN()), ExclusiveStartShardId: start})
			if err != nil {
				return err
			}
			mu.Lock()
			for _, sh := range out.StreamDescription.Shards {
				id, parent := aws.ToString(sh.ShardId), aws.ToString(sh.ParentShardId)
				if started[id] {
					continue
				}
				started[id] = true
				done := make(chan struct{})
				finished[id] = done
				var parentDone <-chan struct{}
				if parent != "" {
					if finished[parent] == nil {
						// Listed parents come first; an unknown parent
						// is a bug in the listing.
						mu.Unlock()
						return fmt.Errorf("shard %s listed before its parent %s", id, parent)
					}
					parentDone = finished[parent]
				}
				readers.Go(func() { readShard(ctx, id, parentDone, done) })
			}
			mu.Unlock()
			if start = out.StreamDescription.LastEvaluatedShardId; start == nil {
				return nil
			}
		}
	}

	var writes sync.WaitGroup
	for w := range writers {
		writes.Go(func() {
			for i := range perWriter {
				key := fmt.Sprintf("w%d-k%d", w, i%keysPerWriter)
				if _, err := s.Put(key, keyRec(key, i)); err != nil {
					fail(err)
					return
				}
				if i%4 == 0 {
					time.Sleep(time.Millisecond) // spread the writes over the splits
				}
			}
		})
	}
	splitDone := s.SplitEvery(ctx, 3*time.Millisecond, splits)

	go func() {
		writes.Wait()
		<-splitDone
		n := int(s.Stats().RecordsPut)
		mu.Lock()
		wantTotal, wantSet = n, true
		if total >= n {
			close(gotAll)
		}
		mu.Unlock()
	}()

	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	hang := integration.HangAfter()
	lastTotal, moved := -1, time.Now()
loop:
	for {
		if err := discover(); err != nil {
			t.Fatalf("discover: %v", err)
		}
		select {
		case <-gotAll:
			// One more discovery: every shard must have been found.
			if err := discover(); err != nil {
				t.Fatalf("discover: %v", err)
			}
			break loop
		case err := <-readErr:
			t.Fatal(err)
		case <-tick.C:
			mu.Lock()
			n := total
			mu.Unlock()
			if n != lastTotal {
				lastTotal, moved = n, time.Now()
			} else if stuck := time.Since(moved); stuck >= hang {
				t.Fatalf("read %d records of the %d wanted (%d put so far), then none for %v (%s)",
					n, writers*perWriter, s.Stats().RecordsPut, stuck.Round(time.Millisecond), integration.EnvHangAfter)
			}
		}
	}
	cancel()
	readers.Wait()

	st := s.Stats()
	if st.Splits != splits || st.OpenShards != shards+splits {
		t.Fatalf("stats %+v", st)
	}
	if total != writers*perWriter || int(st.RecordsPut) != total {
		t.Fatalf("read %d records, put %d, want %d", total, st.RecordsPut, writers*perWriter)
	}
	for seq, n := range seen {
		if n != 1 {
			t.Fatalf("record %s read %d times", seq, n)
		}
	}
	wantKey := map[string][]string{}
	for _, sh := range s.Truth() {
		got := byShard[sh.ShardID]
		if len(got) != len(sh.Records) {
			t.Fatalf("shard %s: read %d records, truth %d", sh.ShardID, len(got), len(sh.Records))
		}
		for i, r := range sh.Records {
			if got[i] != r.SequenceNumber() {
				t.Fatalf("shard %s record %d: read %s, truth %s", sh.ShardID, i, got[i], r.SequenceNumber())
			}
			wantKey[r.PartitionKey] = append(wantKey[r.PartitionKey], r.SequenceNumber())
		}
	}
	crossed, keysAcross := 0, 0
	shardOf, parentOf := map[string]string{}, map[string]string{}
	for _, sh := range s.Truth() {
		parentOf[sh.ShardID] = sh.ParentShardID
		for _, r := range sh.Records {
			shardOf[r.SequenceNumber()] = sh.ShardID
		}
	}
	// descends reports whether shard b is a or a descendant of a.
	descends := func(b, a string) bool {
		for ; b != ""; b = parentOf[b] {
			if b == a {
				return true
			}
		}
		return false
	}
	for key, want := range wantKey {
		slices.Sort(want) // a key's records in put order = sequence order
		got := byKey[key]
		if len(got) != len(want) {
			t.Fatalf("key %s: read %d records, want %d", key, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("key %s: record %d read %s, want %s (out of order)", key, i, got[i], want[i])
			}
		}
		for i := 1; i < len(want); i++ {
			if !descends(shardOf[want[i]], shardOf[want[i-1]]) {
				t.Fatalf("key %s: record %s in shard %s, the next %s in %s, not a descendant", key, want[i-1], shardOf[want[i-1]], want[i], shardOf[want[i]])
			}
		}
		if shardOf[want[0]] != shardOf[want[len(want)-1]] {
			keysAcross++
		}
	}
	for _, sh := range s.Truth() {
		if sh.Closed && len(sh.Records) > 0 {
			crossed++
		}
	}
	t.Logf("%d records over %d shards (%d closed with records), %d of %d keys across a split, %d GetRecords calls, %d throttled",
		total, len(s.Truth()), crossed, keysAcross, len(wantKey), st.Calls["GetRecords"], st.Throttled)
	if keysAcross == 0 {
		t.Fatal("no key's records crossed a split: the test did not exercise lineage")
	}
}
