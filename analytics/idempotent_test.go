package analytics_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/oklog/ulid/v2"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/eventstore"
)

// withIDs is n events with fresh client ids, 10 per session.
func withIDs(now time.Time, n int) []analytics.EventInput {
	in := make([]analytics.EventInput, n)
	for i := range in {
		in[i] = analytics.EventInput{
			EventID: ulid.MustNew(ulid.Timestamp(now.Add(-time.Duration(n-i)*time.Second)), ulid.DefaultEntropy()).String(),
			Type:    "page_view", SessionID: fmt.Sprintf("s%d", i/10), URL: fmt.Sprintf("/p/%d", i),
		}
	}
	return in
}

func statuses(results []analytics.Result) map[analytics.Status]int {
	m := map[analytics.Status]int{}
	for _, r := range results {
		m[r.Status]++
	}
	return m
}

// TestIngestBatchStoresAClientEventIDOnceHoweverRepeatedOrRebatched
// ingests 60 events with client ids, then the same batch again, the
// events in other batches (concurrently), in lower case and repeated
// within one batch: the table holds 60 items, the first ingestion
// reports 60 stored and every later one duplicates, with the same ids and
// shards.
func TestIngestBatchStoresAClientEventIDOnceHoweverRepeatedOrRebatched(t *testing.T) {
	ctx := context.Background()
	st, db, table := newStore(t, nil)
	in := withIDs(time.Now(), 60)
	first, err := st.IngestBatch(ctx, "site", in, analytics.IngestOptions{})
	if err != nil || statuses(first)[analytics.StatusStored] != 60 {
		t.Fatalf("first ingestion: %v %v", statuses(first), err)
	}
	for i, r := range first {
		if r.Event.EventID != in[i].EventID {
			t.Fatalf("event %d stored as %s, posted as %s", i, r.Event.EventID, in[i].EventID)
		}
		if got := r.Event.CreatedAt; !got.Equal(ulid.Time(ulid.MustParse(in[i].EventID).Time())) {
			t.Errorf("event %d createdAt %s, want its id's time", i, got)
		}
	}
	again, err := st.IngestBatch(ctx, "site", in, analytics.IngestOptions{})
	if err != nil || statuses(again)[analytics.StatusDuplicate] != 60 {
		t.Fatalf("second ingestion: %v %v", statuses(again), err)
	}
	for i := range again {
		if again[i].Event.EventID != first[i].Event.EventID || again[i].Event.Shard != first[i].Event.Shard {
			t.Fatalf("event %d: %+v, first %+v", i, again[i].Event, first[i].Event)
		}
	}
	var wg sync.WaitGroup
	for start := 0; start < 60; start += 7 {
		chunk := append([]analytics.EventInput(nil), in[start:min(start+7, 60)]...)
		chunk[0].EventID = strings.ToLower(chunk[0].EventID)
		chunk = append(chunk, chunk[0]) // the same id twice in one batch
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := st.IngestBatch(ctx, "site", chunk, analytics.IngestOptions{})
			if err != nil || statuses(res)[analytics.StatusDuplicate] != len(chunk) {
				t.Errorf("re-batched chunk at %d: %v %v", start, statuses(res), err)
			}
		}()
	}
	wg.Wait()
	if n := countItems(t, db, table); n != 60 {
		t.Fatalf("the table holds %d items, want 60", n)
	}
	// A new batch repeating an id stores it once and reports the repeat.
	twice := withIDs(time.Now(), 2)
	twice = append(twice, twice[0])
	res, err := st.IngestBatch(ctx, "site", twice, analytics.IngestOptions{})
	if err != nil || res[0].Status != analytics.StatusStored || res[1].Status != analytics.StatusStored || res[2].Status != analytics.StatusDuplicate {
		t.Fatalf("a batch with a repeated id: %+v %v", res, err)
	}
	if n := countItems(t, db, table); n != 62 {
		t.Fatalf("the table holds %d items, want 62", n)
	}
}

