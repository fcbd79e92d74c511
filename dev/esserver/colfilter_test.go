package esserver

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
)

// colFilterCorpus indexes documents with numeric, date and keyword fields
// (negative and fractional numbers, -0, arrays, missing values, a long
// field without doc values) in several refreshes (several segments), with
// updates and deletes, into the indices names.
func colFilterCorpus(t *testing.T, tg *target, names ...string) {
	t.Helper()
	rng := rand.New(rand.NewSource(7))
	words := []string{"alpha", "beta", "gamma", "delta"}
	for _, name := range names {
		tg.do(t, "PUT", "/"+name, map[string]any{
			"settings": map[string]any{"refresh_interval": "-1"},
			"mappings": map[string]any{"properties": map[string]any{
				"title": map[string]any{"type": "text"}, "k": map[string]any{"type": "keyword"},
				"n": map[string]any{"type": "long"}, "f": map[string]any{"type": "double"},
				"at": map[string]any{"type": "date"},
				"nd": map[string]any{"type": "long", "doc_values": false}}},
		}).must(t, 200)
	}
	doc := func() map[string]any {
		var ws []string
		for i := 0; i < 1+rng.Intn(4); i++ {
			ws = append(ws, words[rng.Intn(len(words))])
		}
		d := map[string]any{"title": strings.Join(ws, " "), "k": fmt.Sprintf("k%d", rng.Intn(5))}
		if rng.Intn(10) != 0 {
			d["n"] = rng.Intn(400) - 100
		}
		switch rng.Intn(8) {
		case 0: // missing
		case 1:
			d["f"] = []any{rng.Float64()*20 - 10, rng.Float64()*20 - 10}
		case 2:
			d["f"] = math.Copysign(0, -1)
		case 3:
			d["f"] = 0.0
		default:
			d["f"] = math.Round((rng.Float64()*20-10)*4) / 4
		}
		d["at"] = fmt.Sprintf("2024-01-%02dT%02d:%02d:00Z", 1+rng.Intn(28), rng.Intn(24), rng.Intn(60))
		if rng.Intn(3) == 0 {
			d["at"] = []any{d["at"], fmt.Sprintf("2024-02-%02dT00:00:00Z", 1+rng.Intn(28))}
		}
		d["nd"] = rng.Intn(50)
		return d
	}
	for round := 0; round < 5; round++ {
		var lines []any
		for i := 0; i < 600; i++ {
			id := fmt.Sprintf("d%d", rng.Intn(2000))
			name := names[rng.Intn(len(names))]
			if rng.Intn(12) == 0 {
				lines = append(lines, map[string]any{"delete": map[string]any{"_index": name, "_id": id}})
				continue
			}
			lines = append(lines, map[string]any{"index": map[string]any{"_index": name, "_id": id}}, doc())
		}
		tg.do(t, "POST", "/_bulk", ndjson(lines...)).must(t, 200)
		tg.do(t, "POST", "/"+strings.Join(names, ",")+"/_refresh", nil).must(t, 200)
	}
}

