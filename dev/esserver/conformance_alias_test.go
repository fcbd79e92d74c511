package esserver

import (
	"strings"
	"testing"
)

func TestAliases(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		v1, v2 := tg.idx(t, "v1"), tg.idx(t, "v2")
		alias := tg.prefix + "current"
		tg.do(t, "PUT", "/"+v1+"/_doc/a?refresh=true", map[string]any{"gen": 1}).must(t, 201)
		tg.do(t, "PUT", "/"+v2+"/_doc/b?refresh=true", map[string]any{"gen": 2}).must(t, 201)

		tg.do(t, "POST", "/_aliases", map[string]any{"actions": []any{
			map[string]any{"add": map[string]any{"index": v1, "alias": alias}},
		}}).must(t, 200)
		tg.do(t, "HEAD", "/_alias/"+alias, nil).must(t, 200)
		if ids := hitIDs(tg.do(t, "GET", "/"+alias+"/_search", nil).must(t, 200)); !eqStrings(ids, []string{"a"}) {
			t.Fatalf("search via alias: %v", ids)
		}
		if g := tg.do(t, "GET", "/"+alias+"/_doc/a", nil).must(t, 200); g.str("_index") != v1 {
			t.Fatalf("get via alias: %s", g.raw)
		}
		// Writes through an alias with one index go to that index.
		w := tg.do(t, "PUT", "/"+alias+"/_doc/c?refresh=true", map[string]any{"gen": 1}).must(t, 201)
		if w.str("_index") != v1 {
			t.Fatalf("write via alias went to %q", w.str("_index"))
		}

		// Atomic swap: remove v1 and add v2 in one call.
		tg.do(t, "POST", "/_aliases", map[string]any{"actions": []any{
			map[string]any{"remove": map[string]any{"index": v1, "alias": alias}},
			map[string]any{"add": map[string]any{"index": v2, "alias": alias}},
		}}).must(t, 200)
		if ids := hitIDs(tg.do(t, "GET", "/"+alias+"/_search", nil).must(t, 200)); !eqStrings(ids, []string{"b"}) {
			t.Fatalf("search via alias after swap: %v", ids)
		}
		ga := tg.do(t, "GET", "/_alias/"+alias, nil).must(t, 200)
		if len(ga.body) != 1 || ga.get(v2+".aliases."+alias) == nil {
			t.Fatalf("GET _alias after swap: %s", ga.raw)
		}
		ia := tg.do(t, "GET", "/"+v1+"/_alias", nil).must(t, 200)
		if al, _ := ia.get(v1 + ".aliases").(map[string]any); al == nil || len(al) != 0 {
			t.Fatalf("GET {index}/_alias: %s", ia.raw)
		}

		// A failing action changes nothing: the add of a valid alias is not
		// applied because removing a missing alias fails.
		other := tg.prefix + "other"
		f := tg.do(t, "POST", "/_aliases", map[string]any{"actions": []any{
			map[string]any{"add": map[string]any{"index": v1, "alias": other}},
			map[string]any{"remove": map[string]any{"index": v1, "alias": tg.prefix + "never-existed", "must_exist": true}},
		}})
		f.expectError(t, 404, "aliases_not_found_exception")
		tg.do(t, "HEAD", "/_alias/"+other, nil).must(t, 404)
		f = tg.do(t, "POST", "/_aliases", map[string]any{"actions": []any{
			map[string]any{"remove": map[string]any{"index": v2, "alias": alias}},
			map[string]any{"add": map[string]any{"index": tg.prefix + "no-such-index", "alias": alias}},
		}})
		f.expectError(t, 404, "index_not_found_exception")
		if ids := hitIDs(tg.do(t, "GET", "/"+alias+"/_search", nil).must(t, 200)); !eqStrings(ids, []string{"b"}) {
			t.Fatalf("failed swap changed the alias: %v", ids)
		}
		tg.do(t, "GET", "/_alias/"+tg.prefix+"never-existed", nil).must(t, 404)

		// An alias over two indices: reads fan out, writes need a write index.
		tg.do(t, "POST", "/_aliases", map[string]any{"actions": []any{
			map[string]any{"add": map[string]any{"index": v1, "alias": alias}},
		}}).must(t, 200)
		if r := tg.do(t, "GET", "/"+alias+"/_search", nil).must(t, 200); r.num(t, "hits.total.value") != 3 {
			t.Fatalf("search over two indices: %s", r.raw)
		}
		tg.do(t, "PUT", "/"+alias+"/_doc/d", map[string]any{"gen": 0}).expectError(t, 400, "illegal_argument_exception")
		tg.do(t, "GET", "/"+alias+"/_doc/b", nil).expectError(t, 400, "illegal_argument_exception")
		tg.do(t, "POST", "/_aliases", map[string]any{"actions": []any{
			map[string]any{"add": map[string]any{"index": v2, "alias": alias, "is_write_index": true}},
		}}).must(t, 200)
		if w := tg.do(t, "PUT", "/"+alias+"/_doc/d", map[string]any{"gen": 2}).must(t, 201); w.str("_index") != v2 {
			t.Fatalf("write index not used: %s", w.raw)
		}
		// remove_index together with an alias change.
		v3 := tg.idx(t, "v3")
		tg.do(t, "PUT", "/"+v3, nil).must(t, 200)
		tg.do(t, "POST", "/_aliases", map[string]any{"actions": []any{
			map[string]any{"remove_index": map[string]any{"index": v3}},
			map[string]any{"add": map[string]any{"index": v1, "alias": v3}},
		}}).must(t, 200)
		if g := tg.do(t, "GET", "/"+v3+"/_doc/a", nil).must(t, 200); g.str("_index") != v1 {
			t.Fatalf("remove_index + alias: %s", g.raw)
		}
		// Bad alias requests.
		tg.do(t, "POST", "/_aliases", map[string]any{"actions": []any{}}).expectError(t, 400, "action_request_validation_exception")
		tg.do(t, "POST", "/_aliases", map[string]any{"actions": []any{
			map[string]any{"add": map[string]any{"index": v1, "alias": v2}},
		}}).expectError(t, 400, "invalid_alias_name_exception")
		if !strings.HasPrefix(alias, "t-") {
			t.Fatal("unexpected prefix")
		}
	})
}

