package analytics_test

import (
	"context"
	crand "crypto/rand"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"

	"github.com/eventpipe/eventpipe/analytics"
)

// benchInputs is n browsing events of one source as a tracker would
// send them: page views and clicks of 50 sessions, each with a URL, a
// referrer, a user agent, a user for most and two properties.
func benchInputs(n int) []analytics.EventInput {
	in := make([]analytics.EventInput, n)
	for i := range in {
		e := analytics.EventInput{
			Type:       "page_view",
			SessionID:  fmt.Sprintf("01JBENCHSESSION%011d", i%50),
			URL:        "/products/" + strconv.Itoa(i%200),
			Referrer:   "https://www.example.com/search?q=bench",
			UserAgent:  "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36",
			Properties: map[string]any{"plan": "pro", "position": i % 10},
		}
		if i%3 == 0 {
			e.Type = "click"
		}
		if i%5 != 0 {
			e.UserID = "user-" + strconv.Itoa(i%40)
		}
		in[i] = e
	}
	return in
}

// rawItems builds by hand, from the documented layout (doc.go), the
// items Ingest writes for in: a ULID, a random shard of 100, createdAt
// now and a ttl seven days later.
func rawItems(sourceID string, in []analytics.EventInput) []map[string]types.AttributeValue {
	now := time.Now().UTC()
	entropy := ulid.Monotonic(crand.Reader, 0)
	out := make([]map[string]types.AttributeValue, len(in))
	for i, e := range in {
		id := ulid.MustNew(ulid.Timestamp(now), entropy).String()
		shard := rand.IntN(100)
		it := map[string]types.AttributeValue{
			"pk":        s("SOURCE#" + sourceID + "#SHARD#" + strconv.Itoa(shard)),
			"sk":        s("EVENT#" + id),
			"sourceId":  s(sourceID),
			"shard":     n(int64(shard)),
			"eventId":   s(id),
			"type":      s(e.Type),
			"sessionId": s(e.SessionID),
			"url":       s(e.URL),
			"referrer":  s(e.Referrer),
			"userAgent": s(e.UserAgent),
			"createdAt": s(now.Format(time.RFC3339Nano)),
			"ttl":       n(now.Add(7 * 24 * time.Hour).Unix()),
		}
		if e.UserID != "" {
			it["userId"] = s(e.UserID)
		}
		props, err := json.Marshal(e.Properties)
		if err != nil {
			panic(err)
		}
		it["properties"] = s(string(props))
		out[i] = it
	}
	return out
}

// rawBatchWrite writes items with BatchWriteItem, 25 a call, one call
// after the other as Ingest does, sending unprocessed items again after
// a 50 ms backoff (Ingest's first backoff).
func rawBatchWrite(ctx context.Context, db *dynamodb.Client, table string, items []map[string]types.AttributeValue) error {
	for lo := 0; lo < len(items); lo += 25 {
		reqs := make([]types.WriteRequest, 0, 25)
		for _, it := range items[lo:min(lo+25, len(items))] {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: it}})
		}
		for len(reqs) > 0 {
			out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
			if err != nil {
				return err
			}
			if reqs = out.UnprocessedItems[table]; len(reqs) > 0 {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	return nil
}

// discardWriter is a BatchWriteItem that accepts every item at once
// and keeps none: Ingest against it costs only its own work.
type discardWriter struct{ analytics.API }

func (discardWriter) BatchWriteItem(context.Context, *dynamodb.BatchWriteItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return &dynamodb.BatchWriteItemOutput{}, nil
}

// BenchmarkIngestVsRawBatchWriteItem ingests b.N×10 events with
// Store.Ingest, 100 an Ingest call, and writes the same number of items
// by hand with raw BatchWriteItem calls of 25 (the baseline: the items
// prebuilt with the documented attributes and the same sizes, the calls
// one after the other as Ingest makes them, unprocessed items sent
// again), each side into a fresh table. The two alternate call by call,
// each going first every other time, so that both see the same load on
// the shared DynamoDB Local (whose speed swings while other tests use
// it; calls of 100 rather than the 500 of MaxBatch alternate five times
// as often and change nothing else, as Ingest writes 25 a call either
// way). It reports events/s of both and ingest/raw (the project's goal:
// ≥ 0.8), and Ingest's own work per event (validation, JSON, ULID, item
// and request building) measured on 10,000 events against a
// BatchWriteItem that does nothing. Nothing about time is asserted.
func BenchmarkIngestVsRawBatchWriteItem(b *testing.B) {
	ctx := context.Background()
	st, db, table := newStore(b, nil)
	_, _, rawTable := newStore(b, nil)
	const perCall = 100
	events := b.N * 10
	in := benchInputs(events)
	raw := rawItems("bench", in)
	ingest := func(st *analytics.Store, in []analytics.EventInput) {
		out, err := st.Ingest(ctx, "bench", in)
		if err != nil {
			b.Fatal(err)
		}
		if len(out) != len(in) {
			b.Fatalf("ingested %d of %d events", len(out), len(in))
		}
	}
	b.ResetTimer()
	var ingestTime, rawTime time.Duration
	for k, lo := 0, 0; lo < events; k, lo = k+1, lo+perCall {
		hi := min(lo+perCall, events)
		sides := []func(){
			func() {
				start := time.Now()
				if err := rawBatchWrite(ctx, db, rawTable, raw[lo:hi]); err != nil {
					b.Fatal(err)
				}
				rawTime += time.Since(start)
			},
			func() {
				start := time.Now()
				ingest(st, in[lo:hi])
				ingestTime += time.Since(start)
			},
		}
		sides[k%2]()
		sides[1-k%2]()
	}
	b.StopTimer()
	if got, gotRaw := countItems(b, db, table), countItems(b, db, rawTable); got != events || gotRaw != events {
		b.Fatalf("the tables hold %d ingested and %d raw items, want %d each", got, gotRaw, events)
	}
	discard, err := analytics.New(analytics.Config{Client: discardWriter{}})
	if err != nil {
		b.Fatal(err)
	}
	whole := benchInputs(perCall)
	start := time.Now()
	const calls = 100
	for range calls {
		ingest(discard, whole)
	}
	own := time.Since(start)
	ingestRate, rawRate := float64(events)/ingestTime.Seconds(), float64(events)/rawTime.Seconds()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ingestRate, "events/s")
	b.ReportMetric(rawRate, "raw_events/s")
	b.ReportMetric(ingestRate/rawRate, "ingest/raw")
	b.ReportMetric(float64(own.Microseconds())/(calls*perCall), "ingest_cpu_us/event")
}
