package esserver

import (
	"fmt"
	"strings"
	"testing"
)

// seedProducts creates an index with a fixed set of documents.
func seedProducts(t *testing.T, tg *target) string {
	name := tg.idx(t, "products")
	tg.do(t, "PUT", "/"+name, map[string]any{"mappings": map[string]any{"properties": map[string]any{
		"title":    map[string]any{"type": "text"},
		"body":     map[string]any{"type": "text"},
		"category": map[string]any{"type": "keyword"},
		"tags":     map[string]any{"type": "keyword"},
		"price":    map[string]any{"type": "double"},
		"stock":    map[string]any{"type": "long"},
		"at":       map[string]any{"type": "date"},
		"active":   map[string]any{"type": "boolean"},
		"note":     map[string]any{"type": "keyword"},
	}}}).must(t, 200)
	docs := []map[string]any{
		{"title": "Red apple juice", "body": "fresh pressed apples", "category": "drinks", "tags": []string{"fruit", "cold"}, "price": 3.5, "stock": 10, "at": "2024-01-01T10:00:00Z", "active": true, "note": "x"},
		{"title": "Green apple", "body": "crisp and sour", "category": "fruit", "tags": []string{"fruit"}, "price": 1.2, "stock": 100, "at": "2024-01-01T15:30:00Z", "active": true},
		{"title": "Orange juice", "body": "fresh squeezed oranges", "category": "drinks", "tags": []string{"fruit", "cold"}, "price": 4.0, "stock": 0, "at": "2024-01-02T08:00:00Z", "active": false},
		{"title": "Banana bread", "body": "baked with ripe bananas", "category": "bakery", "tags": []string{"sweet"}, "price": 6.75, "stock": 5, "at": "2024-01-05T12:00:00Z", "active": true},
		{"title": "Apple pie", "body": "baked apples and cinnamon", "category": "bakery", "tags": []string{"sweet", "fruit"}, "price": 12.0, "stock": 2, "at": "2024-02-10T09:00:00Z", "active": true},
		{"title": "Sparkling water", "body": "cold and fresh", "category": "drinks", "tags": []string{"cold"}, "price": 0.99, "stock": 500, "at": "2024-02-11T09:00:00Z", "active": false},
	}
	lines := []any{}
	for i, d := range docs {
		lines = append(lines, map[string]any{"index": map[string]any{"_index": name, "_id": fmt.Sprintf("p%d", i+1)}}, d)
	}
	tg.do(t, "POST", "/_bulk?refresh=true", ndjson(lines...)).must(t, 200)
	return name
}

