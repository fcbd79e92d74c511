package esserver

import (
	"context"
	"fmt"
	"math/rand"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/collector"
	"github.com/blevesearch/bleve/v2/search/query"
)

// topKCorpus indexes random titles over a skewed vocabulary (some words
// in most documents, some rare, repeated words, varied lengths) in several
// refreshes (several segments), with updates and deletes, into the
// indices names.
func topKCorpus(t *testing.T, tg *target, names ...string) {
	t.Helper()
	rng := rand.New(rand.NewSource(41))
	words := []string{"common", "usual", "often", "mid", "some", "few", "rare", "odd", "unique", "zed"}
	title := func() string {
		if rng.Intn(25) == 0 {
			// A word repeated many times: term scores near their bound.
			return strings.Repeat(words[rng.Intn(len(words))]+" ", 20+rng.Intn(60))
		}
		n := 1 + rng.Intn(12)
		parts := make([]string, n)
		for i := range parts {
			// Word i has probability ~ 1/(i+1): a skewed vocabulary.
			w := 0
			for w < len(words)-1 && rng.Intn(w+2) != 0 {
				w++
			}
			parts[i] = words[w]
		}
		return strings.Join(parts, " ")
	}
	for _, name := range names {
		tg.do(t, "PUT", "/"+name, map[string]any{
			"settings": map[string]any{"refresh_interval": "-1"},
			"mappings": map[string]any{"properties": map[string]any{
				"title": map[string]any{"type": "text"}, "body": map[string]any{"type": "text"}}},
		}).must(t, 200)
	}
	for round := 0; round < 5; round++ {
		var lines []any
		for i := 0; i < 400; i++ {
			id := fmt.Sprintf("d%d", rng.Intn(1500))
			name := names[rng.Intn(len(names))]
			if rng.Intn(12) == 0 {
				lines = append(lines, map[string]any{"delete": map[string]any{"_index": name, "_id": id}})
				continue
			}
			lines = append(lines, map[string]any{"index": map[string]any{"_index": name, "_id": id}},
				map[string]any{"title": title(), "body": title()})
		}
		tg.do(t, "POST", "/_bulk", ndjson(lines...)).must(t, 200)
		tg.do(t, "POST", "/"+strings.Join(names, ",")+"/_refresh", nil).must(t, 200)
	}
}

