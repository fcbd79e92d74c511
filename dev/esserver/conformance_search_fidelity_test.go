package esserver

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// Search fidelity (issue 29): every search option the server accepts
// behaves as in Elasticsearch 8, or is refused with a 400 that names it.

// errReason returns the reason of an error body (root cause first).
func errReason(r resp) string {
	if s := r.str("error.root_cause.0.reason"); s != "" {
		return s
	}
	return r.str("error.reason")
}

func expectReason(t *testing.T, r resp, status int, want string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body: %s", r.status, status, r.raw)
	}
	if !strings.Contains(errReason(r), want) && !strings.Contains(r.str("error.reason"), want) {
		t.Fatalf("reason %q does not contain %q; body: %s", errReason(r), want, r.raw)
	}
}

func TestSearchOnIDField(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "ids")
		tg.do(t, "POST", "/_bulk?refresh=true", ndjson(
			map[string]any{"index": map[string]any{"_index": name, "_id": "1"}}, map[string]any{"v": "a"},
			map[string]any{"index": map[string]any{"_index": name, "_id": "2"}}, map[string]any{"v": "b"},
			map[string]any{"index": map[string]any{"_index": name, "_id": "abc"}}, map[string]any{"v": "c"},
		)).must(t, 200)
		cases := []struct {
			name  string
			query any
			ids   []string
		}{
			{"term", map[string]any{"term": map[string]any{"_id": "1"}}, []string{"1"}},
			{"term object", map[string]any{"term": map[string]any{"_id": map[string]any{"value": "abc"}}}, []string{"abc"}},
			{"term number", map[string]any{"term": map[string]any{"_id": 2}}, []string{"2"}},
			{"terms", map[string]any{"terms": map[string]any{"_id": []any{"1", "abc", "zz"}}}, []string{"1", "abc"}},
			{"ids numeric", map[string]any{"ids": map[string]any{"values": []any{1, "abc"}}}, []string{"1", "abc"}},
			{"match", map[string]any{"match": map[string]any{"_id": "2"}}, []string{"2"}},
			{"bool filter", map[string]any{"bool": map[string]any{"filter": map[string]any{"term": map[string]any{"_id": "abc"}}}}, []string{"abc"}},
		}
		for _, c := range cases {
			r := tg.do(t, "POST", "/"+name+"/_search", map[string]any{"query": c.query}).must(t, 200)
			if got := sortedIDs(r); !eqStrings(got, c.ids) {
				t.Fatalf("%s: ids %v, want %v; body: %s", c.name, got, c.ids, r.raw)
			}
		}
		r := tg.do(t, "GET", "/"+name+"/_search?q=_id:abc", nil).must(t, 200)
		if got := hitIDs(r); !eqStrings(got, []string{"abc"}) {
			t.Fatalf("q=_id:abc: %s", r.raw)
		}
	})
}

func TestSearchMinScore(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := seedProducts(t, tg)
		q := map[string]any{"match": map[string]any{"title": "apple juice"}}
		all := tg.do(t, "POST", "/"+name+"/_search", map[string]any{"query": q}).must(t, 200)
		top := all.num(t, "hits.hits.0._score")
		second := all.num(t, "hits.hits.1._score")
		if top <= second {
			t.Fatalf("need distinct scores: %s", all.raw)
		}
		r := tg.do(t, "POST", "/"+name+"/_search", map[string]any{"query": q, "min_score": (top + second) / 2}).must(t, 200)
		if got := hitIDs(r); !eqStrings(got, []string{"p1"}) || r.num(t, "hits.total.value") != 1 {
			t.Fatalf("min_score between: %s", r.raw)
		}
		r = tg.do(t, "POST", "/"+name+"/_search", map[string]any{"query": q, "min_score": top * 10}).must(t, 200)
		if len(hitIDs(r)) != 0 || r.num(t, "hits.total.value") != 0 {
			t.Fatalf("min_score above all: %s", r.raw)
		}
		r = tg.do(t, "POST", "/"+name+"/_search", map[string]any{"query": q, "min_score": 0}).must(t, 200)
		if r.num(t, "hits.total.value") != 4 {
			t.Fatalf("min_score 0: %s", r.raw)
		}
		tg.do(t, "POST", "/"+name+"/_search", map[string]any{"min_score": "x"}).expectError(t, 400, "x_content_parse_exception", "parsing_exception", "illegal_argument_exception")
	})
}