func TestQueries(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := seedProducts(t, tg)
		cases := []struct {
			name  string
			query any
			ids   []string
		}{
			{"match_all", map[string]any{"match_all": map[string]any{}}, []string{"p1", "p2", "p3", "p4", "p5", "p6"}},
			{"match or", map[string]any{"match": map[string]any{"title": "apple juice"}}, []string{"p1", "p2", "p3", "p5"}},
			{"match and", map[string]any{"match": map[string]any{"title": map[string]any{"query": "apple juice", "operator": "and"}}}, []string{"p1"}},
			{"match case-insensitive analysis", map[string]any{"match": map[string]any{"title": "APPLE"}}, []string{"p1", "p2", "p5"}},
			{"match minimum_should_match", map[string]any{"match": map[string]any{"body": map[string]any{"query": "fresh baked apples", "minimum_should_match": 2}}}, []string{"p1", "p5"}},
			{"match keyword exact", map[string]any{"match": map[string]any{"category": "drinks"}}, []string{"p1", "p3", "p6"}},
			{"match no terms", map[string]any{"match": map[string]any{"title": "zebra"}}, nil},
			{"multi_match", map[string]any{"multi_match": map[string]any{"query": "cold", "fields": []string{"title", "body^2"}}}, []string{"p6"}},
			{"multi_match two fields", map[string]any{"multi_match": map[string]any{"query": "apple bananas", "fields": []string{"title", "body"}}}, []string{"p1", "p2", "p4", "p5"}},
			{"term keyword", map[string]any{"term": map[string]any{"category": "bakery"}}, []string{"p4", "p5"}},
			{"term keyword object form", map[string]any{"term": map[string]any{"category": map[string]any{"value": "fruit"}}}, []string{"p2"}},
			{"term keyword is exact", map[string]any{"term": map[string]any{"category": "Bakery"}}, nil},
			{"term on text uses indexed tokens", map[string]any{"term": map[string]any{"title": "apple"}}, []string{"p1", "p2", "p5"}},
			{"term numeric", map[string]any{"term": map[string]any{"stock": 5}}, []string{"p4"}},
			{"term boolean", map[string]any{"term": map[string]any{"active": false}}, []string{"p3", "p6"}},
			{"term array field", map[string]any{"term": map[string]any{"tags": "sweet"}}, []string{"p4", "p5"}},
			{"terms", map[string]any{"terms": map[string]any{"category": []string{"fruit", "bakery"}}}, []string{"p2", "p4", "p5"}},
			{"range number gte lt", map[string]any{"range": map[string]any{"price": map[string]any{"gte": 3.5, "lt": 6.75}}}, []string{"p1", "p3"}},
			{"range number gt lte", map[string]any{"range": map[string]any{"price": map[string]any{"gt": 3.5, "lte": 6.75}}}, []string{"p3", "p4"}},
			{"range long", map[string]any{"range": map[string]any{"stock": map[string]any{"gte": 100}}}, []string{"p2", "p6"}},
			{"range date", map[string]any{"range": map[string]any{"at": map[string]any{"gte": "2024-01-01T12:00:00Z", "lt": "2024-02-01"}}}, []string{"p2", "p3", "p4"}},
			{"range date rounding", map[string]any{"range": map[string]any{"at": map[string]any{"gt": "2024-01-01||/d", "lte": "2024-01-05||/d"}}}, []string{"p3", "p4"}},
			{"range date math now", map[string]any{"range": map[string]any{"at": map[string]any{"lt": "now-1d"}}}, []string{"p1", "p2", "p3", "p4", "p5", "p6"}},
			{"bool must filter", map[string]any{"bool": map[string]any{
				"must":   []any{map[string]any{"match": map[string]any{"title": "apple"}}},
				"filter": []any{map[string]any{"term": map[string]any{"active": true}}, map[string]any{"range": map[string]any{"price": map[string]any{"lt": 10}}}},
			}}, []string{"p1", "p2"}},
			{"bool must_not", map[string]any{"bool": map[string]any{
				"must_not": map[string]any{"term": map[string]any{"category": "drinks"}},
			}}, []string{"p2", "p4", "p5"}},
			{"bool should only", map[string]any{"bool": map[string]any{
				"should": []any{map[string]any{"term": map[string]any{"category": "fruit"}}, map[string]any{"term": map[string]any{"stock": 0}}},
			}}, []string{"p2", "p3"}},
			{"bool should with filter is optional", map[string]any{"bool": map[string]any{
				"filter": map[string]any{"term": map[string]any{"category": "drinks"}},
				"should": map[string]any{"match": map[string]any{"title": "juice"}},
			}}, []string{"p1", "p3", "p6"}},
			{"bool minimum_should_match", map[string]any{"bool": map[string]any{
				"should": []any{
					map[string]any{"term": map[string]any{"tags": "fruit"}},
					map[string]any{"term": map[string]any{"tags": "cold"}},
					map[string]any{"term": map[string]any{"category": "drinks"}},
				},
				"minimum_should_match": 2,
			}}, []string{"p1", "p3", "p6"}},
			{"bool minimum_should_match percent", map[string]any{"bool": map[string]any{
				"filter": map[string]any{"match_all": map[string]any{}},
				"should": []any{
					map[string]any{"term": map[string]any{"tags": "fruit"}},
					map[string]any{"term": map[string]any{"tags": "sweet"}},
				},
				"minimum_should_match": "100%",
			}}, []string{"p5"}},
			{"nested bool", map[string]any{"bool": map[string]any{
				"must": map[string]any{"bool": map[string]any{"should": []any{
					map[string]any{"term": map[string]any{"category": "bakery"}},
					map[string]any{"term": map[string]any{"category": "fruit"}},
				}}},
				"must_not": map[string]any{"range": map[string]any{"price": map[string]any{"gt": 10}}},
			}}, []string{"p2", "p4"}},
			{"exists", map[string]any{"exists": map[string]any{"field": "note"}}, []string{"p1"}},
			{"exists unmapped", map[string]any{"exists": map[string]any{"field": "nothing_here"}}, nil},
			{"ids", map[string]any{"ids": map[string]any{"values": []string{"p2", "p6", "zz"}}}, []string{"p2", "p6"}},
			{"prefix", map[string]any{"prefix": map[string]any{"category": "dr"}}, []string{"p1", "p3", "p6"}},
			{"unmapped field matches nothing", map[string]any{"term": map[string]any{"nope": "x"}}, nil},
		}
		for _, c := range cases {
			t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
				r := tg.do(t, "POST", "/"+name+"/_search", map[string]any{"query": c.query, "size": 100}).must(t, 200)
				got := sortedIDs(r)
				if !eqStrings(got, c.ids) {
					t.Fatalf("ids %v, want %v; body: %s", got, c.ids, r.raw)
				}
				if int(r.num(t, "hits.total.value")) != len(c.ids) || r.str("hits.total.relation") != "eq" {
					t.Fatalf("total: %s", r.raw)
				}
				for _, h := range r.get("hits.hits").([]any) {
					if get(h, "_index") != name || get(h, "_source") == nil {
						t.Fatalf("hit shape: %v", h)
					}
					if _, ok := get(h, "_score").(float64); !ok {
						t.Fatalf("hit has no _score: %v", h)
					}
				}
			})
		}
		// Relevance: the doc matching more query terms ranks first.
		r := tg.do(t, "POST", "/"+name+"/_search", map[string]any{"query": map[string]any{"match": map[string]any{"title": "apple juice"}}}).must(t, 200)
		if ids := hitIDs(r); len(ids) == 0 || ids[0] != "p1" {
			t.Fatalf("best match first: %v", ids)
		}
		if r.num(t, "hits.max_score") != get(r.get("hits.hits"), "0._score") {
			t.Fatalf("max_score: %s", r.raw)
		}
		// Filter context does not score.
		f := tg.do(t, "POST", "/"+name+"/_search", map[string]any{"query": map[string]any{"bool": map[string]any{"filter": map[string]any{"term": map[string]any{"category": "bakery"}}}}}).must(t, 200)
		if f.num(t, "hits.hits.0._score") != 0 {
			t.Fatalf("filter-only query scored: %s", f.raw)
		}
		// GET with a body and URI search.
		g := tg.do(t, "GET", "/"+name+"/_search?q=category:bakery", nil).must(t, 200)
		if !eqStrings(sortedIDs(g), []string{"p4", "p5"}) {
			t.Fatalf("q=: %s", g.raw)
		}
		// Search through a comma list and over everything.
		all := tg.do(t, "GET", "/"+name+","+name+"/_search", nil).must(t, 200)
		if all.num(t, "hits.total.value") != 6 {
			t.Fatalf("comma list: %s", all.raw)
		}
	})
}