// TestTopKPruningMatchesFullScoring: the pruned collection of a match
// query returns the same top hits, in the same order, with bit-identical
// scores, as scoring every match, while visiting fewer documents once the
// exactly counted ones are past.
func TestTopKPruningMatchesFullScoring(t *testing.T) {
	srv, url := startLocal(t, t.TempDir(), time.Second)
	tg := &target{name: "local", url: url, local: srv, client: &http.Client{Timeout: 30 * time.Second}}
	topKCorpus(t, tg, "topk")
	ix := localIndex(t, srv, "topk")
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
	order := search.SortOrder{&search.SortScore{Desc: true}}
	disj := func(boosts map[string]float64, terms ...string) query.Query {
		qs := make([]query.Query, len(terms))
		for i, w := range terms {
			tq := query.NewTermQuery(w)
			tq.SetField("title")
			if b, ok := boosts[w]; ok {
				tq.SetBoost(b)
			}
			qs[i] = tq
		}
		return query.NewDisjunctionQuery(qs)
	}
	queries := []query.Query{
		disj(nil, "common", "rare"),
		disj(nil, "common", "unique"),
		disj(nil, "usual", "zed"),
		disj(nil, "common", "usual", "often"),
		disj(nil, "zed", "common", "odd", "mid"),
		disj(nil, "common", "usual", "often", "mid", "some", "few", "rare", "odd", "unique", "zed"),
		disj(nil, "common", "missing"),
		disj(map[string]float64{"rare": 0.01}, "common", "rare"),
		disj(map[string]float64{"common": 7}, "common", "few", "zed"),
		disj(map[string]float64{"odd": 2.5, "usual": 0.3}, "usual", "odd"),
	}
	pruned := false
	for qi, q := range queries {
		for _, k := range []int{0, 1, 3, 10, 37} {
			for _, exact := range []uint64{0, 20, 100000} {
				full, err := q.Searcher(ctx, r, bleveIndexMapping, search.SearcherOptions{})
				if err != nil {
					t.Fatal(err)
				}
				want := collector.NewTopNCollector(k, 0, order)
				if err := want.Collect(ctx, full, r); err != nil {
					t.Fatal(err)
				}
				full.Close()
				ms, err := newMaxScoreSearcher(ctx, r, q, k, exact)
				if err != nil || ms == nil {
					t.Fatalf("query %d: no pruning searcher (%v)", qi, err)
				}
				got := collector.NewTopNCollector(k, 0, order)
				if err := got.Collect(ctx, ms, r); err != nil {
					t.Fatal(err)
				}
				ms.Close()
				wh, gh := want.Results(), got.Results()
				if len(wh) != len(gh) {
					t.Fatalf("query %d k=%d exact=%d: %d hits, want %d", qi, k, exact, len(gh), len(wh))
				}
				for i := range wh {
					if wh[i].ID != gh[i].ID || wh[i].Score != gh[i].Score {
						t.Fatalf("query %d k=%d exact=%d hit %d: %s %v, want %s %v", qi, k, exact, i, gh[i].ID, gh[i].Score, wh[i].ID, wh[i].Score)
					}
				}
				total := max(got.Total(), ms.(*maxScoreSearcher).matchesAtLeast())
				switch {
				case total > want.Total():
					t.Fatalf("query %d: counted %d matches of %d", qi, total, want.Total())
				case total < want.Total():
					// Pruned: hits.total must still read "gte exact".
					if total <= exact {
						t.Fatalf("query %d k=%d: counted %d matches of %d, exact up to %d", qi, k, total, want.Total(), exact)
					}
				}
				if got.Total() < want.Total() {
					pruned = true
				}
			}
		}
	}
	if !pruned {
		t.Fatal("no query was pruned")
	}
}

