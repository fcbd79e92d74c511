package analytics_test

import (
	"context"
	"encoding/base64"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/rollup"
)

var day0 = time.Date(2026, 5, 12, 0, 0, 0, 0, time.UTC)

// sessionID is the ULID (zero entropy) of day0 plus minutes, so later
// sessions sort later.
func sessionID(minutes int) string {
	return ulid.MustNew(ulid.Timestamp(day0.Add(time.Duration(minutes)*time.Minute)), nil).String()
}

// sessionExpiry is the ttl of sessionItem's sessions, whole seconds.
var sessionExpiry = time.Now().Add(90 * 24 * time.Hour).Truncate(time.Second).UTC()

// sessionItem is a session in the documented layout; a user adds the GSI1 keys.
// Its ttl is 90 days from now, not from day0: the table has TTL enabled,
// and DynamoDB Local deletes an expired item about a second after it is
// written (day0 + 90 days is in the past since August 2026), so a test
// that took longer than that found its sessions gone.
func sessionItem(source, id, user string) map[string]types.AttributeValue {
	it := map[string]types.AttributeValue{
		"pk": s("SOURCE#" + source), "sk": s("SESSION#" + id),
		"eventCount": n(12), "entryUrl": s("/"), "exitUrl": s("/pricing"),
		"firstSeenAt": s("2026-05-12T14:00:00Z"), "lastSeenAt": s("2026-05-12T14:05:40.5Z"),
		"duration": n(340), "ttl": n(sessionExpiry.Unix()),
	}
	if user != "" {
		it["userId"], it["gsi1pk"], it["gsi1sk"] = s(user), s("USER#"+user), s("SESSION#"+id)
	}
	return it
}

// aggregationItem is an aggregation in the documented layout.
func aggregationItem(source, period, bucket string, events int64) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": s("SOURCE#" + source), "sk": s("AGG#" + period + "#" + bucket),
		"events": n(events), "pageViews": n(events / 2), "sessions": n(events / 10),
		"type#page_view": n(events / 2), "type#click": n(events - events/2),
		"wm#0": n(41), "wm#3": n(7),
		"users#0": &types.AttributeValueMemberB{Value: sketchOf("u1", "u2")},
		"users#3": &types.AttributeValueMemberB{Value: sketchOf("u2", "u3")},
	}
}

// sketchOf is the stored sketch of values.
func sketchOf(values ...string) []byte {
	sk := rollup.NewSketch()
	for _, v := range values {
		sk.Insert([]byte(v))
	}
	b, err := sk.MarshalBinary()
	if err != nil {
		panic(err)
	}
	return b
}

// TestSessionReadsTheDocumentedItem writes a session item by hand and
// reads it with Session (AP3); an unknown session is not found.
func TestSessionReadsTheDocumentedItem(t *testing.T) {
	ctx := context.Background()
	st, db, table := newStore(t, nil)
	id := sessionID(0)
	put(t, db, table, sessionItem("site", id, "u_01"))
	got, ok, err := st.Session(ctx, "site", id)
	if err != nil || !ok {
		t.Fatalf("Session = %v, %v", ok, err)
	}
	want := analytics.Session{
		SourceID: "site", SessionID: id, UserID: "u_01", EventCount: 12, EntryURL: "/", ExitURL: "/pricing",
		FirstSeenAt: time.Date(2026, 5, 12, 14, 0, 0, 0, time.UTC), LastSeenAt: time.Date(2026, 5, 12, 14, 5, 40, 5e8, time.UTC),
		DurationSeconds: 340, ExpiresAt: sessionExpiry,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Session =\n  %+v\nwant\n  %+v", got, want)
	}
	if _, ok, err := st.Session(ctx, "site", "unknown"); ok || err != nil {
		t.Errorf("Session of an unknown id = %v, %v; want not found", ok, err)
	}
	var ve *eventstore.ValidationError
	if _, _, err := st.Session(ctx, "site", "a#b"); !errors.As(err, &ve) || ve.Field != "sessionId" {
		t.Errorf("Session with '#' in the id = %v, want a *eventstore.ValidationError on sessionId", err)
	}
}

