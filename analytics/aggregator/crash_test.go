package aggregator

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/dev/testenv"
	migrations "github.com/eventpipe/eventpipe/migrations/dynamodb"
	"github.com/eventpipe/eventpipe/rollup"
)

// failingPuts fails every PutItem (a session write) while fail is set:
// a crash after a batch's buckets were written and before its sessions
// were.
type failingPuts struct {
	API
	fail atomic.Bool
}

func (f *failingPuts) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if f.fail.Load() {
		return nil, errors.New("injected: the process died before writing sessions")
	}
	return f.API.PutItem(ctx, in, opt...)
}

// TestABatchRedeliveredAfterACrashBetweenBucketsAndSessionsCountsOnce
// writes a batch's buckets but not its sessions, then delivers the
// partition again cut at other boundaries (the first half, then all of
// it, as after a crash before the offsets were committed): every count
// ends exact.
func TestABatchRedeliveredAfterACrashBetweenBucketsAndSessionsCountsOnce(t *testing.T) {
	ctx := context.Background()
	db := testenv.DynamoDB(t)
	name := testenv.UniqueName(t, "analytics")
	if err := migrations.CreateAnalyticsTable(ctx, db, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, db, name) })
	api := &failingPuts{API: db}
	c := &Consumer{cfg: Config{RecentEvents: 64, WriteConcurrency: 4, ConflictRetries: 3}, log: slog.Default(),
		table: &table{client: api, name: name, sessionTTL: liveSessionTTL()}}

	var ds []delivery
	for i := range 40 {
		d := deliveryAt(int64(i), at(9+i%3, i), []string{"page_view", "click"}[i%2], "/x", "u"+string(rune('a'+i%4)))
		d.event.SessionID = []string{"s1", "s2", "s3"}[i%3]
		ds = append(ds, d)
	}
	api.fail.Store(true)
	if _, err := c.applyBatch(ctx, "site", 0, ds[:30], 29); err == nil {
		t.Fatal("the injected failure did not fail the batch")
	}
	api.fail.Store(false)
	out1, err := c.applyBatch(ctx, "site", 0, ds[:15], 14)
	if err != nil {
		t.Fatal(err)
	}
	out2, err := c.applyBatch(ctx, "site", 0, ds, 39)
	if err != nil {
		t.Fatal(err)
	}
	if out1.Redelivered == 0 || out2.Redelivered == 0 {
		t.Errorf("no contribution was skipped by a watermark (%+v, %+v): the crash did not leave buckets written", out1, out2)
	}
	if out2.Duplicates != 15 {
		t.Errorf("second delivery: %d copies recognised, want the 15 sessions already hold", out2.Duplicates)
	}

	st, err := analytics.New(analytics.Config{Client: db, Table: name})
	if err != nil {
		t.Fatal(err)
	}
	day, err := st.AggregationsBetween(ctx, "site", rollup.Daily, at(0, 0), at(0, 0))
	if err != nil || len(day) != 1 {
		t.Fatalf("daily = %v, %v", day, err)
	}
	if d := day[0]; d.Events != 40 || d.PageViews != 20 || d.Sessions != 3 || d.UniqueUsers != 4 {
		t.Errorf("daily = %+v, want 40 events, 20 page views, 3 sessions, 4 users", d)
	}
	var sessions int64
	for _, id := range []string{"s1", "s2", "s3"} {
		s, ok, err := st.Session(ctx, "site", id)
		if err != nil || !ok {
			t.Fatalf("session %s: %v %v", id, ok, err)
		}
		sessions += s.EventCount
	}
	if sessions != 40 {
		t.Errorf("sessions hold %d events, want 40", sessions)
	}
}

// landedButFailed performs every first write of an item and then reports
// it failed (a timeout after DynamoDB applied it).
type landedButFailed struct {
	API
	mu   sync.Mutex
	seen map[string]bool
}

func (l *landedButFailed) first(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[key] {
		return false
	}
	l.seen[key] = true
	return true
}

func (l *landedButFailed) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := l.API.UpdateItem(ctx, in, opt...)
	if err == nil && l.first(keyOf(in.Key)) {
		return nil, errors.New("injected: the answer was lost after the write landed")
	}
	return out, err
}

func (l *landedButFailed) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := l.API.PutItem(ctx, in, opt...)
	if err == nil && l.first(keyOf(in.Item)) {
		return nil, errors.New("injected: the answer was lost after the write landed")
	}
	return out, err
}

// TestAWriteThatLandedButFailedIsNotCountedTwice retries each item whose
// write failed after it landed: the retry reads the item again, its
// condition finds the watermark (or version) moved, and nothing is added
// twice.
func TestAWriteThatLandedButFailedIsNotCountedTwice(t *testing.T) {
	ctx := context.Background()
	db := testenv.DynamoDB(t)
	name := testenv.UniqueName(t, "analytics")
	if err := migrations.CreateAnalyticsTable(ctx, db, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, db, name) })
	api := &landedButFailed{API: db, seen: map[string]bool{}}
	c := &Consumer{cfg: Config{RecentEvents: 64, WriteConcurrency: 4, ConflictRetries: 5}, log: slog.Default(),
		table: &table{client: api, name: name, sessionTTL: liveSessionTTL()}}
	var ds []delivery
	for i := range 12 {
		d := deliveryAt(int64(i), at(9+i%2, i), "page_view", "/x", "u")
		d.event.SessionID = []string{"s1", "s2"}[i%2]
		ds = append(ds, d)
	}
	out, err := c.applyBatch(ctx, "site", 3, ds, 11)
	if err != nil {
		t.Fatal(err)
	}
	if out.Conflicts == 0 {
		t.Errorf("no write was retried: %+v", out)
	}
	st, err := analytics.New(analytics.Config{Client: db, Table: name})
	if err != nil {
		t.Fatal(err)
	}
	day, err := st.AggregationsBetween(ctx, "site", rollup.Daily, at(0, 0), at(0, 0))
	if err != nil || len(day) != 1 || day[0].Events != 12 || day[0].Sessions != 2 {
		t.Fatalf("daily = %+v, %v; want 12 events, 2 sessions", day, err)
	}
	for _, id := range []string{"s1", "s2"} {
		if s, _, err := st.Session(ctx, "site", id); err != nil || s.EventCount != 6 {
			t.Errorf("session %s = %+v, %v; want 6 events", id, s, err)
		}
	}
}