func TestSortAndPaging(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := seedProducts(t, tg)
		search := func(body map[string]any) resp {
			return tg.do(t, "POST", "/"+name+"/_search", body).must(t, 200)
		}
		r := search(map[string]any{"sort": []any{map[string]any{"price": "asc"}}})
		if ids := hitIDs(r); !eqStrings(ids, []string{"p6", "p2", "p1", "p3", "p4", "p5"}) {
			t.Fatalf("price asc: %v", ids)
		}
		if r.get("hits.hits.0._score") != nil || r.get("hits.max_score") != nil {
			t.Fatalf("field sort should not report scores: %s", r.raw)
		}
		if v := r.get("hits.hits.0.sort.0"); v != 0.99 {
			t.Fatalf("sort value %v", v)
		}
		r = search(map[string]any{"sort": []any{map[string]any{"price": map[string]any{"order": "desc"}}}, "from": 1, "size": 2})
		if ids := hitIDs(r); !eqStrings(ids, []string{"p4", "p3"}) {
			t.Fatalf("price desc from 1 size 2: %v", ids)
		}
		if r.num(t, "hits.total.value") != 6 {
			t.Fatalf("total with paging: %s", r.raw)
		}
		r = search(map[string]any{"sort": []any{map[string]any{"category": "asc"}, map[string]any{"stock": "desc"}}})
		if ids := hitIDs(r); !eqStrings(ids, []string{"p4", "p5", "p6", "p1", "p3", "p2"}) {
			t.Fatalf("category asc, stock desc: %v", ids)
		}
		if v := r.get("hits.hits.0.sort"); fmt.Sprint(v) != "[bakery 5]" {
			t.Fatalf("sort values %v", v)
		}
		r = search(map[string]any{"sort": "at", "size": 1})
		if ids := hitIDs(r); !eqStrings(ids, []string{"p1"}) || r.num(t, "hits.hits.0.sort.0") != 1704103200000 {
			t.Fatalf("date sort: %s", r.raw)
		}
		r = search(map[string]any{"query": map[string]any{"match": map[string]any{"body": "fresh"}}, "sort": []any{"_score", map[string]any{"price": "asc"}}})
		if len(hitIDs(r)) != 3 {
			t.Fatalf("score sort: %s", r.raw)
		}
		r = search(map[string]any{"sort": map[string]any{"note": map[string]any{"order": "asc"}}, "size": 6})
		if ids := hitIDs(r); ids[0] != "p1" {
			t.Fatalf("missing values sort last: %v", ids)
		}
		// URL parameters.
		u := tg.do(t, "GET", "/"+name+"/_search?sort=stock:desc&size=1&from=0", nil).must(t, 200)
		if ids := hitIDs(u); !eqStrings(ids, []string{"p6"}) {
			t.Fatalf("URL sort: %s", u.raw)
		}
		s0 := search(map[string]any{"size": 0})
		if len(hitIDs(s0)) != 0 || s0.num(t, "hits.total.value") != 6 {
			t.Fatalf("size 0: %s", s0.raw)
		}
		// _source filtering in hits.
		sf := search(map[string]any{"_source": []string{"title", "price"}, "sort": "price", "size": 1})
		if src, _ := sf.get("hits.hits.0._source").(map[string]any); len(src) != 2 || src["title"] != "Sparkling water" {
			t.Fatalf("_source includes: %s", sf.raw)
		}
		sf = search(map[string]any{"_source": false, "size": 1})
		if sf.get("hits.hits.0._source") != nil {
			t.Fatalf("_source false: %s", sf.raw)
		}
		// Sorting on a text field or an unmapped field is an error.
		tg.do(t, "POST", "/"+name+"/_search", map[string]any{"sort": "title"}).expectError(t, 400, "illegal_argument_exception", "search_phase_execution_exception")
		tg.do(t, "POST", "/"+name+"/_search", map[string]any{"sort": "nope"}).expectError(t, 400, "query_shard_exception", "search_phase_execution_exception")
		um := search(map[string]any{"sort": map[string]any{"nope": map[string]any{"unmapped_type": "long"}}})
		if um.num(t, "hits.total.value") != 6 {
			t.Fatalf("unmapped_type: %s", um.raw)
		}
	})
}