func TestURISearchParameters(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := seedProducts(t, tg)
		search := func(params string) resp {
			return tg.do(t, "GET", "/"+name+"/_search?"+params, nil)
		}
		check := func(params string, want ...string) {
			t.Helper()
			r := search(params).must(t, 200)
			if got := sortedIDs(r); !eqStrings(got, want) {
				t.Fatalf("%s: ids %v, want %v; body: %s", params, got, want, r.raw)
			}
		}
		check("q=apple&df=title", "p1", "p2", "p5")
		check("q="+url.QueryEscape("apple juice")+"&df=title", "p1", "p2", "p3", "p5")
		check("q="+url.QueryEscape("apple juice")+"&df=title&default_operator=AND", "p1")
		check("q="+url.QueryEscape("apple juice")+"&df=title&default_operator=and", "p1")
		check("q="+url.QueryEscape("title:apple AND category:bakery"), "p5")
		check("q="+url.QueryEscape("title:apple OR category:bakery"), "p1", "p2", "p4", "p5")
		check("q="+url.QueryEscape("title:apple -category:bakery"), "p1", "p2")
		check("q="+url.QueryEscape("title:apple AND NOT category:drinks"), "p2", "p5")
		check("q="+url.QueryEscape("+title:apple +active:true"), "p1", "p2", "p5")
		check("q="+url.QueryEscape("(title:juice OR title:water) AND active:false"), "p3", "p6")
		check("q=title:app*", "p1", "p2", "p5")
		check("q=title:app*&analyze_wildcard=true", "p1", "p2", "p5")
		check("q=category:dr*", "p1", "p3", "p6")
		check("q="+url.QueryEscape("stock:[5 TO 100]"), "p1", "p2", "p4")
		check("q="+url.QueryEscape("price:>4"), "p4", "p5")
		// An explicit analyzer replaces the field's: keyword keeps the case.
		check("q=title:Apple&analyzer=keyword")
		check("q=title:Apple&analyzer=standard", "p1", "p2", "p5")
		// A value that cannot apply to a numeric field is an error unless
		// lenient.
		search("q=stock:abc").expectError(t, 400, "query_shard_exception", "search_phase_execution_exception")
		check("q=stock:abc&lenient=true")
		// Bad values and unknown parameters are refused, never ignored.
		// Operator.fromString is Enum.valueOf: Java's message.
		expectReason(t, search("q=apple&default_operator=XOR"), 400, "No enum constant org.elasticsearch.index.query.Operator.XOR")
		expectReason(t, search("df=title"), 400, "contains parameters [df] but missing query string parameter 'q'.")
		expectReason(t, search("q=apple&no_such_param=1"), 400, "contains unrecognized parameter: [no_such_param]")
		// _count takes the same URI-search parameters.
		c := tg.do(t, "GET", "/"+name+"/_count?q="+url.QueryEscape("apple juice")+"&df=title&default_operator=AND", nil).must(t, 200)
		if c.num(t, "count") != 1 {
			t.Fatalf("_count default_operator: %s", c.raw)
		}
	})
}

