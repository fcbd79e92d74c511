package aggregator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/internal/ddbattr"
	migrations "github.com/eventpipe/eventpipe/migrations/dynamodb"
)

// consumerBeforeWrite plays the consumer once: just before the recount's
// first write of the item with sort key sk, a late event is ingested and
// applied to that item as the consumer applies one (ADD its measures,
// move its partition's watermark), after the recount read the raw events.
type consumerBeforeWrite struct {
	API
	sk       string
	late     func()
	injected atomic.Int32
}

func (c *consumerBeforeWrite) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if sk, ok := in.Key[analytics.AttrSK].(*types.AttributeValueMemberS); ok && sk.Value == c.sk && c.injected.Add(1) == 1 {
		c.late()
	}
	return c.API.UpdateItem(ctx, in, opt...)
}

// TestRecountRereadsAnItemTheConsumerWroteBetweenItsReadAndWrite: the
// consumer applies an event (ingested after the recount read the raw
// events) to an aggregation between the recount's read of it and its
// write. The write's condition (the item's counters and watermarks as
// read) fails, the recount reads the item and the raw events again and
// writes the count with that event in it: counted once, not lost, and
// the consumer's watermark kept.
func TestRecountRereadsAnItemTheConsumerWroteBetweenItsReadAndWrite(t *testing.T) {
	ctx := context.Background()
	db, table := newAnalyticsTable(t)
	store, err := analytics.New(analytics.Config{Client: db, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	hour := time.Now().UTC().Truncate(time.Hour)
	from, to := hour.Add(-5*time.Hour), hour.Add(-3*time.Hour)
	at := func(h, m int) *time.Time {
		v := from.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute)
		return &v
	}
	var in []analytics.EventInput
	for i := range 10 {
		in = append(in, analytics.EventInput{Type: "page_view", SessionID: []string{"a", "b"}[i%2], URL: "/", CreatedAt: at(i%2, i)})
	}
	if _, err := store.Ingest(ctx, "site", in); err != nil {
		t.Fatal(err)
	}
	target := analytics.AggregationKey("site", analytics.Hourly, analytics.HourBucket(*at(0, 0)))
	injecting := &consumerBeforeWrite{API: db, sk: target.SK, late: func() {
		if _, err := store.Ingest(ctx, "site", []analytics.EventInput{{Type: "page_view", SessionID: "late", URL: "/late", CreatedAt: at(0, 30)}}); err != nil {
			t.Error(err)
		}
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(table), Key: target.Attributes(),
			UpdateExpression:          aws.String("SET #wm = :wm ADD #e :one, #pv :one, #t :one, #s :one"),
			ExpressionAttributeNames:  map[string]string{"#wm": analytics.AttrWatermarkPrefix + "0", "#e": analytics.AttrEvents, "#pv": analytics.AttrPageViews, "#t": analytics.AttrPerTypePrefix + "page_view", "#s": analytics.AttrSessions},
			ExpressionAttributeValues: map[string]types.AttributeValue{":wm": ddbattr.N(41), ":one": ddbattr.N(1)},
		})
		if err != nil {
			t.Error(err)
		}
	}}
	res, err := Recount(ctx, RecountConfig{Client: injecting, Table: table, Events: store, Source: "site", From: from, To: to})
	if err != nil {
		t.Fatal(err)
	}
	if injecting.injected.Load() < 2 {
		t.Fatalf("the recount wrote the item %d times, want a retry after the consumer's write", injecting.injected.Load())
	}
	got, err := store.AggregationsBetween(ctx, "site", analytics.Hourly, from, to.Add(-time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Events != 6 || got[0].PageViews != 6 || got[0].Sessions != 2 || got[1].Events != 5 || got[1].Sessions != 1 {
		t.Fatalf("hourly aggregations %+v, want 6 events and 2 sessions (a and late), then 5 events and 1 session (b)", got)
	}
	it, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: target.Attributes(), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if wm, _ := it.Item[analytics.AttrWatermarkPrefix+"0"].(*types.AttributeValueMemberN); wm == nil || wm.Value != "41" {
		t.Fatalf("the consumer's watermark is %v, want 41 kept", it.Item[analytics.AttrWatermarkPrefix+"0"])
	}
	if res.BucketsChanged != 2 || res.SessionsChanged != 2 {
		t.Errorf("result %+v, want both hours and sessions a and b written", res)
	}

	// Run again: the aggregations are right; session late, which the
	// consumer played here never wrote (and the first run did not know
	// when it read the sessions), is written now. A third run writes
	// nothing.
	again, err := Recount(ctx, RecountConfig{Client: db, Table: table, Events: store, Source: "site", From: from, To: to})
	if err != nil || again.BucketsChanged != 0 || again.SessionsChanged != 1 || !again.Sessions[2].Changed || again.Sessions[2].SessionID != "late" {
		t.Fatalf("second recount %+v, %v; want only session late written", again, err)
	}
	third, err := Recount(ctx, RecountConfig{Client: db, Table: table, Events: store, Source: "site", From: from, To: to})
	if err != nil || third.BucketsChanged != 0 || third.SessionsChanged != 0 {
		t.Fatalf("third recount %+v, %v; want nothing changed", third, err)
	}
}

// TestRecountConfigRefusesBadRanges: a table of ranges Recount cannot
// count exactly, each a *eventstore.ValidationError naming the field.
func TestRecountConfigRefusesBadRanges(t *testing.T) {
	store, err := analytics.New(analytics.Config{Client: nopAnalytics{}})
	if err != nil {
		t.Fatal(err)
	}
	hour := time.Now().UTC().Truncate(time.Hour)
	for name, c := range map[string]struct {
		from, to time.Time
		field    string
	}{
		"open":      {hour.Add(-2 * time.Hour), hour.Add(time.Hour), "To"},
		"half hour": {hour.Add(-150 * time.Minute), hour.Add(-time.Hour), "From"},
		"backwards": {hour.Add(-time.Hour), hour.Add(-2 * time.Hour), "To"},
		"expired":   {hour.Add(-10 * 24 * time.Hour), hour.Add(-9 * 24 * time.Hour), "From"},
		"zero":      {time.Time{}, hour.Add(-time.Hour), "From"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Recount(context.Background(), RecountConfig{Client: nopAPI{}, Events: store, Source: "s", From: c.from, To: c.to})
			var val *eventstore.ValidationError
			if !errors.As(err, &val) || val.Field != c.field {
				t.Fatalf("%v, want a *eventstore.ValidationError on %s", err, c.field)
			}
			if !strings.Contains(err.Error(), "recount") {
				t.Errorf("%v does not say what failed", err)
			}
		})
	}
}

