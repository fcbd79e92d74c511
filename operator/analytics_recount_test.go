package operator_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/operator"
	"github.com/eventpipe/eventpipe/rollup"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// scratch is a from-scratch count of a source's raw events, written
// independently of the aggregator: per bucket and per session.
type scratch struct {
	buckets  map[string]analytics.Aggregation // period#bucket
	sessions map[string]analytics.Session
}

func countFromScratch(t *testing.T, store *analytics.Store, source string) scratch {
	t.Helper()
	events, err := store.SourceEvents(context.Background(), source)
	if err != nil {
		t.Fatal(err)
	}
	sc := scratch{buckets: map[string]analytics.Aggregation{}, sessions: map[string]analytics.Session{}}
	users := map[string]map[string]bool{}
	bump := func(p analytics.Period, at time.Time, f func(a *analytics.Aggregation)) {
		k := string(p) + "#" + p.Bucket(at)
		a := sc.buckets[k]
		f(&a)
		sc.buckets[k] = a
	}
	for _, e := range events { // in id order, so in time order
		for _, p := range []analytics.Period{analytics.Hourly, analytics.Daily} {
			bump(p, e.CreatedAt, func(a *analytics.Aggregation) {
				a.Events++
				if e.Type == "page_view" {
					a.PageViews++
				}
				if a.PerType == nil {
					a.PerType = map[string]int64{}
				}
				a.PerType[e.Type]++
			})
			if e.UserID != "" {
				k := string(p) + "#" + p.Bucket(e.CreatedAt)
				if users[k] == nil {
					users[k] = map[string]bool{}
				}
				users[k][e.UserID] = true
			}
		}
		s, seen := sc.sessions[e.SessionID]
		if !seen {
			s = analytics.Session{SessionID: e.SessionID, FirstSeenAt: e.CreatedAt, UserID: e.UserID}
			for _, p := range []analytics.Period{analytics.Hourly, analytics.Daily} {
				bump(p, e.CreatedAt, func(a *analytics.Aggregation) { a.Sessions++ })
			}
		}
		s.EventCount++
		s.LastSeenAt = e.CreatedAt
		if s.UserID == "" {
			s.UserID = e.UserID
		}
		if e.URL != "" {
			if s.EntryURL == "" {
				s.EntryURL = e.URL
			}
			s.ExitURL = e.URL
		}
		sc.sessions[e.SessionID] = s
	}
	for k, set := range users {
		sk := rollup.NewSketch()
		for u := range set {
			sk.Insert([]byte(u))
		}
		a := sc.buckets[k]
		a.UniqueUsers = int64(sk.Estimate())
		sc.buckets[k] = a
	}
	return sc
}

// differences lists where the table's aggregations of [lo, hi) and its
// sessions differ from the scratch count.
func (sc scratch) differences(t *testing.T, store *analytics.Store, source string, lo, hi time.Time) []string {
	t.Helper()
	ctx := context.Background()
	var diffs []string
	for _, p := range []analytics.Period{analytics.Hourly, analytics.Daily} {
		items, err := store.AggregationsBetween(ctx, source, p, lo, hi.Add(-time.Nanosecond))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]analytics.Aggregation{}
		for _, a := range items {
			got[string(p)+"#"+a.Bucket] = a
		}
		for k := range maps.Keys(sc.buckets) {
			if _, ok := got[k]; strings.HasPrefix(k, string(p)+"#") && !ok {
				got[k] = analytics.Aggregation{}
			}
		}
		for k, a := range got {
			want := sc.buckets[k]
			for typ, n := range a.PerType {
				if n == 0 {
					delete(a.PerType, typ)
				}
			}
			if a.Events != want.Events || a.PageViews != want.PageViews || a.Sessions != want.Sessions ||
				a.UniqueUsers != want.UniqueUsers || !maps.Equal(a.PerType, want.PerType) {
				diffs = append(diffs, fmt.Sprintf("%s: table %d events %d views %d sessions %v %d users; scratch %d %d %d %v %d",
					k, a.Events, a.PageViews, a.Sessions, a.PerType, a.UniqueUsers, want.Events, want.PageViews, want.Sessions, want.PerType, want.UniqueUsers))
			}
		}
	}
	for id, want := range sc.sessions {
		got, ok, err := store.Session(ctx, source, id)
		if err != nil {
			t.Fatal(err)
		}
		if !ok || got.EventCount != want.EventCount || !got.FirstSeenAt.Equal(want.FirstSeenAt) || !got.LastSeenAt.Equal(want.LastSeenAt) ||
			got.EntryURL != want.EntryURL || got.ExitURL != want.ExitURL || got.UserID != want.UserID {
			diffs = append(diffs, fmt.Sprintf("session %s: table %+v; scratch %+v", id, got, want))
		}
	}
	return diffs
}