// colFilterQueries returns bool queries whose filters hold ranges, with
// bounds at, between and beyond the indexed values.
func colFilterQueries(rng *rand.Rand, n int) []map[string]any {
	rangeOf := func(field string) map[string]any {
		bound := func() any {
			switch field {
			case "n", "nd":
				return rng.Intn(420) - 110
			case "f":
				switch rng.Intn(6) {
				case 0:
					return 0
				case 1:
					return "-0.0"
				case 2:
					return math.Round((rng.Float64()*22-11)*4) / 4
				}
				return rng.Float64()*22 - 11
			default:
				if rng.Intn(4) == 0 {
					return fmt.Sprintf("2024-01-%02d||/d", 1+rng.Intn(28))
				}
				return fmt.Sprintf("2024-0%d-%02dT%02d:00:00Z", 1+rng.Intn(2), 1+rng.Intn(28), rng.Intn(24))
			}
		}
		r := map[string]any{}
		lower := []string{"gt", "gte", ""}[rng.Intn(3)]
		upper := []string{"lt", "lte", ""}[rng.Intn(3)]
		if lower != "" {
			r[lower] = bound()
		}
		if upper != "" {
			r[upper] = bound()
		}
		return map[string]any{"range": map[string]any{field: r}}
	}
	var out []map[string]any
	for len(out) < n {
		var filter []any
		for i := 0; i < 1+rng.Intn(3); i++ {
			switch rng.Intn(10) {
			case 0:
				filter = append(filter, map[string]any{"term": map[string]any{"k": fmt.Sprintf("k%d", rng.Intn(5))}})
			case 1:
				filter = append(filter, rangeOf("nd")) // no doc values: a searcher
			case 2, 3:
				filter = append(filter, rangeOf("f"))
			case 4, 5:
				filter = append(filter, rangeOf("at"))
			default:
				filter = append(filter, rangeOf("n"))
			}
		}
		b := map[string]any{"filter": filter}
		if len(filter) == 1 && rng.Intn(2) == 0 {
			b["filter"] = filter[0]
		}
		switch rng.Intn(6) {
		case 0: // filter only
		case 1:
			b["should"] = []any{map[string]any{"match": map[string]any{"title": "alpha"}}, map[string]any{"match": map[string]any{"title": "beta"}}}
		case 2:
			b["must_not"] = map[string]any{"match": map[string]any{"title": "gamma"}}
		case 3:
			b["must"] = map[string]any{"match": map[string]any{"title": "alpha delta"}}
			b["should"] = map[string]any{"term": map[string]any{"k": "k1"}}
		default:
			b["must"] = map[string]any{"match": map[string]any{"title": []string{"alpha", "beta gamma", "delta alpha"}[rng.Intn(3)]}}
		}
		out = append(out, map[string]any{"bool": b})
	}
	return out
}