func TestTotalHitsAsIntAndTracking(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := seedProducts(t, tg)
		p := "/" + name + "/_search"
		r := tg.do(t, "GET", p+"?rest_total_hits_as_int=true&track_total_hits=false", nil).must(t, 200)
		if r.num(t, "hits.total") != -1 {
			t.Fatalf("track_total_hits=false as int: %s", r.raw)
		}
		r = tg.do(t, "GET", p+"?rest_total_hits_as_int=true&track_total_hits=true", nil).must(t, 200)
		if r.num(t, "hits.total") != 6 {
			t.Fatalf("track_total_hits=true as int: %s", r.raw)
		}
		expectReason(t, tg.do(t, "GET", p+"?rest_total_hits_as_int=true&track_total_hits=100", nil), 400,
			"[rest_total_hits_as_int] cannot be used if the tracking of total hits is not accurate, got 100")
		expectReason(t, tg.do(t, "POST", p+"?rest_total_hits_as_int=true", map[string]any{"track_total_hits": 3}), 400,
			"[rest_total_hits_as_int] cannot be used if the tracking of total hits is not accurate, got 3")
		r = tg.do(t, "POST", p, map[string]any{"track_total_hits": -1}).must(t, 200)
		if r.get("hits.total") != nil {
			t.Fatalf("track_total_hits -1 disables: %s", r.raw)
		}
		expectReason(t, tg.do(t, "POST", p, map[string]any{"track_total_hits": -2}), 400, "[track_total_hits] parameter must be positive or equals to -1, got -2")
	})
}

func TestSearchNegativeLimitsAndTerminateAfter(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := seedProducts(t, tg)
		p := "/" + name + "/_search"
		expectReason(t, tg.do(t, "GET", p+"?size=-1", nil), 400, "[size] parameter cannot be negative, found [-1]")
		expectReason(t, tg.do(t, "POST", p, map[string]any{"size": -1}), 400, "[size] parameter cannot be negative, found [-1]")
		expectReason(t, tg.do(t, "GET", p+"?from=-2", nil), 400, "[from] parameter cannot be negative")
		expectReason(t, tg.do(t, "GET", p+"?terminate_after=-1", nil), 400, "terminateAfter must be > 0")
		expectReason(t, tg.do(t, "POST", p, map[string]any{"terminate_after": -1}), 400, "terminateAfter must be > 0")
		r := tg.do(t, "POST", p, map[string]any{"terminate_after": 2}).must(t, 200)
		if len(hitIDs(r)) != 2 || r.num(t, "hits.total.value") != 2 || r.get("terminated_early") != true {
			t.Fatalf("terminate_after 2: %s", r.raw)
		}
		r = tg.do(t, "GET", p+"?terminate_after=100", nil).must(t, 200)
		if r.num(t, "hits.total.value") != 6 || r.get("terminated_early") != false {
			t.Fatalf("terminate_after 100: %s", r.raw)
		}
		c := tg.do(t, "GET", "/"+name+"/_count?terminate_after=1", nil).must(t, 200)
		if c.num(t, "count") != 1 || c.get("terminated_early") != true {
			t.Fatalf("_count terminate_after: %s", c.raw)
		}
	})
}

func TestTermsQueryMaxTermsCount(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "maxterms")
		tg.do(t, "PUT", "/"+name, map[string]any{"settings": map[string]any{"index.max_terms_count": 2},
			"mappings": map[string]any{"properties": map[string]any{"k": map[string]any{"type": "keyword"}}}}).must(t, 200)
		tg.do(t, "PUT", "/"+name+"/_doc/1?refresh=true", map[string]any{"k": "a"}).must(t, 201)
		r := tg.do(t, "POST", "/"+name+"/_search", map[string]any{"query": map[string]any{"terms": map[string]any{"k": []string{"a", "b"}}}}).must(t, 200)
		if r.num(t, "hits.total.value") != 1 {
			t.Fatalf("within limit: %s", r.raw)
		}
		r = tg.do(t, "POST", "/"+name+"/_search", map[string]any{"query": map[string]any{"terms": map[string]any{"k": []string{"a", "b", "c"}}}})
		r.expectError(t, 400, "illegal_argument_exception", "search_phase_execution_exception")
		want := "The number of terms [3] used in the Terms Query request has exceeded the allowed maximum of [2]. This maximum can be set by changing the [index.max_terms_count] index level setting."
		if errReason(r) != want {
			t.Fatalf("reason %q; body: %s", errReason(r), r.raw)
		}
	})
}

