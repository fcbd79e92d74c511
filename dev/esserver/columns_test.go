package esserver

import (
	"fmt"
	"math/rand"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2/index/scorch"
)

func localIndex(t testing.TB, srv *Server, name string) *index {
	t.Helper()
	srv.mu.RLock()
	defer srv.mu.RUnlock()
	ix := srv.indices[name]
	if ix == nil {
		t.Fatalf("no index %s", name)
	}
	return ix
}

// TestColumnsFollowRefresh: aggregations see a refresh's changes through
// rebuilt columns, not before the refresh, and a refresh that changes
// nothing builds nothing.
func TestColumnsFollowRefresh(t *testing.T) {
	srv, url := startLocal(t, t.TempDir(), time.Second)
	tg := &target{name: "local", url: url, local: srv, client: &http.Client{Timeout: 30 * time.Second}}
	tg.do(t, "PUT", "/cols", map[string]any{
		"settings": map[string]any{"refresh_interval": "-1"},
		"mappings": map[string]any{"properties": map[string]any{
			"k": map[string]any{"type": "keyword"}, "n": map[string]any{"type": "long"}}},
	}).must(t, 200)
	ix := localIndex(t, srv, "cols")
	var bulk strings.Builder
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&bulk, "{\"index\":{\"_id\":\"%d\"}}\n{\"k\":\"k%d\",\"n\":%d}\n", i, i%3, i)
	}
	tg.do(t, "POST", "/cols/_bulk?refresh=true", bulk.String()).must(t, 200)
	q := map[string]any{"size": 0, "aggs": map[string]any{
		"k": map[string]any{"terms": map[string]any{"field": "k"}, "aggs": map[string]any{"s": map[string]any{"sum": map[string]any{"field": "n"}}}},
		"n": map[string]any{"max": map[string]any{"field": "n"}}}}
	buckets := func() map[string]float64 {
		r := tg.do(t, "POST", "/cols/_search", q).must(t, 200)
		out := map[string]float64{"max": r.num(t, "aggregations.n.value")}
		for _, b := range r.get("aggregations.k.buckets").([]any) {
			bo := b.(map[string]any)
			out[bo["key"].(string)] = bo["doc_count"].(float64)
		}
		return out
	}
	got := buckets()
	if got["k0"] != 17 || got["k1"] != 17 || got["k2"] != 16 || got["max"] != 49 {
		t.Fatalf("buckets after first refresh: %v", got)
	}
	built := ix.cols.built.Load()
	if built == 0 {
		t.Fatal("no columns were built")
	}
	// A refresh that changes nothing reuses every column.
	tg.do(t, "POST", "/cols/_refresh", nil).must(t, 200)
	if g := buckets(); g["k0"] != 17 || ix.cols.built.Load() != built {
		t.Fatalf("no-op refresh: buckets %v, columns built %d -> %d", g, built, ix.cols.built.Load())
	}
	// Writes are invisible to aggregations until the next refresh.
	tg.do(t, "POST", "/cols/_bulk", "{\"index\":{\"_id\":\"0\"}}\n{\"k\":\"new\",\"n\":1000}\n{\"delete\":{\"_id\":\"1\"}}\n{\"index\":{\"_id\":\"x\"}}\n{\"k\":\"new\",\"n\":-5}\n").must(t, 200)
	if g := buckets(); g["new"] != 0 || g["k0"] != 17 || g["max"] != 49 {
		t.Fatalf("before refresh: %v", g)
	}
	tg.do(t, "POST", "/cols/_refresh", nil).must(t, 200)
	g := buckets()
	if g["new"] != 2 || g["k0"] != 16 || g["k1"] != 16 || g["max"] != 1000 {
		t.Fatalf("after refresh: %v", g)
	}
	if ix.cols.built.Load() <= built {
		t.Fatal("the refresh that changed documents built no columns")
	}
	// Only the columns of live segments are kept.
	for i := 0; i < 20; i++ {
		tg.do(t, "POST", "/cols/_doc/"+strconv.Itoa(i)+"?refresh=true", map[string]any{"k": "k9", "n": i})
		buckets()
	}
	segments := func() int {
		ix.engMu.RLock()
		defer ix.engMu.RUnlock()
		adv, err := ix.bleve.Advanced()
		if err != nil {
			t.Fatal(err)
		}
		r, err := adv.Reader()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		return len(r.(*scorch.IndexSnapshot).Segments())
	}
	// bleve merges in the background: compare when no merge finished
	// around the search.
	for attempt := 0; attempt < 50; attempt++ {
		before := segments()
		buckets()
		ix.cols.mu.Lock()
		cached := len(ix.cols.segs)
		ix.cols.mu.Unlock()
		if segments() != before {
			continue
		}
		if cached > before {
			t.Fatalf("columns cached for %d segments, the index has %d", cached, before)
		}
		return
	}
}