// collect reads every page of a listing with page size limit and returns
// the items' names and the number of pages.
func collect[T any](t *testing.T, limit int, list func(limit int, cursor string) ([]T, string, error), name func(T) string) ([]string, int) {
	t.Helper()
	var names []string
	cursor, pages := "", 0
	for {
		items, next, err := list(limit, cursor)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(items) > limit {
			t.Fatalf("page of %d items, limit %d", len(items), limit)
		}
		for _, it := range items {
			names = append(names, name(it))
		}
		if next == "" {
			return names, pages
		}
		cursor = next
	}
}

func sessionName(s analytics.Session) string { return s.SourceID + "/" + s.SessionID }

// TestRecentSessionsPagesNewestFirst lists a source's sessions (AP4) two
// at a time: newest ULID first, none of another source, no aggregation.
func TestRecentSessionsPagesNewestFirst(t *testing.T) {
	ctx := context.Background()
	st, db, table := newStore(t, nil)
	var want []string
	for i := range 5 {
		id := sessionID(i)
		put(t, db, table, sessionItem("site", id, ""), sessionItem("other", id, ""))
		want = append(want, "site/"+id)
	}
	put(t, db, table, aggregationItem("site", "hourly", "2026-05-12T14:00:00Z", 10))
	slices.Reverse(want)
	got, pages := collect(t, 2, func(limit int, cursor string) ([]analytics.Session, string, error) {
		return st.RecentSessions(ctx, "site", limit, cursor)
	}, sessionName)
	if !slices.Equal(got, want) || pages != 3 {
		t.Errorf("listed %v in %d pages, want %v in 3", got, pages, want)
	}
}

// TestUserSessionsListsAUsersSessionsAcrossSources reads gsi1 (AP5).
func TestUserSessionsListsAUsersSessionsAcrossSources(t *testing.T) {
	ctx := context.Background()
	st, db, table := newStore(t, nil)
	a, b, c, d := sessionID(1), sessionID(2), sessionID(3), sessionID(4)
	put(t, db, table, sessionItem("site", a, "u1"), sessionItem("other", b, "u1"), sessionItem("site", c, "u2"),
		sessionItem("site", d, ""))
	got, _ := collect(t, 1, func(limit int, cursor string) ([]analytics.Session, string, error) {
		return st.UserSessions(ctx, "u1", limit, cursor)
	}, sessionName)
	if want := []string{"other/" + b, "site/" + a}; !slices.Equal(got, want) {
		t.Errorf("sessions of u1: %v, want %v", got, want)
	}
}

func bucketName(a analytics.Aggregation) string { return string(a.Period) + " " + a.Bucket }

// TestAggregationsPagesNewestFirstAndRoundTripsEveryAttribute lists
// hourly and daily aggregations (AP6).
func TestAggregationsPagesNewestFirstAndRoundTripsEveryAttribute(t *testing.T) {
	ctx := context.Background()
	st, db, table := newStore(t, nil)
	var hours []string
	for h := range 5 {
		b := analytics.HourBucket(day0.Add(time.Duration(h) * time.Hour))
		put(t, db, table, aggregationItem("site", "hourly", b, int64(100+h)))
		hours = append(hours, "hourly "+b)
	}
	put(t, db, table, aggregationItem("site", "daily", "2026-05-12", 1000), aggregationItem("site", "daily", "2026-05-13", 2000),
		aggregationItem("other", "hourly", "2026-05-12T09:00:00Z", 1), sessionItem("site", sessionID(0), ""))
	slices.Reverse(hours)
	got, pages := collect(t, 2, func(limit int, cursor string) ([]analytics.Aggregation, string, error) {
		return st.Aggregations(ctx, "site", analytics.Hourly, limit, cursor)
	}, bucketName)
	if !slices.Equal(got, hours) || pages != 3 {
		t.Errorf("hourly: %v in %d pages, want %v in 3", got, pages, hours)
	}
	daily, next, err := st.Aggregations(ctx, "site", analytics.Daily, 0, "")
	if err != nil || next != "" || len(daily) != 2 {
		t.Fatalf("daily = %v, %q, %v", daily, next, err)
	}
	want := analytics.Aggregation{
		SourceID: "site", Period: analytics.Daily, Bucket: "2026-05-13", Start: day0.Add(24 * time.Hour),
		Events: 2000, PageViews: 1000, Sessions: 200, PerType: map[string]int64{"page_view": 1000, "click": 1000},
		UniqueUsers: 3,
	}
	merged, err := rollup.UnmarshalSketch(daily[0].UsersSketch)
	if err != nil || merged.Estimate() != 3 {
		t.Errorf("UsersSketch estimates %v (%v), want the 3 users of both partitions", merged, err)
	}
	daily[0].UsersSketch = nil
	if !reflect.DeepEqual(daily[0], want) {
		t.Errorf("newest daily aggregation =\n  %+v\nwant\n  %+v", daily[0], want)
	}
}