func TestTrackTotalHits(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "tth")
		var lines []any
		for i := 0; i < 25; i++ {
			lines = append(lines, map[string]any{"index": map[string]any{"_index": name, "_id": fmt.Sprint(i)}}, map[string]any{"i": i})
		}
		tg.do(t, "POST", "/_bulk?refresh=true", ndjson(lines...)).must(t, 200)
		check := func(tth any, value float64, relation string) {
			body := map[string]any{"size": 1}
			if tth != nil {
				body["track_total_hits"] = tth
			}
			r := tg.do(t, "POST", "/"+name+"/_search", body).must(t, 200)
			if value < 0 {
				if r.get("hits.total") != nil {
					t.Fatalf("track_total_hits=%v: total present: %s", tth, r.raw)
				}
				return
			}
			if r.num(t, "hits.total.value") != value || r.str("hits.total.relation") != relation {
				t.Fatalf("track_total_hits=%v: %s", tth, r.raw)
			}
		}
		check(nil, 25, "eq")
		check(true, 25, "eq")
		check(10, 10, "gte")
		check(25, 25, "eq")
		check(100, 25, "eq")
		check(false, -1, "")
		r := tg.do(t, "GET", "/"+name+"/_search?rest_total_hits_as_int=true&size=0", nil).must(t, 200)
		if r.num(t, "hits.total") != 25 {
			t.Fatalf("rest_total_hits_as_int: %s", r.raw)
		}
	})
}