func TestSearchAfter(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "after")
		tg.do(t, "PUT", "/"+name, map[string]any{"mappings": map[string]any{"properties": map[string]any{
			"n": map[string]any{"type": "long"}, "k": map[string]any{"type": "keyword"}, "at": map[string]any{"type": "date", "format": "yyyy-MM-dd HH:mm:ss"},
		}}}).must(t, 200)
		var lines []any
		for i := 0; i < 7; i++ {
			lines = append(lines, map[string]any{"index": map[string]any{"_index": name, "_id": fmt.Sprint(i)}},
				map[string]any{"n": i / 2, "k": fmt.Sprintf("k%d", i), "at": fmt.Sprintf("2024-01-0%d 10:00:00", 1+i/3)})
		}
		tg.do(t, "POST", "/_bulk?refresh=true", ndjson(lines...)).must(t, 200)
		// Page through n desc, k asc (the tiebreaker) two at a time.
		sort := []any{map[string]any{"n": "desc"}, map[string]any{"k": "asc"}}
		var seen []string
		var after []any
		for page := 0; page < 5; page++ {
			body := map[string]any{"size": 2, "sort": sort}
			if after != nil {
				body["search_after"] = after
			}
			r := tg.do(t, "POST", "/"+name+"/_search", body).must(t, 200)
			if r.num(t, "hits.total.value") != 7 {
				t.Fatalf("total with search_after: %s", r.raw)
			}
			hits, _ := r.get("hits.hits").([]any)
			if len(hits) == 0 {
				break
			}
			for _, h := range hits {
				seen = append(seen, get(h, "_id").(string))
			}
			after, _ = get(hits[len(hits)-1], "sort").([]any)
		}
		if want := []string{"6", "4", "5", "2", "3", "0", "1"}; !eqStrings(seen, want) {
			t.Fatalf("pages %v, want %v", seen, want)
		}
		// A date sort value may be given formatted.
		r := tg.do(t, "POST", "/"+name+"/_search", map[string]any{"size": 10, "sort": []any{map[string]any{"at": "asc"}, map[string]any{"k": "asc"}},
			"search_after": []any{"2024-01-02 10:00:00", "k3"}}).must(t, 200)
		if got := hitIDs(r); !eqStrings(got, []string{"4", "5", "6"}) {
			t.Fatalf("formatted date search_after: %s", r.raw)
		}
		// Errors.
		bad := tg.do(t, "POST", "/"+name+"/_search", map[string]any{"sort": sort, "search_after": []any{1}})
		expectReason(t, bad, 400, "search_after has 1 value(s) but sort has 2.")
		bad = tg.do(t, "POST", "/"+name+"/_search", map[string]any{"search_after": []any{1}})
		expectReason(t, bad, 400, "Sort must contain at least one field.")
		bad = tg.do(t, "POST", "/"+name+"/_search", map[string]any{"from": 1, "sort": sort, "search_after": []any{1, "k1"}})
		expectReason(t, bad, 400, "`from` parameter must be set to 0 when `search_after` is used.")
	})
}

