package esserver

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

func benchTarget(b *testing.B) *target {
	_, url := startLocal(b, b.TempDir(), time.Second)
	return &target{name: "local", url: url, client: &http.Client{Timeout: time.Minute}, prefix: "b-"}
}

func bulkBody(index string, batch, size int) string {
	var sb strings.Builder
	for i := 0; i < size; i++ {
		fmt.Fprintf(&sb, "{\"index\":{\"_index\":%q,\"_id\":\"%d-%d\"}}\n", index, batch, i)
		fmt.Fprintf(&sb, "{\"title\":\"event number %d of batch %d\",\"kind\":\"k%d\",\"n\":%d,\"at\":\"2024-01-%02dT10:00:00Z\"}\n", i, batch, i%20, i, 1+i%28)
	}
	return sb.String()
}

// BenchmarkBulkIndex500 measures one _bulk request of 500 small documents
// (acknowledged once durable in the write-ahead log).
func BenchmarkBulkIndex500(b *testing.B) {
	tg := benchTarget(b)
	tg.do(b, "PUT", "/bench", map[string]any{"mappings": map[string]any{"properties": map[string]any{
		"title": map[string]any{"type": "text"}, "kind": map[string]any{"type": "keyword"},
		"n": map[string]any{"type": "long"}, "at": map[string]any{"type": "date"}}}}).must(b, 200)
	bodies := make([]string, 64)
	for i := range bodies {
		bodies[i] = bulkBody("bench", i, 500)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := tg.do(b, "POST", "/_bulk", bodies[i%len(bodies)])
		if r.status != 200 || r.get("errors") != false {
			b.Fatalf("bulk: %d", r.status)
		}
	}
}

// BenchmarkSearch measures a match query with a filter, a sort and a terms
// aggregation over 20,000 documents.
func BenchmarkSearch(b *testing.B) {
	tg := benchTarget(b)
	for i := 0; i < 40; i++ {
		tg.do(b, "POST", "/_bulk", bulkBody("search", i, 500)).must(b, 200)
	}
	tg.do(b, "POST", "/search/_refresh", nil).must(b, 200)
	queries := map[string]map[string]any{
		"match": {"query": map[string]any{"match": map[string]any{"title": "number 7"}}},
		"bool_sort_aggs": {
			"query": map[string]any{"bool": map[string]any{
				"must":   map[string]any{"match": map[string]any{"title": "event"}},
				"filter": map[string]any{"range": map[string]any{"n": map[string]any{"gte": 100}}},
			}},
			"sort": []any{map[string]any{"at": "desc"}},
			"aggs": map[string]any{"kinds": map[string]any{"terms": map[string]any{"field": "kind.keyword"}},
				"days": map[string]any{"date_histogram": map[string]any{"field": "at", "calendar_interval": "day"}}},
		},
	}
	for name, q := range queries {
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				r := tg.do(b, "POST", "/search/_search", q)
				if r.status != 200 || r.num(b, "hits.total.value") == 0 {
					b.Fatalf("search: %d %s", r.status, r.raw)
				}
			}
		})
	}
}