// TestIngestBatchRefusesBadEventIDsAndStoresNothing: an eventId that is
// not a ULID, or whose time is out of range, is a ValidationError naming
// eventId and the event's index; nothing of the batch is written.
func TestIngestBatchRefusesBadEventIDsAndStoresNothing(t *testing.T) {
	ctx := context.Background()
	st, db, table := newStore(t, nil)
	for _, c := range []struct{ name, id string }{
		{"not a ULID", "not-a-ulid"},
		{"too short", "01ARZ3NDEKTSV4RRFFQ69G5FA"},
		{"a letter outside Crockford's alphabet", "01ARZ3NDEKTSV4RRFFQ69G5FAU"},
		{"beyond the largest time", "8ZZZZZZZZZZZZZZZZZZZZZZZZZ"},
		{"dated 2001, too old", ulid.MustNew(ulid.Timestamp(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)), ulid.DefaultEntropy()).String()},
		{"dated next year, ahead", ulid.MustNew(ulid.Timestamp(time.Now().AddDate(1, 0, 0)), ulid.DefaultEntropy()).String()},
	} {
		in := withIDs(time.Now(), 3)
		in[2].EventID = c.id
		_, err := st.IngestBatch(ctx, "site", in, analytics.IngestOptions{})
		var ve *eventstore.ValidationError
		var ee *analytics.EventError
		if !errors.As(err, &ve) || ve.Field != "eventId" || !errors.As(err, &ee) || ee.Index != 2 {
			t.Errorf("%s: %v, want a ValidationError of eventId at index 2", c.name, err)
		}
	}
	if _, err := st.IngestBatch(ctx, "site", withIDs(time.Now(), 1), analytics.IngestOptions{IdempotencyKey: "bad\nkey"}); err == nil || !strings.Contains(err.Error(), "idempotencyKey") {
		t.Errorf("a key with a newline: %v, want a ValidationError of idempotencyKey", err)
	}
	if n := countItems(t, db, table); n != 0 {
		t.Errorf("refused batches stored %d items", n)
	}
}

// TestIngestBatchWithAnIdempotencyKeyDerivesTheSameIDs ingests a batch
// without ids under a key, and again an hour later: the second answer is
// the first (ids, shards, createdAt at the first use, every event
// stored) and nothing more is stored. Another batch under the key is a
// *KeyReuseError that stores nothing; once the key expired it is new.
func TestIngestBatchWithAnIdempotencyKeyDerivesTheSameIDs(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Now().Add(-2 * time.Hour).Truncate(time.Millisecond).UTC()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	st, db, table := newStore(t, func(c *analytics.Config) { c.Now = clock; c.IdempotencyTTL = 90 * time.Minute })
	in := make([]analytics.EventInput, 40)
	for i := range in {
		in[i] = analytics.EventInput{Type: "click", SessionID: "s1"}
	}
	key := analytics.IngestOptions{IdempotencyKey: "order-42"}
	first, err := st.IngestBatch(ctx, "site", in, key)
	if err != nil || statuses(first)[analytics.StatusStored] != 40 {
		t.Fatalf("first: %v %v", statuses(first), err)
	}
	firstUse := now
	advance(time.Hour)
	again, err := st.IngestBatch(ctx, "site", in, key)
	if err != nil {
		t.Fatal(err)
	}
	for i := range first {
		a, b := first[i], again[i]
		if a.Status != b.Status || a.Event.EventID != b.Event.EventID || a.Event.Shard != b.Event.Shard || !b.Event.CreatedAt.Equal(firstUse) || !a.Event.CreatedAt.Equal(firstUse) {
			t.Fatalf("event %d: first %+v, again %+v; want the same, created at %s", i, a, b, firstUse)
		}
		if i > 0 && first[i-1].Event.EventID >= a.Event.EventID {
			t.Errorf("derived ids out of batch order at %d", i)
		}
	}
	if n := countItems(t, db, table); n != 41 { // 40 events and the key
		t.Fatalf("the table holds %d items, want 41", n)
	}
	other := append([]analytics.EventInput(nil), in...)
	other[5].SessionID = "s2"
	_, err = st.IngestBatch(ctx, "site", other, key)
	var reuse *analytics.KeyReuseError
	if !errors.As(err, &reuse) || reuse.Key != "order-42" || !reuse.FirstUsed.Equal(firstUse) {
		t.Fatalf("another batch under the key: %v, want a *KeyReuseError", err)
	}
	if n := countItems(t, db, table); n != 41 {
		t.Fatalf("the refused batch stored: %d items", n)
	}
	// The same key of another source is another key.
	if res, err := st.IngestBatch(ctx, "other-site", in, key); err != nil || res[0].Event.EventID == first[0].Event.EventID {
		t.Fatalf("the key of another source: %v, id %s", err, res[0].Event.EventID)
	}
	advance(time.Hour) // past the key's 90 minutes
	res, err := st.IngestBatch(ctx, "site", other, key)
	if err != nil || statuses(res)[analytics.StatusStored] != 40 || res[0].Event.EventID == first[0].Event.EventID {
		t.Fatalf("another batch under the expired key: %v %v", statuses(res), err)
	}
}

// failingPuts fails the PutItem of the event items whose eventId is in
// fail; other calls go to DynamoDB.
type failingPuts struct {
	analytics.API
	fail map[string]bool
}

func (f failingPuts) PutItem(ctx context.Context, in *ddb.PutItemInput, opt ...func(*ddb.Options)) (*ddb.PutItemOutput, error) {
	if id, ok := in.Item["eventId"].(*types.AttributeValueMemberS); ok && f.fail[id.Value] {
		return nil, errors.New("injected failure")
	}
	return f.API.PutItem(ctx, in, opt...)
}