// TestColumnFilterMatchesSearchers: a bool query whose range filters are
// tested against columns returns the same documents, in the same order,
// with bit-identical scores, as bleve's own searcher.
func TestColumnFilterMatchesSearchers(t *testing.T) {
	defer func(n uint64) { colFilterMinCandidates = n }(colFilterMinCandidates)
	colFilterMinCandidates = 0
	srv, url := startLocal(t, t.TempDir(), time.Second)
	tg := &target{name: "local", url: url, local: srv, client: &http.Client{Timeout: 30 * time.Second}}
	colFilterCorpus(t, tg, "cf")
	ix := localIndex(t, srv, "cf")
	m := ix.currentMapping()
	st := ix.currentSettings()
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
	ctx := scoringContext(context.Background())
	qc := &qctx{m: m, now: time.Now(), index: ix.name, maxTerms: settingInt(st, "index.max_terms_count"),
		maxResultWindow: st.MaxResultWindow}
	compile := func(dsl map[string]any) query.Query {
		raw, _ := json.Marshal(dsl)
		q, cerr := qc.compile(raw)
		if cerr != nil {
			t.Fatalf("%s: %v", raw, cerr.reason)
		}
		return q
	}
	drain := func(s search.Searcher) ([]string, []uint64) {
		sctx := &search.SearchContext{DocumentMatchPool: search.NewDocumentMatchPool(s.DocumentMatchPoolSize()+1, 0), IndexReader: r}
		var ids []string
		var scores []uint64
		for d, err := s.Next(sctx); d != nil || err != nil; d, err = s.Next(sctx) {
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, string(d.IndexInternalID))
			scores = append(scores, math.Float64bits(d.Score))
			sctx.DocumentMatchPool.Put(d)
		}
		return ids, scores
	}
	queries := colFilterQueries(rand.New(rand.NewSource(3)), 300)
	queries = append(queries,
		map[string]any{"bool": map[string]any{"filter": map[string]any{"range": map[string]any{"f": map[string]any{"gte": 0}}}}},
		map[string]any{"bool": map[string]any{"filter": map[string]any{"range": map[string]any{"f": map[string]any{"gt": 0}}}}},
		map[string]any{"bool": map[string]any{"filter": map[string]any{"range": map[string]any{"f": map[string]any{"lte": "-0.0"}}}}},
		map[string]any{"bool": map[string]any{"filter": map[string]any{"range": map[string]any{"n": map[string]any{}}}}},
		map[string]any{"bool": map[string]any{"filter": map[string]any{"range": map[string]any{"n": map[string]any{"gte": 50, "lt": 50}}}}},
		map[string]any{"constant_score": map[string]any{"filter": map[string]any{"range": map[string]any{"n": map[string]any{"lte": 10}}}, "boost": 2}},
		// match_none as the only must clause (bleve's bool then matches
		// as if it had no must clause; its conjunction does not).
		map[string]any{"bool": map[string]any{"must": map[string]any{"match_none": map[string]any{}},
			"filter": map[string]any{"range": map[string]any{"n": map[string]any{"lte": 10}}}}},
		map[string]any{"bool": map[string]any{"must": map[string]any{"range": map[string]any{"missing": map[string]any{"lte": 10}}},
			"filter": map[string]any{"range": map[string]any{"n": map[string]any{"lte": 10}}}}},
		map[string]any{"bool": map[string]any{"must": []any{map[string]any{"match": map[string]any{"title": "alpha"}}, map[string]any{"match_none": map[string]any{}}},
			"filter": map[string]any{"range": map[string]any{"n": map[string]any{"lte": 10}}}}},
		map[string]any{"bool": map[string]any{"must": map[string]any{"query_string": map[string]any{"query": "title:alpha"}},
			"filter": map[string]any{"range": map[string]any{"at": map[string]any{"gte": "2024-01-10"}}}}},
	)
	used, matched := 0, 0
	for _, dsl := range queries {
		q := compile(dsl)
		cs, err := ix.boolColumnSearcher(ctx, r, q, m, false)
		if err != nil {
			t.Fatal(err)
		}
		if cs == nil {
			continue
		}
		used++
		old, err := q.Searcher(ctx, r, bleveIndexMapping, search.SearcherOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wantIDs, wantScores := drain(old)
		old.Close()
		gotIDs, gotScores := drain(cs)
		cs.Close()
		raw, _ := json.Marshal(dsl)
		if len(gotIDs) != len(wantIDs) {
			t.Fatalf("%s: %d matches, want %d", raw, len(gotIDs), len(wantIDs))
		}
		for i := range wantIDs {
			if gotIDs[i] != wantIDs[i] || gotScores[i] != wantScores[i] {
				t.Fatalf("%s: match %d: %x %v, want %x %v", raw, i, gotIDs[i], math.Float64frombits(gotScores[i]),
					wantIDs[i], math.Float64frombits(wantScores[i]))
			}
		}
		// Without scores (a search sorted on fields): the same matches.
		ns, err := ix.boolColumnSearcher(ctx, r, q, m, true)
		if err != nil || ns == nil {
			t.Fatalf("%s: no scoreless column searcher (%v)", raw, err)
		}
		nsIDs, _ := drain(ns)
		ns.Close()
		if strings.Join(nsIDs, ",") != strings.Join(wantIDs, ",") {
			t.Fatalf("%s: without scores %d matches %x, want %d %x", raw, len(nsIDs), nsIDs, len(wantIDs), wantIDs)
		}
		if len(wantIDs) > 0 {
			matched++
		}
	}
	if used < len(queries)/2 || matched < used/2 {
		t.Fatalf("columns filtered %d of %d queries, %d with matches", used, len(queries), matched)
	}
	// Not a bool query, no range filter, a field without doc values, or
	// columns disabled: bleve's searcher.
	for _, dsl := range []map[string]any{
		{"range": map[string]any{"n": map[string]any{"gte": 1}}},
		{"bool": map[string]any{"must": map[string]any{"range": map[string]any{"n": map[string]any{"gte": 1}}}}},
		{"bool": map[string]any{"filter": map[string]any{"range": map[string]any{"nd": map[string]any{"gte": 1}}}}},
		{"bool": map[string]any{"filter": map[string]any{"term": map[string]any{"k": "k1"}}}},
	} {
		if cs, err := ix.boolColumnSearcher(ctx, r, compile(dsl), m, false); cs != nil || err != nil {
			t.Fatalf("%v: a column searcher (%v)", dsl, err)
		}
	}
	ix.cols.disabled.Store(true)
	cs, err := ix.boolColumnSearcher(ctx, r, compile(queries[0]), m, false)
	ix.cols.disabled.Store(false)
	if cs != nil || err != nil {
		t.Fatal("a column searcher with columns disabled")
	}
}