type nopAPI struct{ API }
type nopAnalytics struct{ analytics.API }

// TestRecountRangeHoldsItsHoursAndOnlyItsWholeDays: a range from 22:00
// to 02:00 two days later holds 28 hours and one whole day; the days it
// cuts (partly counted by events outside the range) are not recounted.
func TestRecountRangeHoldsItsHoursAndOnlyItsWholeDays(t *testing.T) {
	from := time.Date(2026, 5, 11, 22, 0, 0, 0, time.UTC)
	got := rangeBuckets("s", from, from.Add(28*time.Hour))
	hours, days := 0, []string{}
	for b := range got {
		switch b.Period {
		case analytics.Hourly:
			hours++
		case analytics.Daily:
			days = append(days, b.Name)
		}
	}
	if hours != 28 || len(days) != 1 || days[0] != "2026-05-12" {
		t.Fatalf("%d hours, days %v; want 28 and [2026-05-12]", hours, days)
	}
}

// itemsRead is the analytics client, counting the items its queries read
// (ScannedCount).
type itemsRead struct {
	analytics.API
	n atomic.Int64
}

func (c *itemsRead) Query(ctx context.Context, in *dynamodb.QueryInput, opt ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := c.API.Query(ctx, in, opt...)
	if err == nil {
		c.n.Add(int64(out.ScannedCount))
	}
	return out, err
}

