package esserver

import (
	"fmt"
	"math"
	"net/http"
	"sort"
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

// searchFixture100k is one index of 100,000 documents (200 bulks of 500),
// shared by the sub-benchmarks of BenchmarkAggAndMatchAt100k.
func searchFixture100k(b *testing.B) (*Server, *target) {
	b.Helper()
	srv, url := startLocal(b, b.TempDir(), time.Second)
	tg := &target{name: "local", url: url, local: srv, client: &http.Client{Timeout: time.Minute}}
	for i := 0; i < 200; i++ {
		tg.do(b, "POST", "/_bulk", bulkBody("search", i, 500)).must(b, 200)
	}
	tg.do(b, "POST", "/search/_refresh", nil).must(b, 200)
	return srv, tg
}

var benchAggQuery = map[string]any{
	"query": map[string]any{"bool": map[string]any{
		"must":   map[string]any{"match": map[string]any{"title": "event"}},
		"filter": map[string]any{"range": map[string]any{"n": map[string]any{"gte": 100}}},
	}},
	"sort": []any{map[string]any{"at": "desc"}},
	"aggs": map[string]any{"kinds": map[string]any{"terms": map[string]any{"field": "kind.keyword"}},
		"days": map[string]any{"date_histogram": map[string]any{"field": "at", "calendar_interval": "day"}}},
}

// latencies records request latencies and reports percentiles.
type latencies []time.Duration

func (l latencies) pct(p float64) float64 {
	s := append(latencies(nil), l...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return float64(s[max(i, 0)]) / float64(time.Millisecond)
}

// timed runs one request and returns its latency.
func timed(b *testing.B, tg *target, path string, q any) time.Duration {
	start := time.Now()
	r := tg.do(b, "POST", path, q)
	d := time.Since(start)
	if r.status != 200 || r.num(b, "hits.total.value") == 0 {
		b.Fatalf("search: %d %s", r.status, r.raw)
	}
	return d
}

// BenchmarkAggAndMatchAt100k measures searches over 100,000 documents. Each
// iteration runs the query twice, alternating the order: through the
// doc-value columns (columns.go) and the top-k pruning of match queries
// (topk.go), and through the per-document path that reads bleve's doc
// values for every hit and feeds the aggregations through bleve's facet
// hooks and scores every match (columns and pruning disabled on the index:
// the code path before either existed) as the baseline measured in the
// same run. Ratios are new/baseline: lower is better.
//
//   - bool_sort_aggs: bool (match + range filter), sort on a date, terms
//     and date_histogram aggregations; 80,000 hits (no pruning: sorted
//     on a field, and aggregations need every hit). Also run with the
//     range filter evaluated by bleve's range searcher rather than the
//     column of n (colfilter.go), everything else new: rangesearcher_*.
//   - match: a match query ("number 7") that matches every document, no
//     sort nor aggregation, hits.total counted up to 10,000: the pruned
//     path knows from the postings of "number" that more than 10,000
//     documents match, and once it holds 10 hits with "7" it scores only
//     the documents containing "7"; the baseline scores all 100,000.
//   - bulk_refresh_aggs: a _bulk of 500 updated documents with
//     refresh=true (bulk_* figures: columns are built lazily by searches,
//     never by writes or refreshes), then bool_sort_aggs, which builds the
//     columns of the segment the refresh added.
func BenchmarkAggAndMatchAt100k(b *testing.B) {
	srv, tg := searchFixture100k(b)
	ix := localIndex(b, srv, "search")
	// Warm both paths (and let bleve's background merges settle).
	for i := 0; i < 3; i++ {
		timed(b, tg, "/search/_search", benchAggQuery)
	}
	match := map[string]any{"query": map[string]any{"match": map[string]any{"title": "number 7"}}}
	report := func(b *testing.B, prefix string, cols, base latencies) {
		b.ReportMetric(cols.pct(0.5), prefix+"p50_ms")
		b.ReportMetric(cols.pct(0.99), prefix+"p99_ms")
		b.ReportMetric(base.pct(0.5), "docvalues_"+prefix+"p50_ms")
		b.ReportMetric(base.pct(0.99), "docvalues_"+prefix+"p99_ms")
		b.ReportMetric(cols.pct(0.5)/base.pct(0.5), prefix+"p50_ratio")
		b.ReportMetric(cols.pct(0.99)/base.pct(0.99), prefix+"p99_ratio")
	}
	// filtered: also run the query with its range filter evaluated by
	// bleve's range searcher instead of columns (colfilter.go; everything
	// else new), reported as rangesearcher_*.
	run := func(name string, bulk, filtered bool, q any) {
		b.Run(name, func(b *testing.B) {
			variants := 2
			if filtered {
				variants = 3
			}
			lats := make([]latencies, variants) // new, baseline, range searcher
			bulkLats := make([]latencies, variants)
			batch := 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j := 0; j < variants; j++ {
					v := (i + j) % variants
					off := v == 1
					ix.cols.disabled.Store(off)
					ix.noPrune.Store(off)
					ix.noColFilter.Store(v == 2)
					if bulk {
						batch++
						start := time.Now()
						tg.do(b, "POST", "/_bulk?refresh=true", bulkBody("search", batch%200, 500)).must(b, 200)
						bulkLats[v] = append(bulkLats[v], time.Since(start))
					}
					lats[v] = append(lats[v], timed(b, tg, "/search/_search", q))
				}
			}
			ix.cols.disabled.Store(false)
			ix.noPrune.Store(false)
			ix.noColFilter.Store(false)
			b.ReportMetric(0, "ns/op")
			report(b, "", lats[0], lats[1])
			if bulk {
				report(b, "bulk_", bulkLats[0], bulkLats[1])
			}
			if filtered {
				b.ReportMetric(lats[2].pct(0.5), "rangesearcher_p50_ms")
				b.ReportMetric(lats[2].pct(0.99), "rangesearcher_p99_ms")
			}
		})
	}
	run("bool_sort_aggs", false, true, benchAggQuery)
	run("match", false, false, match)
	run("bulk_refresh_aggs", true, false, benchAggQuery)
}
