package aggregator

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/internal/testenv"
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
	c := &Consumer{cfg: Config{RecentEvents: 64, WriteConcurrency: 4, ConflictRetries: 3}, table: &table{client: api, name: name, sessionTTL: time.Hour}}

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