// TestColumnFilterOverHTTP: searches with range filters answer the same
// bodies (hits, scores, sort values, totals, aggregations) and counts
// whether the filters read columns or not, over one and two indices.
func TestColumnFilterOverHTTP(t *testing.T) {
	defer func(n uint64) { colFilterMinCandidates = n }(colFilterMinCandidates)
	colFilterMinCandidates = 0
	srv, url := startLocal(t, t.TempDir(), time.Second)
	tg := &target{name: "local", url: url, local: srv, client: &http.Client{Timeout: 30 * time.Second}}
	colFilterCorpus(t, tg, "cfa", "cfb")
	ixs := []*index{localIndex(t, srv, "cfa"), localIndex(t, srv, "cfb")}
	search := func(method, path string, q map[string]any, off bool) string {
		t.Helper()
		for _, ix := range ixs {
			ix.noColFilter.Store(off)
		}
		r := tg.do(t, method, path, q).must(t, 200)
		return tookRE.ReplaceAllString(string(r.raw), "")
	}
	// Scores and tie order change when bleve merges segments in the
	// background: retry while the two column answers differ.
	check := func(method, path string, q map[string]any) {
		t.Helper()
		for attempt := 0; ; attempt++ {
			a, b, c := search(method, path, q, false), search(method, path, q, true), search(method, path, q, false)
			if a == b || b == c {
				return
			}
			if a == c || attempt == 50 {
				t.Fatalf("%s %v:\ncolumns:  %s\nsearcher: %s", path, q, a, b)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	rng := rand.New(rand.NewSource(11))
	before := ixs[0].cols.filtered.Load()
	aggs := map[string]any{"ks": map[string]any{"terms": map[string]any{"field": "k"}},
		"days": map[string]any{"date_histogram": map[string]any{"field": "at", "calendar_interval": "day"}},
		"fs":   map[string]any{"stats": map[string]any{"field": "f"}}}
	for i, qd := range colFilterQueries(rng, 40) {
		body := map[string]any{"query": qd, "track_total_hits": true}
		switch i % 5 {
		case 1:
			body["sort"] = []any{map[string]any{"at": "desc"}, map[string]any{"n": "asc"}}
			body["aggs"] = aggs
		case 2:
			body["size"] = 0
			body["aggs"] = aggs
		case 3:
			body["from"], body["size"] = 3, 7
			body["track_scores"] = true
			body["sort"] = []any{map[string]any{"f": "asc"}}
		case 4:
			delete(body, "track_total_hits")
			body["size"] = 20
		}
		check("POST", "/cfa/_search", body)
		check("POST", "/cfa,cfb/_search", body)
		if i%4 == 0 {
			check("POST", "/cfa/_count", map[string]any{"query": qd})
		}
	}
	check("POST", "/cfa,cfb/_search", map[string]any{"query": benchAggQuery["query"], "aggs": aggs, "sort": []any{map[string]any{"at": "desc"}}})
	for _, must := range []any{map[string]any{"match_none": map[string]any{}}, map[string]any{"match": map[string]any{"missing": "x"}},
		map[string]any{"query_string": map[string]any{"query": "title:alpha"}}} {
		q := map[string]any{"bool": map[string]any{"must": must, "filter": map[string]any{"range": map[string]any{"n": map[string]any{"lte": 10}}}}}
		check("POST", "/cfa/_search", map[string]any{"query": q, "sort": []any{map[string]any{"n": "desc"}}, "track_total_hits": true})
		check("POST", "/cfa/_search", map[string]any{"query": q, "track_total_hits": true})
	}
	if ixs[0].cols.filtered.Load() == before {
		t.Fatal("no search filtered on columns")
	}
}