func TestDateNanosAndJavaYearFormats(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "nanos")
		tg.do(t, "PUT", "/"+name, map[string]any{"mappings": map[string]any{"properties": map[string]any{
			"ts":  map[string]any{"type": "date_nanos"},
			"day": map[string]any{"type": "date", "format": "uuuu-MM-dd"},
		}}}).must(t, 200)
		tg.do(t, "POST", "/_bulk?refresh=true", ndjson(
			map[string]any{"index": map[string]any{"_index": name, "_id": "a"}}, map[string]any{"ts": "2021-03-04T05:06:07.123456789Z", "day": "2021-03-04"},
			map[string]any{"index": map[string]any{"_index": name, "_id": "b"}}, map[string]any{"ts": "2021-03-04T05:06:07.987654321Z", "day": "2022-12-31"},
		)).must(t, 200)
		r := tg.do(t, "POST", "/"+name+"/_search", map[string]any{"sort": []any{map[string]any{"ts": "desc"}}}).must(t, 200)
		if got := hitIDs(r); !eqStrings(got, []string{"b", "a"}) {
			t.Fatalf("date_nanos order: %s", r.raw)
		}
		if !strings.Contains(string(r.raw), `"sort":[1614834367987654321]`) || !strings.Contains(string(r.raw), `"sort":[1614834367123456789]`) {
			t.Fatalf("date_nanos sort values must be nanoseconds: %s", r.raw)
		}
		r = tg.do(t, "POST", "/"+name+"/_search", map[string]any{"query": map[string]any{"range": map[string]any{"day": map[string]any{"gte": "2022-01-01"}}}}).must(t, 200)
		if got := hitIDs(r); !eqStrings(got, []string{"b"}) {
			t.Fatalf("uuuu-MM-dd range: %s", r.raw)
		}
		r = tg.do(t, "POST", "/"+name+"/_search", map[string]any{"query": map[string]any{"term": map[string]any{"day": "2021-03-04"}}}).must(t, 200)
		if got := hitIDs(r); !eqStrings(got, []string{"a"}) {
			t.Fatalf("uuuu-MM-dd term: %s", r.raw)
		}
		r = tg.do(t, "POST", "/"+name+"/_search", map[string]any{"query": map[string]any{"range": map[string]any{"ts": map[string]any{
			"gte": "2021/03/04", "format": "uuuu/MM/dd"}}}}).must(t, 200)
		if r.num(t, "hits.total.value") != 2 {
			t.Fatalf("uuuu/MM/dd range format: %s", r.raw)
		}
	})
}

func TestNamedQueries(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := seedProducts(t, tg)
		r := tg.do(t, "POST", "/"+name+"/_search", map[string]any{"query": map[string]any{"bool": map[string]any{"should": []any{
			map[string]any{"term": map[string]any{"category": map[string]any{"value": "drinks", "_name": "drinks"}}},
			map[string]any{"match": map[string]any{"title": map[string]any{"query": "apple", "_name": "apple"}}},
			map[string]any{"range": map[string]any{"price": map[string]any{"gt": 100, "_name": "dear"}}},
		}}}, "size": 10}).must(t, 200)
		want := map[string]string{"p1": "apple,drinks", "p2": "apple", "p3": "drinks", "p5": "apple", "p6": "drinks"}
		for _, h := range r.get("hits.hits").([]any) {
			var names []string
			for _, n := range get(h, "matched_queries").([]any) {
				names = append(names, n.(string))
			}
			sortStrings(names)
			if id := get(h, "_id").(string); strings.Join(names, ",") != want[id] {
				t.Fatalf("%s matched %v, want %s; body: %s", id, names, want[id], r.raw)
			}
		}
		r = tg.do(t, "POST", "/"+name+"/_search", map[string]any{"query": map[string]any{"match_all": map[string]any{}}, "size": 1}).must(t, 200)
		if r.get("hits.hits.0.matched_queries") != nil {
			t.Fatalf("no named queries: %s", r.raw)
		}
	})
}