func TestEndpointsAndContentTypes(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		r := tg.do(t, "GET", "/_nosuchendpoint/x/y", nil)
		if r.status != 400 || !strings.Contains(string(r.raw), "no handler found for uri") {
			t.Fatalf("unknown endpoint: %d %s", r.status, r.raw)
		}
		name := tg.idx(t, "ct")
		tg.do(t, "PUT", "/"+name, nil).must(t, 200)
		m := tg.do(t, "PATCH", "/"+name, nil)
		if m.status != 405 || !strings.Contains(string(m.raw), "Incorrect HTTP method") {
			t.Fatalf("wrong method: %d %s", m.status, m.raw)
		}
		// Compatibility media type accepted and echoed.
		req := `{"v":1}`
		hr := doRaw(t, tg, "PUT", "/"+name+"/_doc/1", req, "application/vnd.elasticsearch+json; compatible-with=8", "application/vnd.elasticsearch+json; compatible-with=8")
		if hr.status != 201 || !strings.Contains(hr.header.Get("Content-Type"), "vnd.elasticsearch+json") {
			t.Fatalf("compat media type: %d %v %s", hr.status, hr.header, hr.raw)
		}
		jr := doRaw(t, tg, "GET", "/"+name+"/_doc/1", "", "", "")
		if !strings.HasPrefix(jr.header.Get("Content-Type"), "application/json") || jr.header.Get("X-Elastic-Product") != "Elasticsearch" {
			t.Fatalf("headers: %v", jr.header)
		}
		bad := doRaw(t, tg, "PUT", "/"+name+"/_doc/2", req, "text/plain", "")
		if bad.status != 406 {
			t.Fatalf("text/plain accepted: %d %s", bad.status, bad.raw)
		}
		tg.do(t, "GET", "/"+name+"/_doc/2", nil).must(t, 404)
		nd := doRaw(t, tg, "POST", "/_bulk", ndjson(map[string]any{"index": map[string]any{"_index": name, "_id": "3"}}, map[string]any{"v": 3}), "application/x-ndjson", "")
		if nd.status != 200 {
			t.Fatalf("ndjson bulk: %d %s", nd.status, nd.raw)
		}
		tg.do(t, "PUT", "/"+name+"/_doc/4?refresh=sometimes", map[string]any{"v": 1}).expectError(t, 400, "illegal_argument_exception")
	})
}