func TestAggregations(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := seedProducts(t, tg)
		r := tg.do(t, "POST", "/"+name+"/_search", map[string]any{
			"size": 0,
			"aggs": map[string]any{
				"cats": map[string]any{
					"terms": map[string]any{"field": "category"},
					"aggs": map[string]any{
						"total":  map[string]any{"sum": map[string]any{"field": "price"}},
						"avg_p":  map[string]any{"avg": map[string]any{"field": "price"}},
						"cheap":  map[string]any{"min": map[string]any{"field": "price"}},
						"dear":   map[string]any{"max": map[string]any{"field": "price"}},
						"counts": map[string]any{"value_count": map[string]any{"field": "stock"}},
					},
				},
				"top_tag":  map[string]any{"terms": map[string]any{"field": "tags", "size": 1}},
				"stocks":   map[string]any{"terms": map[string]any{"field": "stock", "size": 2, "order": map[string]any{"_key": "asc"}}},
				"per_day":  map[string]any{"date_histogram": map[string]any{"field": "at", "calendar_interval": "day"}},
				"per_mon":  map[string]any{"date_histogram": map[string]any{"field": "at", "calendar_interval": "month"}},
				"half_day": map[string]any{"date_histogram": map[string]any{"field": "at", "fixed_interval": "12h", "min_doc_count": 1}},
				"unmapped": map[string]any{"terms": map[string]any{"field": "nothing"}},
				"all_sum":  map[string]any{"sum": map[string]any{"field": "stock"}},
			},
		}).must(t, 200)
		if len(hitIDs(r)) != 0 || r.num(t, "hits.total.value") != 6 {
			t.Fatalf("size 0 with aggs: %s", r.raw)
		}
		b := "aggregations.cats.buckets."
		if r.str(b+"0.key") != "drinks" || r.num(t, b+"0.doc_count") != 3 || r.str(b+"1.key") != "bakery" || r.num(t, b+"1.doc_count") != 2 || r.str(b+"2.key") != "fruit" {
			t.Fatalf("terms buckets: %s", r.raw)
		}
		if r.num(t, "aggregations.cats.sum_other_doc_count") != 0 || r.num(t, "aggregations.cats.doc_count_error_upper_bound") != 0 {
			t.Fatalf("terms counters: %s", r.raw)
		}
		if v := r.num(t, b+"0.total.value"); v < 8.48 || v > 8.50 {
			t.Fatalf("sum: %v", v)
		}
		if v := r.num(t, b+"1.avg_p.value"); v != 9.375 {
			t.Fatalf("avg: %v", v)
		}
		if r.num(t, b+"0.cheap.value") != 0.99 || r.num(t, b+"0.dear.value") != 4 || r.num(t, b+"0.counts.value") != 3 {
			t.Fatalf("min/max/value_count: %s", r.raw)
		}
		// tags: fruit 4, cold 3, sweet 2 → size 1 leaves 5 others.
		if r.str("aggregations.top_tag.buckets.0.key") != "fruit" || r.num(t, "aggregations.top_tag.buckets.0.doc_count") != 4 || r.num(t, "aggregations.top_tag.sum_other_doc_count") != 5 {
			t.Fatalf("terms size/sum_other_doc_count: %s", r.raw)
		}
		if r.num(t, "aggregations.stocks.buckets.0.key") != 0 || r.num(t, "aggregations.stocks.buckets.1.key") != 2 {
			t.Fatalf("numeric terms ordered by key: %s", r.raw)
		}
		days, _ := r.get("aggregations.per_day.buckets").([]any)
		// 2024-01-01 .. 2024-02-11 inclusive = 42 daily buckets, gaps filled.
		if len(days) != 42 {
			t.Fatalf("%d day buckets, want 42: %s", len(days), r.raw)
		}
		if get(days[0], "key").(float64) != 1704067200000 || get(days[0], "key_as_string") != "2024-01-01T00:00:00.000Z" || get(days[0], "doc_count").(float64) != 2 {
			t.Fatalf("first day bucket: %v", days[0])
		}
		if get(days[2], "doc_count").(float64) != 0 {
			t.Fatalf("gap bucket: %v", days[2])
		}
		months, _ := r.get("aggregations.per_mon.buckets").([]any)
		if len(months) != 2 || get(months[0], "doc_count").(float64) != 4 || get(months[1], "key_as_string") != "2024-02-01T00:00:00.000Z" {
			t.Fatalf("month buckets: %v", months)
		}
		halves, _ := r.get("aggregations.half_day.buckets").([]any)
		if len(halves) != 6 || get(halves[0], "key_as_string") != "2024-01-01T00:00:00.000Z" || get(halves[1], "key_as_string") != "2024-01-01T12:00:00.000Z" {
			t.Fatalf("fixed_interval buckets: %v", halves)
		}
		if l, _ := r.get("aggregations.unmapped.buckets").([]any); l == nil || len(l) != 0 {
			t.Fatalf("unmapped terms: %s", r.raw)
		}
		if r.num(t, "aggregations.all_sum.value") != 617 {
			t.Fatalf("sum over all: %s", r.raw)
		}
		// Aggregations respect the query.
		q := tg.do(t, "POST", "/"+name+"/_search", map[string]any{"size": 0, "query": map[string]any{"term": map[string]any{"active": true}},
			"aggs": map[string]any{"cats": map[string]any{"terms": map[string]any{"field": "category"}}}}).must(t, 200)
		if q.str("aggregations.cats.buckets.0.key") != "bakery" || q.num(t, "aggregations.cats.buckets.0.doc_count") != 2 {
			t.Fatalf("query-scoped aggs: %s", q.raw)
		}
		// typed_keys prefixes names with the aggregation type.
		tk := tg.do(t, "POST", "/"+name+"/_search?typed_keys=true", map[string]any{"size": 0,
			"aggs": map[string]any{"c": map[string]any{"terms": map[string]any{"field": "category"}, "aggs": map[string]any{"m": map[string]any{"max": map[string]any{"field": "price"}}}}}}).must(t, 200)
		if tk.get("aggregations.sterms#c.buckets.0.max#m.value") == nil {
			t.Fatalf("typed_keys: %s", tk.raw)
		}
		// Aggregating a text field is refused.
		tg.do(t, "POST", "/"+name+"/_search", map[string]any{"aggs": map[string]any{"t": map[string]any{"terms": map[string]any{"field": "title"}}}}).
			expectError(t, 400, "illegal_argument_exception", "search_phase_execution_exception")
	})
}