func TestQueryDSLOptionsAreHonouredOrRefused(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := seedProducts(t, tg)
		p := "/" + name + "/_search"
		ids := func(body map[string]any) []string {
			t.Helper()
			return sortedIDs(tg.do(t, "POST", p, body).must(t, 200))
		}
		q := func(query map[string]any) map[string]any { return map[string]any{"query": query} }
		// query_string in the body.
		if got := ids(q(map[string]any{"query_string": map[string]any{"query": "apple juice", "default_field": "title", "default_operator": "AND"}})); !eqStrings(got, []string{"p1"}) {
			t.Fatalf("query_string AND: %v", got)
		}
		if got := ids(q(map[string]any{"query_string": map[string]any{"query": "category:(bakery OR fruit) AND NOT title:pie"}})); !eqStrings(got, []string{"p2", "p4"}) {
			t.Fatalf("query_string groups: %v", got)
		}
		// match analyzer: keyword keeps the query text whole and cased.
		if got := ids(q(map[string]any{"match": map[string]any{"title": map[string]any{"query": "Apple", "analyzer": "keyword"}}})); len(got) != 0 {
			t.Fatalf("match analyzer keyword: %v", got)
		}
		// multi_match is strict on typed fields unless lenient.
		tg.do(t, "POST", p, q(map[string]any{"multi_match": map[string]any{"query": "apple", "fields": []string{"title", "stock"}}})).
			expectError(t, 400, "query_shard_exception", "search_phase_execution_exception")
		if got := ids(q(map[string]any{"multi_match": map[string]any{"query": "apple", "fields": []string{"title", "stock"}, "lenient": true}})); !eqStrings(got, []string{"p1", "p2", "p5"}) {
			t.Fatalf("multi_match lenient: %v", got)
		}
		// match lenient.
		if got := ids(q(map[string]any{"match": map[string]any{"stock": map[string]any{"query": "x", "lenient": true}}})); len(got) != 0 {
			t.Fatalf("match lenient: %v", got)
		}
		// Options that are not implemented are refused, naming them.
		for _, c := range []struct {
			body map[string]any
			want string
		}{
			{q(map[string]any{"term": map[string]any{"category": map[string]any{"value": "Drinks", "case_insensitive": true}}}), "case_insensitive"},
			{q(map[string]any{"prefix": map[string]any{"category": map[string]any{"value": "Dr", "case_insensitive": true}}}), "case_insensitive"},
			{q(map[string]any{"terms": map[string]any{"category": map[string]any{"index": "x", "id": "1", "path": "p"}}}), "terms lookup"},
			{map[string]any{"sort": map[string]any{"price": map[string]any{"mode": "avg"}}}, "avg"},
			{map[string]any{"sort": map[string]any{"_script": map[string]any{"type": "number"}}}, "_script"},
			{map[string]any{"explain": true}, "explain"},
			{map[string]any{"profile": true}, "profile"},
		} {
			r := tg.do(t, "POST", p, c.body)
			if r.status != 400 || !strings.Contains(errReason(r), c.want) {
				if tg.local != nil {
					t.Fatalf("%v: want a 400 naming %q; got %d %s", c.body, c.want, r.status, r.raw)
				}
			}
		}
		// time_zone only applies to dates.
		tg.do(t, "POST", p, q(map[string]any{"range": map[string]any{"price": map[string]any{"gte": 1, "time_zone": "+01:00"}}})).
			expectError(t, 400, "query_shard_exception", "search_phase_execution_exception")
	})
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func TestIDsQueryWithinResultWindow(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "idswin")
		tg.do(t, "PUT", "/"+name, map[string]any{"settings": map[string]any{"index.max_result_window": 2}}).must(t, 200)
		tg.do(t, "PUT", "/"+name+"/_doc/1?refresh=true", map[string]any{"k": "v"}).must(t, 201)
		r := tg.do(t, "POST", "/"+name+"/_search", map[string]any{"query": map[string]any{"ids": map[string]any{"values": []any{1, 2}}}, "size": 2}).must(t, 200)
		if len(hitIDs(r)) != 1 {
			t.Fatalf("ids within window: %s", r.raw)
		}
		r = tg.do(t, "POST", "/"+name+"/_search", map[string]any{"query": map[string]any{"ids": map[string]any{"values": []any{1, 2, 3}}}, "size": 2})
		r.expectError(t, 400, "query_shard_exception", "search_phase_execution_exception")
		if r.str("error.root_cause.0.type") != "query_shard_exception" || errReason(r) != "failed to create query: Too many ids specified, allowed max result window is [2]" {
			t.Fatalf("ids above window: %s", r.raw)
		}
	})
}

