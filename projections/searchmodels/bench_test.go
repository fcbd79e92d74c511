package searchmodels_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/projections/elastic/esclient"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/projections/elastic"
	"github.com/eventpipe/eventpipe/projections/searchmodels"
)

var benchWords = []string{"milk", "bread", "report", "garden", "invoice", "piano", "tax", "car", "coffee", "letter", "plants", "dentist"}

// syntheticTodos computes todo events without storing them: todos
// TodoCreated events first, then TodoUpdated events round robin over the
// todos, events in all.
func syntheticTodos(todos, events int) []eventstore.Envelope {
	start := time.Now().Add(-time.Hour)
	out := make([]eventstore.Envelope, events)
	for k := range out {
		e := eventstore.Envelope{EventID: fmt.Sprintf("%026d", k), AggregateType: todo.AggregateType, SchemaVersion: 1,
			OccurredAt: start.Add(time.Duration(k) * time.Microsecond).UTC(), EventType: todo.TodoUpdated}
		i, seq := k%todos, int64(1+k/todos)
		if k < todos {
			e.EventType = todo.TodoCreated
		}
		e.AggregateID, e.Sequence = fmt.Sprintf("todo-%07d", i), seq
		e.Payload, _ = json.Marshal(todo.TodoData{Title: benchWords[k%len(benchWords)] + " " + benchWords[(k/7)%len(benchWords)],
			Message: "take " + fmt.Sprint(seq), Completed: k%3 == 0})
		out[k] = e
	}
	return out
}

// BenchmarkSearchProjectionVsRawBulk applies b.N×100 todo events (100
// todos, so every batch of 100 touches every todo once) to the todos
// search model in batches of 100, as the Runner's batches are, and
// writes the same documents with plain _bulk requests of the same size
// into another index: the baseline. It reports events/s of both and their
// ratio (the project's goal: ≥ 0.5). Nothing about time is asserted.
func BenchmarkSearchProjectionVsRawBulk(b *testing.B) {
	ctx := context.Background()
	w := newWorld(b)
	p := searchmodels.TodoSearch{}
	const batch = 100
	events := syntheticTodos(batch, b.N*batch)
	// The raw baseline writes the documents the projection writes: each
	// batch's folded documents, precomputed here.
	docs := map[string]json.RawMessage{}
	var bodies [][]byte
	for lo := 0; lo < len(events); lo += batch {
		var body bytes.Buffer
		for _, e := range events[lo : lo+batch] {
			doc, err := p.Apply(docs[e.AggregateID], e)
			if err != nil {
				b.Fatal(err)
			}
			docs[e.AggregateID] = doc
			action, _ := json.Marshal(map[string]any{"index": map[string]any{"_id": e.AggregateID}})
			body.Write(action)
			body.WriteByte('\n')
			body.Write(doc)
			body.WriteByte('\n')
		}
		bodies = append(bodies, body.Bytes())
	}
	raw := w.prefix + "raw"
	if err := esclient.Do(ctx, w.es, esapi.IndicesCreateRequest{Index: raw, Body: strings.NewReader(mustJSON(b, p.IndexBody()))}, nil); err != nil {
		b.Fatal(err)
	}
	a := w.applier(p)
	b.ResetTimer()
	var rawTime, applierTime time.Duration
	for i, body := range bodies {
		start := time.Now()
		var res struct {
			Errors bool `json:"errors"`
		}
		if err := esclient.Do(ctx, w.es, esapi.BulkRequest{Index: raw, Body: bytes.NewReader(body)}, &res); err != nil || res.Errors {
			b.Fatalf("raw _bulk: %v (item errors %v)", err, res.Errors)
		}
		rawTime += time.Since(start)
		start = time.Now()
		out, err := a.Apply(ctx, events[i*batch:(i+1)*batch])
		if err != nil || out.Applied != batch {
			b.Fatalf("apply: %+v %v", out, err)
		}
		applierTime += time.Since(start)
	}
	b.StopTimer()
	rawRate, applierRate := float64(len(events))/rawTime.Seconds(), float64(len(events))/applierTime.Seconds()
	b.ReportMetric(rawRate, "raw_bulk_events/s")
	b.ReportMetric(applierRate, "projection_events/s")
	b.ReportMetric(applierRate/rawRate, "projection/raw")
}