func TestCount(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := seedProducts(t, tg)
		r := tg.do(t, "GET", "/"+name+"/_count", nil).must(t, 200)
		if r.num(t, "count") != 6 || r.num(t, "_shards.failed") != 0 {
			t.Fatalf("count all: %s", r.raw)
		}
		r = tg.do(t, "POST", "/"+name+"/_count", map[string]any{"query": map[string]any{"term": map[string]any{"category": "drinks"}}}).must(t, 200)
		if r.num(t, "count") != 3 {
			t.Fatalf("count query: %s", r.raw)
		}
		tg.do(t, "GET", "/"+tg.prefix+"missing/_count", nil).expectError(t, 404, "index_not_found_exception")
	})
}

func TestSearchErrors(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := seedProducts(t, tg)
		path := "/" + name + "/_search"
		tg.do(t, "POST", path, `{"query": {"match_all": {}`).expectError(t, 400, "x_content_parse_exception", "parse_exception", "json_parse_exception")
		tg.do(t, "POST", path, map[string]any{"size": -1}).expectError(t, 400, "illegal_argument_exception", "x_content_parse_exception")
		tg.do(t, "GET", path+"?size=-5", nil).expectError(t, 400, "illegal_argument_exception")
		tg.do(t, "POST", path, map[string]any{"from": -1}).expectError(t, 400, "illegal_argument_exception", "x_content_parse_exception")
		tg.do(t, "POST", path, map[string]any{"from": 9995, "size": 10}).expectError(t, 400, "illegal_argument_exception", "search_phase_execution_exception")
		r := tg.do(t, "POST", path, map[string]any{"query": map[string]any{"no_such_query": map[string]any{}}})
		r.expectError(t, 400, "parsing_exception")
		if !strings.Contains(r.str("error.root_cause.0.reason"), "no_such_query") {
			t.Fatalf("reason does not name the query: %s", r.raw)
		}
		tg.do(t, "POST", path, map[string]any{"query": map[string]any{"match": "x"}}).expectError(t, 400, "parsing_exception")
		tg.do(t, "POST", path, map[string]any{"query": map[string]any{"term": map[string]any{"a": 1, "b": 2}}}).expectError(t, 400, "parsing_exception")
		tg.do(t, "POST", path, map[string]any{"aggs": map[string]any{"x": map[string]any{"no_such_agg": map[string]any{}}}}).expectError(t, 400, "parsing_exception", "x_content_parse_exception", "named_object_not_found_exception")
		tg.do(t, "POST", "/"+tg.prefix+"missing/_search", nil).expectError(t, 404, "index_not_found_exception")
		// Nothing above changed the data.
		if c := tg.do(t, "GET", "/"+name+"/_count", nil).must(t, 200); c.num(t, "count") != 6 {
			t.Fatalf("data changed: %s", c.raw)
		}
	})
}