func TestSortFormat(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := seedProducts(t, tg)
		sort := []any{map[string]any{"at": map[string]any{"order": "asc", "format": "yyyy-MM-dd | HH:mm"}}}
		r := tg.do(t, "POST", "/"+name+"/_search", map[string]any{"size": 1, "sort": sort}).must(t, 200)
		if v := r.get("hits.hits.0.sort.0"); v != "2024-01-01 | 10:00" {
			t.Fatalf("formatted sort value %v: %s", v, r.raw)
		}
		r = tg.do(t, "POST", "/"+name+"/_search", map[string]any{"size": 1, "sort": sort, "search_after": []any{"2024-01-01 | 10:00"}}).must(t, 200)
		if got := hitIDs(r); !eqStrings(got, []string{"p2"}) || r.get("hits.hits.0.sort.0") != "2024-01-01 | 15:30" {
			t.Fatalf("search_after in the sort's format: %s", r.raw)
		}
		r = tg.do(t, "POST", "/"+name+"/_search", map[string]any{"size": 1, "sort": sort, "search_after": []any{"2024-01-01T10:00:00Z"}})
		if r.status != 400 || !strings.Contains(errReason(r), "failed to parse date field") {
			t.Fatalf("search_after in another format: %s", r.raw)
		}
	})
}

func TestIndexDefaultField(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "deffield")
		tg.do(t, "PUT", "/"+name, map[string]any{"settings": map[string]any{"index.query.default_field": []string{"a", "b"}}}).must(t, 200)
		tg.do(t, "PUT", "/"+name+"/_doc/1?refresh=true", map[string]any{"a": "x", "b": "y", "c": "z"}).must(t, 201)
		for q, want := range map[string]float64{"x": 1, "y": 1, "z": 0, "c:z": 1} {
			r := tg.do(t, "GET", "/"+name+"/_search?q="+url.QueryEscape(q), nil).must(t, 200)
			if r.num(t, "hits.total.value") != want {
				t.Fatalf("q=%s with index.query.default_field [a, b]: %s", q, r.raw)
			}
		}
	})
}

func TestPostFilter(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := seedProducts(t, tg)
		p := "/" + name + "/_search"
		r := tg.do(t, "POST", p, map[string]any{
			"post_filter": map[string]any{"term": map[string]any{"category": "drinks"}},
			"aggs":        map[string]any{"cats": map[string]any{"terms": map[string]any{"field": "category"}}},
		}).must(t, 200)
		if got := sortedIDs(r); !eqStrings(got, []string{"p1", "p3", "p6"}) || r.num(t, "hits.total.value") != 3 {
			t.Fatalf("post_filter hits: %s", r.raw)
		}
		if r.str("aggregations.cats.buckets.0.key") != "drinks" || r.num(t, "aggregations.cats.buckets.0.doc_count") != 3 ||
			r.num(t, "aggregations.cats.buckets.1.doc_count") != 2 || r.num(t, "aggregations.cats.buckets.2.doc_count") != 1 {
			t.Fatalf("post_filter must not filter aggregations: %s", r.raw)
		}
		// The filter does not change scores.
		q := map[string]any{"match": map[string]any{"title": "apple juice"}}
		plain := tg.do(t, "POST", p, map[string]any{"query": q}).must(t, 200)
		filtered := tg.do(t, "POST", p, map[string]any{"query": q, "post_filter": map[string]any{"term": map[string]any{"active": true}}}).must(t, 200)
		scores := map[string]any{}
		for _, h := range plain.get("hits.hits").([]any) {
			scores[get(h, "_id").(string)] = get(h, "_score")
		}
		if got := sortedIDs(filtered); !eqStrings(got, []string{"p1", "p2", "p5"}) {
			t.Fatalf("post_filter with query: %s", filtered.raw)
		}
		for _, h := range filtered.get("hits.hits").([]any) {
			if id := get(h, "_id").(string); get(h, "_score") != scores[id] {
				t.Fatalf("score of %s changed by post_filter: %v vs %v", id, get(h, "_score"), scores[id])
			}
		}
	})
}