// BenchmarkTodoSearchAt100kDocuments loads 100,000 todo documents and
// runs b.N two-word searches through searchmodels.TodoIndex (the code
// behind GET /todo/search) and the same _search bodies sent raw, in turns.
// It reports the p50 and p99 latency of each in milliseconds and the
// ratio of the p50s. Nothing about time is asserted.
func BenchmarkTodoSearchAt100kDocuments(b *testing.B) {
	ctx := context.Background()
	w := newWorld(b)
	p := searchmodels.TodoSearch{}
	const docs = 100_000
	alias := w.alias(p)
	if err := elastic.EnsureIndex(ctx, w.es, p, alias); err != nil {
		b.Fatal(err)
	}
	var body bytes.Buffer
	flush := func() {
		var res struct {
			Errors bool `json:"errors"`
		}
		if err := esclient.Do(ctx, w.es, esapi.BulkRequest{Index: alias, Body: bytes.NewReader(body.Bytes())}, &res); err != nil || res.Errors {
			b.Fatalf("load: %v (item errors %v)", err, res.Errors)
		}
		body.Reset()
	}
	for i := range docs {
		d := searchmodels.TodoDoc{ID: fmt.Sprintf("todo-%07d", i), Title: benchWords[i%len(benchWords)] + " " + benchWords[(i/7)%len(benchWords)],
			Message: "remember the " + benchWords[(i/31)%len(benchWords)], Sequence: 1, Deleted: i%50 == 0}
		action, _ := json.Marshal(map[string]any{"index": map[string]any{"_id": d.ID}})
		doc, _ := json.Marshal(d)
		body.Write(action)
		body.WriteByte('\n')
		body.Write(doc)
		body.WriteByte('\n')
		if (i+1)%5000 == 0 {
			flush()
		}
	}
	if err := esclient.Do(ctx, w.es, esapi.IndicesRefreshRequest{Index: []string{alias}}, nil); err != nil {
		b.Fatal(err)
	}
	idx := searchmodels.TodoIndex{Client: w.es, Alias: alias}
	rng := rand.New(rand.NewPCG(1, 1))
	var viaIndex, viaRaw []time.Duration
	b.ResetTimer()
	for range b.N {
		q := benchWords[rng.IntN(len(benchWords))] + " " + benchWords[rng.IntN(len(benchWords))]
		start := time.Now()
		if _, err := idx.Search(ctx, searchmodels.TodoQuery{Q: q, Page: searchmodels.Page{Size: 10}}); err != nil {
			b.Fatal(err)
		}
		viaIndex = append(viaIndex, time.Since(start))
		raw := mustJSON(b, map[string]any{"size": 10, "track_total_hits": true, "query": map[string]any{"bool": map[string]any{
			"must":     map[string]any{"multi_match": map[string]any{"query": q, "fields": []string{"title^2", "message"}, "type": "cross_fields", "operator": "and"}},
			"must_not": map[string]any{"term": map[string]any{"deleted": true}}}}})
		start = time.Now()
		if err := esclient.Do(ctx, w.es, esapi.SearchRequest{Index: []string{alias}, Body: strings.NewReader(raw)}, nil); err != nil {
			b.Fatal(err)
		}
		viaRaw = append(viaRaw, time.Since(start))
	}
	b.StopTimer()
	pct := func(d []time.Duration, q float64) float64 {
		slices.Sort(d)
		return float64(d[min(len(d)-1, int(q*float64(len(d))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(viaIndex, 0.50), "search_p50_ms")
	b.ReportMetric(pct(viaIndex, 0.99), "search_p99_ms")
	b.ReportMetric(pct(viaRaw, 0.50), "raw_p50_ms")
	b.ReportMetric(pct(viaRaw, 0.99), "raw_p99_ms")
	b.ReportMetric(pct(viaIndex, 0.50)/pct(viaRaw, 0.50), "search/raw_p50")
}

func mustJSON(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}