// TestRecountReadsOnlyItsRangeAndMargins recounts one hour of a source
// whose table also holds 400 raw events three days before it and 200
// from two hours and ten minutes after its end (the default margin is 2
// hours), and counts the raw items the recount's
// reads get from DynamoDB Local: only the 24 of the range and its
// margins, once per raw read (two in a pass without conflicts), whatever
// else the source holds. The sessions crossing an edge within the margin
// are told apart: one that started before the range is neither counted
// as started in it nor rewritten, one that goes on after it is counted
// but not rewritten, and the four inside are rewritten.
func TestRecountReadsOnlyItsRangeAndMargins(t *testing.T) {
	ctx := context.Background()
	db, table := newAnalyticsTable(t)
	reads := &itemsRead{API: db}
	store, err := analytics.New(analytics.Config{Client: reads, Table: table, Shards: 8})
	if err != nil {
		t.Fatal(err)
	}
	hour := time.Now().UTC().Truncate(time.Hour)
	from, to := hour.Add(-5*time.Hour), hour.Add(-4*time.Hour)
	at := func(d time.Duration) *time.Time { v := from.Add(d); return &v }
	ingest := func(in []analytics.EventInput) {
		t.Helper()
		for len(in) > 0 {
			n := min(len(in), 100)
			if _, err := store.Ingest(ctx, "site", in[:n]); err != nil {
				t.Fatal(err)
			}
			in = in[n:]
		}
	}
	var far []analytics.EventInput
	for i := range 400 {
		far = append(far, analytics.EventInput{Type: "page_view", SessionID: fmt.Sprintf("old-%d", i%40), URL: "/", CreatedAt: at(-72*time.Hour + time.Duration(i)*time.Second)})
	}
	for i := range 200 {
		far = append(far, analytics.EventInput{Type: "click", SessionID: fmt.Sprintf("new-%d", i%20), CreatedAt: at(3*time.Hour + 10*time.Minute + time.Duration(i)*time.Second)})
	}
	ingest(far)
	var near []analytics.EventInput
	for i := range 20 {
		near = append(near, analytics.EventInput{Type: "page_view", SessionID: fmt.Sprintf("in-%d", i%4), URL: "/", CreatedAt: at(time.Duration(i+1) * time.Minute)})
	}
	near = append(near,
		analytics.EventInput{Type: "page_view", SessionID: "edge-before", URL: "/a", CreatedAt: at(-30 * time.Minute)},
		analytics.EventInput{Type: "page_view", SessionID: "edge-before", URL: "/b", CreatedAt: at(30 * time.Minute)},
		analytics.EventInput{Type: "page_view", SessionID: "edge-after", URL: "/x", CreatedAt: at(40 * time.Minute)},
		analytics.EventInput{Type: "page_view", SessionID: "edge-after", URL: "/y", CreatedAt: at(90 * time.Minute)},
	)
	ingest(near)
	reads.n.Store(0)

	res, err := Recount(ctx, RecountConfig{Client: db, Table: table, Events: store, Source: "site", From: from, To: to})
	if err != nil {
		t.Fatal(err)
	}
	if got := reads.n.Load(); got != 2*int64(len(near)) {
		t.Fatalf("the recount read %d raw items, want %d (the %d of the range and its margins, twice); the source holds %d more", got, 2*len(near), len(near), len(far))
	}
	if res.Events != 22 {
		t.Errorf("%d raw events in the range, want 22", res.Events)
	}
	var rewritten []string
	for _, s := range res.Sessions {
		rewritten = append(rewritten, s.SessionID)
	}
	if fmt.Sprint(rewritten) != "[in-0 in-1 in-2 in-3]" {
		t.Errorf("sessions recounted %v, want the four inside the range", rewritten)
	}
	got, err := store.AggregationsBetween(ctx, "site", analytics.Hourly, from, to.Add(-time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Events != 22 || got[0].PageViews != 22 || got[0].Sessions != 5 {
		t.Fatalf("the hour's aggregation %+v, want 22 events and 5 sessions (in-0..3 and edge-after)", got)
	}
}

// newAnalyticsTable creates an analytics table for t, deleted when t ends.
func newAnalyticsTable(t *testing.T) (*dynamodb.Client, string) {
	t.Helper()
	db := testenv.DynamoDB(t)
	table := testenv.UniqueName(t, "analytics")
	if err := migrations.CreateAnalyticsTable(context.Background(), db, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, db, table) })
	return db, table
}
