package analytics_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/eventstore"
)

// TestIngestSpreadsBatchesOverShardsAndReadsEachSessionBackExactly
// ingests 3 sessions × 200 interleaved events in three batches (plus
// decoys under the same session ids in another source) and reads every
// session back across the 100 shards: exactly its own events, in ULID
// order, which is ingest order.
func TestIngestSpreadsBatchesOverShardsAndReadsEachSessionBackExactly(t *testing.T) {
	ctx := context.Background()
	st, db, table := newStore(t, func(c *analytics.Config) {
		c.Now = steppingClock(time.Now(), time.Second)
	})
	sessions := []string{"01SESSIONA", "01SESSIONB", "01SESSIONC"}
	want := map[string][]string{} // session → event ids in ingest order
	shards := map[int]bool{}
	for batch := range 3 {
		in := make([]analytics.EventInput, 0, 200)
		for i := range 200 {
			in = append(in, analytics.EventInput{
				Type: "page_view", SessionID: sessions[i%3], URL: fmt.Sprintf("/b%d/p%d", batch, i),
				Properties: map[string]any{"i": i},
			})
		}
		events, err := st.Ingest(ctx, "site", in)
		if err != nil {
			t.Fatalf("batch %d: %v", batch, err)
		}
		if len(events) != len(in) {
			t.Fatalf("batch %d: %d events stored, want %d", batch, len(events), len(in))
		}
		for i, e := range events {
			if e.SessionID != in[i].SessionID || e.URL != in[i].URL {
				t.Fatalf("batch %d: event %d is %+v, out of input order", batch, i, e)
			}
			want[e.SessionID] = append(want[e.SessionID], e.EventID)
			shards[e.Shard] = true
		}
	}
	if len(shards) <= 50 {
		t.Errorf("600 events used %d distinct shards of 100, want more than 50", len(shards))
	}
	if _, err := st.Ingest(ctx, "decoy", []analytics.EventInput{{Type: "click", SessionID: sessions[0]}}); err != nil {
		t.Fatal(err)
	}
	if got := countItems(t, db, table); got != 601 {
		t.Fatalf("table holds %d items, want 601", got)
	}
	for _, sid := range sessions {
		events, err := st.SessionEvents(ctx, "site", sid)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range events {
			if e.SessionID != sid || e.SourceID != "site" {
				t.Fatalf("session %s returned %+v", sid, e)
			}
			ids = append(ids, e.EventID)
		}
		if !slices.IsSorted(ids) {
			t.Errorf("session %s: events not in ULID order", sid)
		}
		if !slices.Equal(ids, want[sid]) {
			t.Errorf("session %s: got %d events, want the %d ingested, in ingest order", sid, len(ids), len(want[sid]))
		}
	}
	none, err := st.SessionEvents(ctx, "site", "unknown")
	if err != nil || len(none) != 0 {
		t.Errorf("SessionEvents of an unknown session = %d events, %v; want none", len(none), err)
	}
}

// TestIngestWritesTheDocumentedEventItem reads an ingested event back
// with GetItem under the documented key and checks every attribute.
func TestIngestWritesTheDocumentedEventItem(t *testing.T) {
	ctx := context.Background()
	// Now, not a fixed day: the table has TTL enabled and DynamoDB Local
	// deletes an item whose ttl has passed about a second after it lands.
	now := time.Now().UTC().Truncate(time.Second)
	st, db, table := newStore(t, func(c *analytics.Config) {
		c.Now = func() time.Time { return now }
		c.Rand = func(n int) int { return 42 % n }
	})
	created := now.Add(-time.Minute).In(time.FixedZone("CEST", 2*3600))
	events, err := st.Ingest(ctx, "my-site", []analytics.EventInput{{
		Type: "click", SessionID: "s1", UserID: "u_01", URL: "/pricing", Referrer: "https://example.com/",
		Properties: map[string]any{"buttonId": "cta", "n": 12345678901234567, "none": nil},
		UserAgent:  "test/1.0", CreatedAt: &created,
	}})
	if err != nil {
		t.Fatal(err)
	}
	e := events[0]
	if e.Shard != 42 || !e.CreatedAt.Equal(created) || e.CreatedAt.Location() != time.UTC {
		t.Errorf("event %+v: want shard 42 and createdAt %s in UTC", e, created)
	}
	out, err := db.GetItem(ctx, &ddb.GetItemInput{
		TableName: aws.String(table),
		Key:       map[string]types.AttributeValue{"pk": s("SOURCE#my-site#SHARD#42"), "sk": s("EVENT#" + e.EventID)},
	})
	if err != nil || out.Item == nil {
		t.Fatalf("GetItem = %v, %v", out, err)
	}
	want := map[string]string{
		"sourceId": "my-site", "shard": "42", "eventId": e.EventID, "type": "click", "sessionId": "s1",
		"userId": "u_01", "url": "/pricing", "referrer": "https://example.com/", "userAgent": "test/1.0",
		"properties": `{"buttonId":"cta","n":12345678901234567,"none":null}`,
		"createdAt":  now.Add(-time.Minute).Format(time.RFC3339Nano),
		"ttl":        strconv.FormatInt(now.Add(-time.Minute).Add(7*24*time.Hour).Unix(), 10),
	}
	for name, v := range want {
		var got string
		switch a := out.Item[name].(type) {
		case *types.AttributeValueMemberS:
			got = a.Value
		case *types.AttributeValueMemberN:
			got = a.Value
		}
		if got != v {
			t.Errorf("attribute %s = %q, want %q", name, got, v)
		}
	}
	if len(out.Item) != len(want)+2 {
		t.Errorf("item has %d attributes, want %d", len(out.Item), len(want)+2)
	}
	read, err := st.SessionEvents(ctx, "my-site", "s1")
	if err != nil || len(read) != 1 {
		t.Fatalf("SessionEvents = %v, %v", read, err)
	}
	props, _ := json.Marshal(read[0].Properties)
	if string(props) != want["properties"] || !read[0].ExpiresAt.Equal(e.ExpiresAt) {
		t.Errorf("read back properties %s, expires %s; want %s, %s", props, read[0].ExpiresAt, want["properties"], e.ExpiresAt)
	}
}