// TestIngestBatchReportsWhichEventsFailed fails the writes of a third of
// a batch: the others are stored, the result names each failed event
// with its error and the *WriteError their indexes; ingesting the batch
// again stores the failed ones and reports the others as duplicates.
func TestIngestBatchReportsWhichEventsFailed(t *testing.T) {
	ctx := context.Background()
	_, db, table := newStore(t, nil)
	in := withIDs(time.Now(), 30)
	fail := map[string]bool{}
	var wantFailed []int
	for i := 0; i < len(in); i += 3 {
		fail[in[i].EventID] = true
		wantFailed = append(wantFailed, i)
	}
	flaky, err := analytics.New(analytics.Config{Client: failingPuts{API: db, fail: fail}, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	res, err := flaky.IngestBatch(ctx, "site", in, analytics.IngestOptions{})
	var we *analytics.WriteError
	if !errors.As(err, &we) || we.Written != 20 || we.NotWritten != 10 || fmt.Sprint(we.Unwritten) != fmt.Sprint(wantFailed) {
		t.Fatalf("ingest with failures: %v, want a WriteError of %v", err, wantFailed)
	}
	for i, r := range res {
		if failed := i%3 == 0; failed != (r.Status == analytics.StatusFailed) || failed != (r.Err != nil) {
			t.Errorf("event %d: %s %v", i, r.Status, r.Err)
		}
	}
	if n := countItems(t, db, table); n != 20 {
		t.Fatalf("%d items stored, want 20", n)
	}
	st, err := analytics.New(analytics.Config{Client: db, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	res, err = st.IngestBatch(ctx, "site", in, analytics.IngestOptions{})
	if err != nil || statuses(res)[analytics.StatusStored] != 10 || statuses(res)[analytics.StatusDuplicate] != 20 {
		t.Fatalf("the retry: %v %v", statuses(res), err)
	}
	if n := countItems(t, db, table); n != 30 {
		t.Fatalf("%d items stored, want 30", n)
	}
}

// TestRepeatedEventIDsLeaveOneStreamRecordEach reads the table's stream
// after a batch with client ids was ingested three times (and an
// idempotency-key batch twice): one INSERT per event and no MODIFY, so
// the relay publishes each event once and the aggregation consumer,
// which counts what the stream delivers, counts it once.
func TestRepeatedEventIDsLeaveOneStreamRecordEach(t *testing.T) {
	ctx := context.Background()
	st, db, table := newStore(t, nil)
	in := withIDs(time.Now(), 30)
	for range 3 {
		if _, err := st.IngestBatch(ctx, "site", in, analytics.IngestOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	keyed := make([]analytics.EventInput, 10)
	for i := range keyed {
		keyed[i] = analytics.EventInput{Type: "click", SessionID: "k"}
	}
	for range 2 {
		if _, err := st.IngestBatch(ctx, "site", keyed, analytics.IngestOptions{IdempotencyKey: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	records := streamRecords(t, db, table)
	inserts, others := 0, 0
	for _, r := range records {
		if !strings.HasPrefix(r.sk, analytics.SKEventPrefix) {
			continue
		}
		if r.name == "INSERT" {
			inserts++
		} else {
			others++
		}
	}
	if inserts != 40 || others != 0 {
		t.Fatalf("the stream holds %d INSERTs and %d other records of events, want 40 and 0", inserts, others)
	}
}

type streamRecord struct{ name, sk string }

// streamRecords reads every record of the table's stream.
func streamRecords(t *testing.T, db *ddb.Client, table string) []streamRecord {
	t.Helper()
	ctx := context.Background()
	streams := testenv.DynamoDBStreams(t)
	desc, err := db.DescribeTable(ctx, &ddb.DescribeTableInput{TableName: &table})
	if err != nil || desc.Table.LatestStreamArn == nil {
		t.Fatalf("describe %s: %v (a stream is needed)", table, err)
	}
	sd, err := streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: desc.Table.LatestStreamArn})
	if err != nil {
		t.Fatal(err)
	}
	var out []streamRecord
	for _, sh := range sd.StreamDescription.Shards {
		it, err := streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
			StreamArn: desc.Table.LatestStreamArn, ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			t.Fatal(err)
		}
		iter := it.ShardIterator
		for empty := 0; iter != nil && empty < 3; {
			recs, err := streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatal(err)
			}
			if len(recs.Records) == 0 {
				empty++
			}
			for _, r := range recs.Records {
				sk := ""
				if v, ok := r.Dynamodb.Keys["sk"].(*streamtypes.AttributeValueMemberS); ok {
					sk = v.Value
				}
				out = append(out, streamRecord{name: string(r.EventName), sk: sk})
			}
			iter = recs.NextShardIterator
		}
	}
	return out
}
