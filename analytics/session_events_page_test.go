package analytics_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/analytics"
)

// TestSessionEventsPageReadsShardsPastOneQueryPage stores a session's
// events as one in twenty of a shard's, so that one DynamoDB call of a
// shard (at most 100 items evaluated) finds fewer than a page of them,
// and pages through the session: every event once, in id order, each
// page at most the limit.
func TestSessionEventsPageReadsShardsPastOneQueryPage(t *testing.T) {
	st, _, _ := newStore(t, func(c *analytics.Config) { c.Shards = 1 })
	ctx := context.Background()
	start := time.Now().Add(-time.Hour).UTC()
	var want []string
	for batch := range 2 {
		var in []analytics.EventInput
		for i := range 300 {
			at := start.Add(time.Duration(batch*300+i) * time.Millisecond)
			session := "other"
			if i%20 == 0 {
				session = "s1"
			}
			in = append(in, analytics.EventInput{Type: "page_view", SessionID: session, CreatedAt: &at})
		}
		stored, err := st.Ingest(ctx, "site", in)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range stored {
			if e.SessionID == "s1" {
				want = append(want, e.EventID)
			}
		}
	}
	slices.Sort(want)
	const limit = 7
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > len(want) {
			t.Fatal("the cursor does not advance")
		}
		page, next, err := st.SessionEventsPage(ctx, "site", "s1", limit, cursor)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > limit {
			t.Fatalf("a page of %d events, limit %d", len(page), limit)
		}
		for _, e := range page {
			got = append(got, e.EventID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if !slices.Equal(got, want) {
		t.Errorf("paged %d events, want the session's %d in id order (first difference at %d)", len(got), len(want), firstDiff(got, want))
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