// TestAggregationsBetweenIsInclusiveOldestFirst reads ranges (AP7): from
// the bucket holding from to the bucket holding to.
func TestAggregationsBetweenIsInclusiveOldestFirst(t *testing.T) {
	ctx := context.Background()
	st, db, table := newStore(t, nil)
	for h := range 6 {
		put(t, db, table, aggregationItem("site", "hourly", analytics.HourBucket(day0.Add(time.Duration(h)*time.Hour)), 1))
	}
	for d := range 3 {
		put(t, db, table, aggregationItem("site", "daily", analytics.DayBucket(day0.AddDate(0, 0, d)), 1))
	}
	cases := []struct {
		period   analytics.Period
		from, to time.Time
		want     []string
	}{
		{analytics.Hourly, day0.Add(90 * time.Minute), day0.Add(3*time.Hour + 59*time.Minute), []string{
			"hourly 2026-05-12T01:00:00Z", "hourly 2026-05-12T02:00:00Z", "hourly 2026-05-12T03:00:00Z"}},
		{analytics.Hourly, day0.Add(5 * time.Hour), day0.Add(9 * time.Hour), []string{"hourly 2026-05-12T05:00:00Z"}},
		{analytics.Daily, day0.Add(time.Hour), day0.AddDate(0, 0, 1), []string{"daily 2026-05-12", "daily 2026-05-13"}},
		{analytics.Daily, day0.AddDate(0, 0, 5), day0.AddDate(0, 0, 9), nil},
	}
	for _, c := range cases {
		aggs, err := st.AggregationsBetween(ctx, "site", c.period, c.from, c.to)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, a := range aggs {
			got = append(got, bucketName(a))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s from %s to %s: %v, want %v", c.period, c.from, c.to, got, c.want)
		}
	}
	for _, r := range [][2]time.Time{{day0.Add(time.Hour), day0}, {day0, day0.Add(10_000 * time.Hour)}} {
		var ve *eventstore.ValidationError
		if _, err := st.AggregationsBetween(ctx, "site", analytics.Hourly, r[0], r[1]); !errors.As(err, &ve) || ve.Field != "to" {
			t.Errorf("range %s–%s: %v, want a *eventstore.ValidationError on to", r[0], r[1], err)
		}
	}
}