// waitEqual waits until the table equals a fresh scratch count.
func waitEqual(t *testing.T, store *analytics.Store, source string, lo, hi time.Time, what string) {
	t.Helper()
	integration.Await(t, what+": the table to equal a count from scratch", func() error {
		if diffs := countFromScratch(t, store, source).differences(t, store, source, lo, hi); len(diffs) > 0 {
			return fmt.Errorf("the table still differs:\n%s", strings.Join(diffs, "\n"))
		}
		return nil
	})
}

// TestAnalyticsRecountOfARangeEqualsAFreshCountBesideTheLiveAggregator
// ingests sessions into three past hours (some inside the range, one
// starting before it, one running on into the current hour) and lets the
// relay and the aggregation consumer count them; then corrupts an hourly
// aggregation and a session by hand and, while events keep being ingested
// into the current hour and counted live, recounts the range. The
// corrupted items are rewritten, the others reported unchanged, and
// after late events dated inside the range are ingested on top and the
// live ingestion stops, every hourly and daily aggregation and every
// session equals a count from scratch of the raw events: nothing counted
// twice at the range's edges, nothing lost.
func TestAnalyticsRecountOfARangeEqualsAFreshCountBesideTheLiveAggregator(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ep := rigs.Endpoints(t)
	_, ep.Postgres = testenv.PostgresSchema(t, "recount")
	ddb := testenv.DynamoDB(t)
	ep.LeasesTable, ep.AnalyticsTable = testenv.UniqueName(t, "leases"), testenv.UniqueName(t, "analytics")
	t.Cleanup(func() { testenv.DeleteTable(t, ddb, ep.LeasesTable); testenv.DeleteTable(t, ddb, ep.AnalyticsTable) })
	if _, err := eventpipe.Migrate(ctx, eventpipe.MigrateConfig{Process: eventpipe.Process{Endpoints: ep, Logger: slog.New(slog.DiscardHandler)}}); err != nil {
		t.Fatal(err)
	}
	store, err := eventpipe.OpenAnalytics(ctx, ep, nil)
	if err != nil {
		t.Fatal(err)
	}
	const source = "shop"
	now := time.Now().UTC()
	hour := now.Truncate(time.Hour)
	from, to := hour.Add(-4*time.Hour), hour.Add(-time.Hour)
	at := func(h int, minutes int) *time.Time {
		v := hour.Add(time.Duration(h)*time.Hour + time.Duration(minutes)*time.Minute)
		return &v
	}
	ev := func(typ, session, user, url string, when *time.Time) analytics.EventInput {
		return analytics.EventInput{Type: typ, SessionID: session, UserID: user, URL: url, CreatedAt: when}
	}
	ingest := func(in ...analytics.EventInput) {
		t.Helper()
		if _, err := store.Ingest(ctx, source, in); err != nil {
			t.Error(err)
		}
	}
	var past []analytics.EventInput
	for i := range 6 {
		h := -4 + i%3
		s := fmt.Sprintf("s%d", i)
		user := []string{"", "u1", "u2"}[i%3]
		past = append(past, ev("page_view", s, user, "/", at(h, 5+i)), ev("click", s, user, "", at(h, 10+i)),
			ev("page_view", s, user, fmt.Sprintf("/p%d", i), at(h, 20+i)), ev("signup", s, user, "", at(h, 30+i)))
	}
	past = append(past,
		ev("page_view", "edge-before", "u3", "/a", at(-5, 50)), ev("page_view", "edge-before", "u3", "/b", at(-4, 5)),
		ev("page_view", "edge-after", "u4", "/x", at(-2, 55)))
	ingest(past...)

	rel, err := eventpipe.NewRelay(ctx, eventpipe.RelayConfig{Process: eventpipe.Process{Endpoints: ep}, Stream: eventpipe.RelayAnalytics, DiscoveryInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer rel.Close()
	consumers, err := eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{Process: eventpipe.Process{Endpoints: ep}, Names: []string{eventpipe.AnalyticsAggregator}})
	if err != nil {
		t.Fatal(err)
	}
	defer consumers.Close()
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = rel.Run(runCtx) }()
	go func() { defer wg.Done(); _ = consumers.Run(runCtx) }()
	defer func() { stop(); wg.Wait() }()
	lo, hi := hour.Add(-48*time.Hour), hour.Add(2*time.Hour)
	waitEqual(t, store, source, lo, hi, "the aggregator's count")

	// Corrupt an hourly aggregation and a session by hand.
	corrupt := func(sk, expr string, values map[string]types.AttributeValue) {
		t.Helper()
		_, err := ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(ep.AnalyticsTable),
			Key: map[string]types.AttributeValue{
				analytics.AttrPK: &types.AttributeValueMemberS{Value: analytics.SourceKey(source)},
				analytics.AttrSK: &types.AttributeValueMemberS{Value: sk},
			},
			UpdateExpression: aws.String(expr), ExpressionAttributeValues: values,
			ExpressionAttributeNames: map[string]string{"#e": analytics.AttrEvents, "#c": analytics.AttrPerTypePrefix + "click", "#s": analytics.AttrSessions},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	corrupt(analytics.AggregationKey(source, analytics.Hourly, analytics.HourBucket(*at(-3, 0))).SK, "SET #e = :e, #c = :c, #s = :s",
		map[string]types.AttributeValue{":e": n("12345"), ":c": n("99"), ":s": n("7")})
	_, err = ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(ep.AnalyticsTable),
		Key: map[string]types.AttributeValue{
			analytics.AttrPK: &types.AttributeValueMemberS{Value: analytics.SourceKey(source)},
			analytics.AttrSK: &types.AttributeValueMemberS{Value: analytics.SessionKey(source, "s2").SK},
		},
		UpdateExpression:          aws.String("SET #n = :n, #x = :x"),
		ExpressionAttributeNames:  map[string]string{"#n": analytics.AttrEventCount, "#x": analytics.AttrExitURL},
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": n("77"), ":x": &types.AttributeValueMemberS{Value: "/nowhere"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if diffs := countFromScratch(t, store, source).differences(t, store, source, lo, hi); len(diffs) != 2 {
		t.Fatalf("after corrupting: %d differences, want 2 (the hourly aggregation and session s2):\n%s", len(diffs), strings.Join(diffs, "\n"))
	}

	// Live ingestion into the current hour, counted by the aggregator
	// while the recount runs.
	var live sync.WaitGroup
	var liveStop atomic.Bool
	live.Add(1)
	go func() {
		defer live.Done()
		for i := 0; !liveStop.Load(); i++ {
			ingest(ev("page_view", fmt.Sprintf("live-%d", i%5), "u9", "/live", nil), ev("click", "edge-after", "u4", "", nil))
			time.Sleep(20 * time.Millisecond)
		}
	}()
	time.Sleep(300 * time.Millisecond)
	res, err := operator.AnalyticsRecount(ctx, operator.AnalyticsRecountConfig{Process: eventpipe.Process{Endpoints: ep}, Source: source, From: from, To: to, Actor: "carol", Reason: "hand edit"})
	if err != nil {
		liveStop.Store(true)
		live.Wait()
		t.Fatal(err)
	}
	if res.BucketsChanged != 1 || res.SessionsChanged != 1 || len(res.Sessions) != 6 || res.Events != 6*4+2 {
		t.Errorf("recount: %d of %d aggregations, %d of %d sessions rewritten, %d events; want 1, 1 of 6, 26: %+v",
			res.BucketsChanged, len(res.Buckets), res.SessionsChanged, len(res.Sessions), res.Events, res)
	}
	for _, b := range res.Buckets {
		if b.Changed && (b.Bucket != analytics.HourBucket(*at(-3, 0)) || b.Was.Events != 12345 || b.Now.Events != 8) {
			t.Errorf("rewrote %+v", b)
		}
	}

	// Late events dated inside the range, ingested after the recount:
	// the live aggregator adds them on top, once.
	ingest(ev("page_view", "late", "u5", "/late", at(-3, 45)), ev("click", "s1", "u1", "", at(-3, 50)))
	time.Sleep(time.Second)
	liveStop.Store(true)
	live.Wait()
	waitEqual(t, store, source, lo, hi, "after the recount, live and late events")

	actions, err := operator.OperatorActions(ctx, operator.OperatorActionsConfig{Process: eventpipe.Process{Endpoints: ep}, Action: operator.ActionAnalyticsRecount})
	if err != nil || len(actions) != 1 || actions[0].Actor != "carol" || !strings.Contains(actions[0].Result, "1 of") {
		t.Fatalf("operator actions %+v, %v", actions, err)
	}
}

// TestAnalyticsRecountRefusesAnOpenOrExpiredRange: ranges the recount
// cannot count exactly are refused with a *eventstore.ValidationError
// before anything is read or recorded.
func TestAnalyticsRecountRefusesAnOpenOrExpiredRange(t *testing.T) {
	hour := time.Now().UTC().Truncate(time.Hour)
	for name, r := range map[string][2]time.Time{
		"still open":         {hour.Add(-time.Hour), hour.Add(time.Hour)},
		"not whole hours":    {hour.Add(-3*time.Hour + time.Minute), hour.Add(-time.Hour)},
		"empty":              {hour.Add(-2 * time.Hour), hour.Add(-2 * time.Hour)},
		"raw events expired": {hour.Add(-30 * 24 * time.Hour), hour.Add(-29 * 24 * time.Hour)},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := operator.AnalyticsRecount(context.Background(), operator.AnalyticsRecountConfig{Source: "shop", From: r[0], To: r[1]})
			var val *eventstore.ValidationError
			if !errors.As(err, &val) {
				t.Fatalf("%v, want *eventstore.ValidationError", err)
			}
		})
	}
}