var tookRE = regexp.MustCompile(`"took":\d+`)

// TestColumnsEqualDocValues compares every aggregation and sort, read from
// columns, with the per-document doc-value path on a random corpus spread
// over several segments with updates and deletes.
func TestColumnsEqualDocValues(t *testing.T) {
	srv, url := startLocal(t, t.TempDir(), time.Second)
	tg := &target{name: "local", url: url, local: srv, client: &http.Client{Timeout: 30 * time.Second}}
	tg.do(t, "PUT", "/rnd", map[string]any{
		"settings": map[string]any{"refresh_interval": "-1"},
		"mappings": map[string]any{"properties": map[string]any{
			"k":     map[string]any{"type": "keyword"},
			"tags":  map[string]any{"type": "keyword"},
			"n":     map[string]any{"type": "long"},
			"f":     map[string]any{"type": "double"},
			"at":    map[string]any{"type": "date"},
			"ok":    map[string]any{"type": "boolean"},
			"title": map[string]any{"type": "text"},
			"nodv":  map[string]any{"type": "keyword", "doc_values": false},
		}},
	}).must(t, 200)
	// The same corpus without an explicit mapping (dynamic text+keyword).
	rng := rand.New(rand.NewSource(29))
	words := []string{"alpha", "beta", "gamma", "delta", "eps"}
	doc := func() map[string]any {
		d := map[string]any{"title": words[rng.Intn(len(words))] + " " + words[rng.Intn(len(words))]}
		if rng.Intn(10) > 0 {
			d["k"] = fmt.Sprintf("k%02d", rng.Intn(15))
		}
		if rng.Intn(3) > 0 {
			var tags []any
			for j := rng.Intn(4); j >= 0; j-- {
				tags = append(tags, words[rng.Intn(len(words))])
			}
			d["tags"] = tags
		}
		if rng.Intn(8) > 0 {
			if rng.Intn(6) == 0 {
				d["n"] = []any{rng.Intn(1000) - 200, rng.Intn(1000)}
			} else {
				d["n"] = rng.Intn(1000) - 200
			}
		}
		if rng.Intn(8) > 0 {
			d["f"] = float64(rng.Intn(100000))/7 - 1000
		}
		if rng.Intn(8) > 0 {
			d["at"] = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int63n(int64(400 * 24 * time.Hour)))).Format(time.RFC3339Nano)
		}
		if rng.Intn(5) > 0 {
			d["ok"] = rng.Intn(2) == 0
		}
		d["nodv"] = "x"
		return d
	}
	for round := 0; round < 6; round++ {
		var lines []any
		for i := 0; i < 150; i++ {
			id := fmt.Sprintf("d%d", rng.Intn(600))
			if rng.Intn(10) == 0 {
				lines = append(lines, map[string]any{"delete": map[string]any{"_index": "rnd", "_id": id}})
				continue
			}
			d := doc()
			lines = append(lines, map[string]any{"index": map[string]any{"_index": "rnd", "_id": id}}, d,
				map[string]any{"index": map[string]any{"_index": "rnd-dyn", "_id": id}}, d)
		}
		tg.do(t, "POST", "/_bulk", ndjson(lines...)).must(t, 200)
		tg.do(t, "POST", "/rnd,rnd-dyn/_refresh", nil).must(t, 200)
	}
	aggs := map[string]any{
		"k": map[string]any{"terms": map[string]any{"field": "k", "size": 5}, "aggs": map[string]any{
			"avg_f": map[string]any{"avg": map[string]any{"field": "f"}},
			"days":  map[string]any{"date_histogram": map[string]any{"field": "at", "calendar_interval": "month", "time_zone": "Europe/Paris"}, "aggs": map[string]any{"st": map[string]any{"stats": map[string]any{"field": "n"}}}},
		}},
		"tags":     map[string]any{"terms": map[string]any{"field": "tags", "order": map[string]any{"_key": "asc"}}, "aggs": map[string]any{"c": map[string]any{"cardinality": map[string]any{"field": "k"}}}},
		"nterms":   map[string]any{"terms": map[string]any{"field": "n", "size": 3}},
		"fterms":   map[string]any{"terms": map[string]any{"field": "f", "size": 3, "order": map[string]any{"_count": "asc"}}},
		"ok":       map[string]any{"terms": map[string]any{"field": "ok"}, "aggs": map[string]any{"sum": map[string]any{"sum": map[string]any{"field": "f"}}}},
		"hist":     map[string]any{"histogram": map[string]any{"field": "n", "interval": 50, "offset": 3}, "aggs": map[string]any{"vc": map[string]any{"value_count": map[string]any{"field": "tags"}}}},
		"week":     map[string]any{"date_histogram": map[string]any{"field": "at", "fixed_interval": "7d", "min_doc_count": 1}},
		"sum":      map[string]any{"sum": map[string]any{"field": "f"}},
		"min_at":   map[string]any{"min": map[string]any{"field": "at"}},
		"max":      map[string]any{"max": map[string]any{"field": "n"}},
		"card_f":   map[string]any{"cardinality": map[string]any{"field": "f"}},
		"card_tag": map[string]any{"cardinality": map[string]any{"field": "tags"}},
		"missing":  map[string]any{"terms": map[string]any{"field": "nope"}},
	}
	dynAggs := map[string]any{
		"k": map[string]any{"terms": map[string]any{"field": "k.keyword"}, "aggs": map[string]any{"m": map[string]any{"max": map[string]any{"field": "f"}}}},
		"t": map[string]any{"terms": map[string]any{"field": "tags.keyword", "size": 20}},
		"d": map[string]any{"date_histogram": map[string]any{"field": "at", "calendar_interval": "week"}},
		"n": map[string]any{"stats": map[string]any{"field": "n"}},
	}
	queries := []map[string]any{
		{"size": 0, "aggs": aggs},
		{"query": map[string]any{"match": map[string]any{"title": "alpha"}}, "size": 7, "aggs": aggs},
		{"query": map[string]any{"bool": map[string]any{"filter": map[string]any{"range": map[string]any{"n": map[string]any{"gte": 100}}}}},
			"sort": []any{map[string]any{"at": "desc"}, "k"}, "size": 20, "aggs": aggs},
		{"sort": []any{map[string]any{"n": map[string]any{"order": "asc", "mode": "max", "missing": "_first"}}, map[string]any{"tags": "desc"}}, "size": 30},
		{"sort": []any{map[string]any{"tags": map[string]any{"order": "asc"}}, map[string]any{"f": "desc"}, "_score"}, "from": 5, "size": 25, "track_scores": true},
		{"sort": []any{map[string]any{"ok": "asc"}, map[string]any{"nope": map[string]any{"order": "asc", "unmapped_type": "long"}}, map[string]any{"at": "asc"}}, "size": 15},
		{"query": map[string]any{"match": map[string]any{"title": "beta gamma"}}, "sort": []any{"k", "_score"}, "size": 10, "aggs": map[string]any{"k": aggs["k"]}},
		{"sort": []any{map[string]any{"n": "asc"}, map[string]any{"k": "desc"}}, "search_after": []any{100, "k07"}, "size": 12},
		{"sort": []any{map[string]any{"at": "desc"}, map[string]any{"f": "asc"}}, "search_after": []any{1717192800000, 50}, "size": 12},
	}
	search := func(path string, q map[string]any, docValues bool) string {
		t.Helper()
		for _, name := range []string{"rnd", "rnd-dyn"} {
			localIndex(t, srv, name).cols.disabled.Store(docValues)
		}
		r := tg.do(t, "POST", path, q).must(t, 200)
		return tookRE.ReplaceAllString(string(r.raw), "")
	}
	// Sums depend on the order of the hits, which changes when bleve
	// merges segments in the background: compare columns, doc values,
	// columns, and retry while the two column answers differ.
	check := func(path string, q map[string]any) {
		t.Helper()
		for attempt := 0; ; attempt++ {
			a, b, c := search(path, q, false), search(path, q, true), search(path, q, false)
			if a == b || b == c {
				return
			}
			if a == c || attempt == 50 {
				t.Fatalf("%s %v:\ncolumns:   %s\ndocvalues: %s", path, q, a, b)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, q := range queries {
		check("/rnd/_search", q)
	}
	for _, q := range []map[string]any{
		{"size": 0, "aggs": dynAggs},
		{"sort": []any{map[string]any{"k.keyword": map[string]any{"order": "asc", "unmapped_type": "keyword"}}, map[string]any{"at": "desc"}}, "size": 20, "aggs": dynAggs},
	} {
		check("/rnd-dyn/_search", q)
		check("/rnd,rnd-dyn/_search", q)
	}
	if localIndex(t, srv, "rnd").cols.built.Load() == 0 {
		t.Fatal("columns were never used")
	}
}