// TestListingsRefuseBadCursorsLimitsAndPeriods checks that a cursor is
// only good for the listing that made it.
func TestListingsRefuseBadCursorsLimitsAndPeriods(t *testing.T) {
	ctx := context.Background()
	st, db, table := newStore(t, nil)
	for i := range 3 {
		put(t, db, table, sessionItem("site", sessionID(i), "u1"),
			aggregationItem("site", "hourly", analytics.HourBucket(day0.Add(time.Duration(i)*time.Hour)), 1))
	}
	_, sessionsNext, err := st.RecentSessions(ctx, "site", 1, "")
	if err != nil || sessionsNext == "" {
		t.Fatalf("RecentSessions = %q, %v", sessionsNext, err)
	}
	_, userNext, err := st.UserSessions(ctx, "u1", 1, "")
	if err != nil || userNext == "" {
		t.Fatalf("UserSessions = %q, %v", userNext, err)
	}
	_, hourlyNext, err := st.Aggregations(ctx, "site", analytics.Hourly, 1, "")
	if err != nil || hourlyNext == "" {
		t.Fatalf("Aggregations = %q, %v", hourlyNext, err)
	}
	garbage := base64.RawURLEncoding.EncodeToString([]byte(`{"pk":1}`))
	cases := []struct {
		name  string
		call  func() error
		field string
	}{
		{"not base64", func() error { _, _, err := st.RecentSessions(ctx, "site", 1, "!!!"); return err }, "cursor"},
		{"not a key", func() error { _, _, err := st.RecentSessions(ctx, "site", 1, garbage); return err }, "cursor"},
		{"another source's cursor", func() error { _, _, err := st.RecentSessions(ctx, "other", 1, sessionsNext); return err }, "cursor"},
		{"a table cursor on the index", func() error { _, _, err := st.UserSessions(ctx, "u1", 1, sessionsNext); return err }, "cursor"},
		{"another user's cursor", func() error { _, _, err := st.UserSessions(ctx, "u2", 1, userNext); return err }, "cursor"},
		{"an hourly cursor for daily", func() error { _, _, err := st.Aggregations(ctx, "site", analytics.Daily, 1, hourlyNext); return err }, "cursor"},
		{"a session cursor for aggregations", func() error {
			_, _, err := st.Aggregations(ctx, "site", analytics.Hourly, 1, sessionsNext)
			return err
		}, "cursor"},
		{"negative limit", func() error { _, _, err := st.RecentSessions(ctx, "site", -1, ""); return err }, "limit"},
		{"limit over 1000", func() error { _, _, err := st.UserSessions(ctx, "u1", 1001, ""); return err }, "limit"},
		{"weekly period", func() error { _, _, err := st.Aggregations(ctx, "site", "weekly", 1, ""); return err }, "period"},
		{"bad source", func() error { _, _, err := st.RecentSessions(ctx, "a#b", 1, ""); return err }, "sourceId"},
		{"bad user", func() error { _, _, err := st.UserSessions(ctx, "", 1, ""); return err }, "userId"},
		{"bad session of events", func() error { _, err := st.SessionEvents(ctx, "site", ""); return err }, "sessionId"},
	}
	for _, c := range cases {
		var ve *eventstore.ValidationError
		var ee *analytics.EventError
		if err := c.call(); !errors.As(err, &ve) || ve.Field != c.field || errors.As(err, &ee) {
			t.Errorf("%s: %v, want a *eventstore.ValidationError on %s about no event", c.name, err, c.field)
		}
	}
	// Each cursor continues its own listing.
	if page, _, err := st.RecentSessions(ctx, "site", 1, sessionsNext); err != nil || len(page) != 1 || page[0].SessionID != sessionID(1) {
		t.Errorf("second page of sessions = %v, %v", page, err)
	}
}

// TestUndecodableItemIsADecodeError checks that a stored item the store
// cannot read is a permanent *eventstore.DecodeError naming the item and
// the attribute.
func TestUndecodableItemIsADecodeError(t *testing.T) {
	ctx := context.Background()
	st, db, table := newStore(t, nil)
	it := sessionItem("site", "s1", "")
	it["eventCount"] = s("twelve")
	put(t, db, table, it)
	_, _, err := st.Session(ctx, "site", "s1")
	var de *eventstore.DecodeError
	if !errors.As(err, &de) || !eventstore.IsPermanent(err) {
		t.Fatalf("Session of a broken item = %v, want a *eventstore.DecodeError", err)
	}
	if de.Field != "attribute eventCount" || !strings.Contains(de.What, "SOURCE#site/SESSION#s1") {
		t.Errorf("DecodeError %+v, want attribute eventCount of SOURCE#site/SESSION#s1", de)
	}
}