func doRaw(t *testing.T, tg *target, method, path, body, contentType, accept string) resp {
	t.Helper()
	req, err := newRequest(method, tg.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	res, err := tg.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	return readResp(t, res)
}

func TestDynamicMapping(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "dyn")
		// Writing to a missing index creates it with dynamic mapping.
		tg.do(t, "PUT", "/"+name+"/_doc/1?refresh=true", map[string]any{
			"title": "Hello World", "count": 3, "ratio": 0.5, "ok": true, "when": "2024-03-01T10:00:00Z",
			"user": map[string]any{"name": "ann"},
		}).must(t, 201)
		tg.do(t, "PUT", "/"+name+"/_doc/2?refresh=true", map[string]any{"title": "Hello there", "count": 4, "user": map[string]any{"name": "bob"}}).must(t, 201)
		m := tg.do(t, "GET", "/"+name+"/_mapping", nil).must(t, 200)
		p := name + ".mappings.properties."
		checks := map[string]string{
			"title.type": "text", "title.fields.keyword.type": "keyword", "count.type": "long",
			"ratio.type": "float", "ok.type": "boolean", "when.type": "date", "user.properties.name.type": "text",
		}
		for k, want := range checks {
			if got := m.str(p + k); got != want {
				t.Fatalf("%s = %q, want %q: %s", k, got, want, m.raw)
			}
		}
		r := tg.do(t, "POST", "/"+name+"/_search", map[string]any{"query": map[string]any{"match": map[string]any{"title": "hello"}},
			"aggs": map[string]any{"t": map[string]any{"terms": map[string]any{"field": "title.keyword"}}}}).must(t, 200)
		if r.num(t, "hits.total.value") != 2 || r.str("aggregations.t.buckets.0.key") != "Hello World" {
			t.Fatalf("dynamic fields searchable: %s", r.raw)
		}
		if c := tg.do(t, "POST", "/"+name+"/_count", map[string]any{"query": map[string]any{"term": map[string]any{"user.name.keyword": "bob"}}}).must(t, 200); c.num(t, "count") != 1 {
			t.Fatalf("object subfield: %s", c.raw)
		}
		// A later document with a conflicting type is refused.
		tg.do(t, "PUT", "/"+name+"/_doc/3", map[string]any{"count": "many"}).expectError(t, 400, "document_parsing_exception", "mapper_parsing_exception")
		// Explicit mapping updates.
		tg.do(t, "PUT", "/"+name+"/_mapping", map[string]any{"properties": map[string]any{"extra": map[string]any{"type": "keyword"}}}).must(t, 200)
		tg.do(t, "PUT", "/"+name+"/_mapping", map[string]any{"properties": map[string]any{"count": map[string]any{"type": "keyword"}}}).expectError(t, 400, "illegal_argument_exception")
		if m := tg.do(t, "GET", "/"+name+"/_mapping", nil).must(t, 200); m.str(p+"extra.type") != "keyword" || m.str(p+"count.type") != "long" {
			t.Fatalf("put mapping: %s", m.raw)
		}
		// Strict mappings refuse unknown fields.
		strict := tg.idx(t, "strict")
		tg.do(t, "PUT", "/"+strict, map[string]any{"mappings": map[string]any{"dynamic": "strict", "properties": map[string]any{"a": map[string]any{"type": "keyword"}}}}).must(t, 200)
		tg.do(t, "PUT", "/"+strict+"/_doc/1", map[string]any{"a": "x", "b": "y"}).expectError(t, 400, "strict_dynamic_mapping_exception", "document_parsing_exception")
		tg.do(t, "PUT", "/"+strict+"/_doc/1", map[string]any{"a": "x"}).must(t, 201)
	})
}