// TestTopKPruningOverHTTP: match queries answer the same bodies (hits,
// scores, max_score, hits.total and its relation, counts) with and without
// pruning, over one and two indices, for the track_total_hits variants.
func TestTopKPruningOverHTTP(t *testing.T) {
	srv, url := startLocal(t, t.TempDir(), time.Second)
	tg := &target{name: "local", url: url, local: srv, client: &http.Client{Timeout: 30 * time.Second}}
	topKCorpus(t, tg, "tka", "tkb")
	ixs := []*index{localIndex(t, srv, "tka"), localIndex(t, srv, "tkb")}
	match := func(text string, extra map[string]any) map[string]any {
		q := map[string]any{"query": map[string]any{"match": map[string]any{"title": text}}}
		for k, v := range extra {
			q[k] = v
		}
		return q
	}
	queries := []map[string]any{
		match("common rare", nil),
		match("common unique zed", map[string]any{"size": 3}),
		match("usual odd", map[string]any{"from": 4, "size": 5}),
		match("common rare", map[string]any{"track_total_hits": 30}),
		match("common rare", map[string]any{"track_total_hits": 30, "size": 0}),
		match("common often", map[string]any{"track_total_hits": false}),
		match("common often", map[string]any{"track_total_hits": true}),
		match("common few", map[string]any{"track_total_hits": 0, "size": 2}),
		match("common mid", map[string]any{"sort": []any{"_score"}, "track_total_hits": 10}),
		{"query": map[string]any{"match": map[string]any{"title": map[string]any{"query": "common odd", "boost": 3}}}, "track_total_hits": 15},
		{"query": map[string]any{"match": map[string]any{"title": map[string]any{"query": "common odd", "_name": "n"}}}, "track_total_hits": 15},
		{"query": map[string]any{"match": map[string]any{"title": map[string]any{"query": "common zed", "minimum_should_match": 1}}}, "track_total_hits": 15},
	}
	search := func(method, path string, q map[string]any, noPrune bool) string {
		t.Helper()
		for _, ix := range ixs {
			ix.noPrune.Store(noPrune)
		}
		r := tg.do(t, method, path, q).must(t, 200)
		return tookRE.ReplaceAllString(string(r.raw), "")
	}
	// Scores and tie order change when bleve merges segments in the
	// background: retry while the two pruned answers differ.
	check := func(method, path string, q map[string]any) {
		t.Helper()
		for attempt := 0; ; attempt++ {
			a, b, c := search(method, path, q, false), search(method, path, q, true), search(method, path, q, false)
			if a == b || b == c {
				return
			}
			if a == c || attempt == 50 {
				t.Fatalf("%s %v:\npruned: %s\nfull:   %s", path, q, a, b)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, q := range queries {
		check("POST", "/tka/_search", q)
		check("POST", "/tka,tkb/_search", q)
	}
	check("POST", "/tka/_search?rest_total_hits_as_int=true", match("common rare", nil))
	check("POST", "/tka/_search?track_total_hits=5", match("common rare", nil))
	check("POST", "/tka/_count", match("common rare", nil))
	check("POST", "/tka,tkb/_count", match("common zed", nil))
	r := tg.do(t, "POST", "/tka/_search", match("common rare", map[string]any{"track_total_hits": 30})).must(t, 200)
	if r.str("hits.total.relation") != "gte" || r.num(t, "hits.total.value") != 30 {
		t.Fatalf("total: %s", r.raw)
	}
}

// TestTopKScoreBounds: every term's score stays below the bound pruning
// relies on, and the bounds are not vacuous (some score comes close).
func TestTopKScoreBounds(t *testing.T) {
	srv, url := startLocal(t, t.TempDir(), time.Second)
	tg := &target{name: "local", url: url, local: srv, client: &http.Client{Timeout: 30 * time.Second}}
	topKCorpus(t, tg, "tkbounds")
	ix := localIndex(t, srv, "tkbounds")
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
	closest := 0.0
	for _, terms := range [][]string{{"common", "zed"}, {"usual", "odd", "rare"}, {"few", "unique"}} {
		for _, boost := range []float64{0.2, 1, 4} {
			qs := make([]query.Query, len(terms))
			for i, w := range terms {
				tq := query.NewTermQuery(w)
				tq.SetField("title")
				tq.SetBoost(boost * float64(i+1))
				qs[i] = tq
			}
			s, err := newMaxScoreSearcher(ctx, r, query.NewDisjunctionQuery(qs), 10, 0)
			if err != nil {
				t.Fatal(err)
			}
			ms := s.(*maxScoreSearcher)
			if !ms.prune {
				t.Fatalf("%v: no bounds", terms)
			}
			sctx := &search.SearchContext{DocumentMatchPool: search.NewDocumentMatchPool(10, 0), IndexReader: r}
			for i, ts := range ms.searchers {
				for d, err := ts.Next(sctx); d != nil || err != nil; d, err = ts.Next(sctx) {
					if err != nil {
						t.Fatal(err)
					}
					if d.Score > ms.bounds[i]/boundSlack {
						t.Fatalf("%v boost %v: term %d scores %v above its bound %v", terms, boost, i, d.Score, ms.bounds[i])
					}
					closest = max(closest, d.Score/ms.bounds[i])
					sctx.DocumentMatchPool.Put(d)
				}
			}
			ms.Close()
		}
	}
	// Short fields make the length factor 1/(1+k1) at best here (bleve's
	// average field length is its term dictionary's size over the
	// document count): 0.45 of the bound.
	if closest < 0.4 {
		t.Fatalf("the closest score is %.2f of its bound", closest)
	}
}