// TestIngestRefusesBadInputAndStoresNothing offers batches with one bad
// event (or a bad request) and checks the typed error and that the table
// stays empty.
func TestIngestRefusesBadInputAndStoresNothing(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	st, db, table := newStore(t, func(c *analytics.Config) {
		c.Now = func() time.Time { return now }
		c.MaxBatch = 50
	})
	ok := analytics.EventInput{Type: "page_view", SessionID: "s1", URL: "/"}
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	cases := []struct {
		name   string
		source string
		bad    func(*analytics.EventInput)
		n      int // batch size, default 3 with the bad event at index 1
		index  int
		field  string
	}{
		{name: "missing sessionId", bad: func(e *analytics.EventInput) { e.SessionID = "" }, index: 1, field: "sessionId"},
		{name: "sessionId with #", bad: func(e *analytics.EventInput) { e.SessionID = "a#b" }, index: 1, field: "sessionId"},
		{name: "sessionId too long", bad: func(e *analytics.EventInput) { e.SessionID = strings.Repeat("s", 129) }, index: 1, field: "sessionId"},
		{name: "missing type", bad: func(e *analytics.EventInput) { e.Type = "" }, index: 1, field: "type"},
		{name: "type with spaces", bad: func(e *analytics.EventInput) { e.Type = "Page View" }, index: 1, field: "type"},
		{name: "userId with #", bad: func(e *analytics.EventInput) { e.UserID = "u#1" }, index: 1, field: "userId"},
		{name: "url too long", bad: func(e *analytics.EventInput) { e.URL = "/" + strings.Repeat("x", 2048) }, index: 1, field: "url"},
		{name: "referrer not UTF-8", bad: func(e *analytics.EventInput) { e.Referrer = "\xff" }, index: 1, field: "referrer"},
		{name: "far-future createdAt", bad: func(e *analytics.EventInput) { e.CreatedAt = at(6 * time.Minute) }, index: 1, field: "createdAt"},
		{name: "too-old createdAt", bad: func(e *analytics.EventInput) { e.CreatedAt = at(-7*24*time.Hour - time.Second) }, index: 1, field: "createdAt"},
		{name: "oversize event", bad: func(e *analytics.EventInput) { e.Properties = map[string]any{"blob": strings.Repeat("x", 8<<10)} }, index: 1, field: "event"},
		{name: "properties not JSON", bad: func(e *analytics.EventInput) { e.Properties = map[string]any{"x": math.NaN()} }, index: 1, field: "properties"},
		{name: "source with #", source: "a#b", index: -1, field: "sourceId"},
		{name: "source with a path", source: "../x", index: -1, field: "sourceId"},
		{name: "empty source", source: "-", index: -1, field: "sourceId"},
		{name: "source too long", source: strings.Repeat("s", 65), index: -1, field: "sourceId"},
		{name: "empty batch", n: -1, index: -1, field: "events"},
		{name: "batch too large", n: 51, index: -1, field: "events"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			size := c.n
			switch c.n {
			case 0:
				size = 3
			case -1:
				size = 0
			}
			in := make([]analytics.EventInput, size)
			for i := range in {
				in[i] = ok
			}
			if c.bad != nil {
				c.bad(&in[1])
			}
			source := "site"
			if c.source != "" {
				source = c.source
			}
			if c.source == "-" {
				source = ""
			}
			events, err := st.Ingest(ctx, source, in)
			var ve *eventstore.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Ingest = %v, want a *eventstore.ValidationError", err)
			}
			index := -1
			if ee := (*analytics.EventError)(nil); errors.As(err, &ee) {
				index = ee.Index
			}
			if index != c.index || ve.Field != c.field || events != nil {
				t.Errorf("error %q (index %d, field %s) with %d events; want index %d, field %s, none", err, index, ve.Field, len(events), c.index, c.field)
			}
			if n := countItems(t, db, table); n != 0 {
				t.Fatalf("table holds %d items after a refused batch", n)
			}
		})
	}
	for _, d := range []time.Duration{5 * time.Minute, -7*24*time.Hour + time.Second} {
		e := ok
		e.CreatedAt = at(d)
		if _, err := st.Ingest(ctx, "site", []analytics.EventInput{e}); err != nil {
			t.Errorf("createdAt now%+v at the edge of the window: %v", d, err)
		}
	}
}
