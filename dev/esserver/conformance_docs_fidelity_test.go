package esserver

import (
	"strings"
	"testing"
)

// Fidelity tests for the document, bulk, mget, alias, settings and index
// APIs (issue 29): each parameter the server accepts behaves as in
// Elasticsearch 8, or is refused with a 400 naming it. The expected
// behaviour was read from Elasticsearch's REST API spec and YAML tests
// (rest-api-spec/src/yamlRestTest/resources/rest-api-spec/test/...); these
// tests are written independently.

// refused checks a clean "not supported" refusal: 400 whose reason names
// the feature.
func (r resp) refused(t testing.TB, feature string) {
	t.Helper()
	if r.status != 400 || !strings.Contains(r.str("error.reason"), feature) {
		t.Fatalf("want a 400 refusal naming %q; status %d body %s", feature, r.status, r.raw)
	}
}

// get/realtime: realtime=false reads the last refreshed state.
func TestFidelityGetRealtime(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "rt")
		tg.do(t, "PUT", "/"+name, map[string]any{"settings": map[string]any{"refresh_interval": "-1"}}).must(t, 200)
		tg.do(t, "PUT", "/"+name+"/_doc/1", map[string]any{"foo": "bar"}).must(t, 201)
		if r := tg.do(t, "GET", "/"+name+"/_doc/1?realtime=false", nil); r.status != 404 || r.get("found") != false {
			t.Fatalf("realtime=false before refresh: %d %s", r.status, r.raw)
		}
		tg.do(t, "HEAD", "/"+name+"/_doc/1?realtime=false", nil).must(t, 404)
		tg.do(t, "GET", "/"+name+"/_source/1?realtime=false", nil).must(t, 404)
		r := tg.do(t, "POST", "/"+name+"/_mget?realtime=false", map[string]any{"ids": []string{"1"}}).must(t, 200)
		if get(r.get("docs.0"), "found") != false {
			t.Fatalf("mget realtime=false before refresh: %s", r.raw)
		}
		tg.do(t, "GET", "/"+name+"/_doc/1?realtime=true", nil).must(t, 200)
		if r := tg.do(t, "GET", "/"+name+"/_doc/1?realtime=false&refresh=true", nil).must(t, 200); r.str("_source.foo") != "bar" || r.get("_version") != 1.0 {
			t.Fatalf("realtime=false&refresh=true: %s", r.raw)
		}
		// Refreshed now: an update is not seen without realtime.
		tg.do(t, "PUT", "/"+name+"/_doc/1", map[string]any{"foo": "baz"}).must(t, 200)
		if r := tg.do(t, "GET", "/"+name+"/_doc/1?realtime=false", nil).must(t, 200); r.str("_source.foo") != "bar" || r.get("_version") != 1.0 {
			t.Fatalf("realtime=false sees an unrefreshed update: %s", r.raw)
		}
		tg.do(t, "DELETE", "/"+name+"/_doc/1", nil).must(t, 200)
		tg.do(t, "GET", "/"+name+"/_doc/1?realtime=false", nil).must(t, 200)
		tg.do(t, "GET", "/"+name+"/_doc/1", nil).must(t, 404)
	})
}

// get with version: any difference is a conflict, whatever the type.
func TestFidelityGetVersion(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "gv")
		tg.do(t, "PUT", "/"+name+"/_doc/1", map[string]any{"foo": "bar"}).must(t, 201)
		tg.do(t, "PUT", "/"+name+"/_doc/1", map[string]any{"foo": "bar"}).must(t, 200)
		tg.do(t, "GET", "/"+name+"/_doc/1?version=2", nil).must(t, 200)
		r := tg.do(t, "GET", "/"+name+"/_doc/1?version=1", nil)
		r.expectError(t, 409, "version_conflict_engine_exception")
		if !strings.Contains(r.str("error.reason"), "current version [2] is different than the one provided [1]") {
			t.Fatalf("reason: %s", r.raw)
		}
		tg.do(t, "GET", "/"+name+"/_doc/1?version=2&version_type=external", nil).must(t, 200)
		tg.do(t, "GET", "/"+name+"/_doc/1?version=10&version_type=external", nil).expectError(t, 409, "version_conflict_engine_exception")
		tg.do(t, "GET", "/"+name+"/_doc/1?version=1&version_type=external_gte", nil).expectError(t, 409, "version_conflict_engine_exception")
		tg.do(t, "HEAD", "/"+name+"/_doc/1?version=1", nil).must(t, 409)
		tg.do(t, "GET", "/"+name+"/_source/1?version=1", nil).must(t, 409)
	})
}

func TestFidelityUpdate(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "upd")
		tg.do(t, "PUT", "/"+name+"/_doc/1", map[string]any{"foo": "bar", "n": 1}).must(t, 201)
		r := tg.do(t, "POST", "/"+name+"/_update/missing?if_seq_no=0&if_primary_term=1", map[string]any{"doc": map[string]any{"a": 1}})
		r.expectError(t, 404, "document_missing_exception")
		r = tg.do(t, "POST", "/"+name+"/_update/1?_source=true", map[string]any{"doc": map[string]any{"n": 2}}).must(t, 200)
		if r.get("get.found") != true || r.get("get._source.n") != 2.0 || r.get("get._source.foo") != "bar" || r.get("get._primary_term") != 1.0 {
			t.Fatalf("update _source=true: %s", r.raw)
		}
		if _, ok := r.get("get._seq_no").(float64); !ok {
			t.Fatalf("update get lacks _seq_no: %s", r.raw)
		}
		r = tg.do(t, "POST", "/"+name+"/_update/1?_source_includes=foo", map[string]any{"doc": map[string]any{"n": 3}}).must(t, 200)
		if r.get("get._source.foo") != "bar" || r.get("get._source.n") != nil {
			t.Fatalf("update _source_includes: %s", r.raw)
		}
		r = tg.do(t, "POST", "/"+name+"/_update/1", map[string]any{"doc": map[string]any{"n": 4}, "_source": []string{"n"}}).must(t, 200)
		if r.get("get._source.n") != 4.0 || r.get("get._source.foo") != nil {
			t.Fatalf("update body _source: %s", r.raw)
		}
		r = tg.do(t, "POST", "/"+name+"/_update/1", map[string]any{"doc": map[string]any{"n": 5}}).must(t, 200)
		if r.get("get") != nil {
			t.Fatalf("update without _source has get: %s", r.raw)
		}
		r = tg.do(t, "POST", "/"+name+"/_update/1", map[string]any{"dac": map[string]any{"n": 5}})
		r.expectError(t, 400, "x_content_parse_exception")
		if !strings.Contains(r.str("error.reason"), "[UpdateRequest] unknown field [dac] did you mean [doc]?") {
			t.Fatalf("unknown update field: %s", r.raw)
		}
	})
}

func TestFidelityBulk(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "bulk")
		alias := tg.prefix + "bulk-alias"
		tg.do(t, "PUT", "/"+name, map[string]any{"aliases": map[string]any{alias: map[string]any{}}}).must(t, 200)
		r := tg.do(t, "POST", "/_bulk", ndjson(
			map[string]any{"index": map[string]any{"_index": name, "_id": ""}}, map[string]any{"f": 1},
			map[string]any{"index": map[string]any{"_index": name, "require_alias": true}}, map[string]any{"f": 2},
			map[string]any{"index": map[string]any{"_index": alias, "_id": "a", "require_alias": true}}, map[string]any{"f": 3},
		)).must(t, 200)
		if r.get("errors") != true || r.get("items.0.index.status") != 400 && r.get("items.0.index.status") != 400.0 ||
			r.str("items.0.index.error.reason") != "if _id is specified it must not be empty" {
			t.Fatalf("empty _id: %s", r.raw)
		}
		if r.str("items.1.index.error.type") != "index_not_found_exception" ||
			!strings.Contains(r.str("items.1.index.error.reason"), "[require_alias] request flag is [true] and ["+name+"] is not an alias") {
			t.Fatalf("require_alias item: %s", r.raw)
		}
		if r.get("items.2.index.status") != 201.0 || r.str("items.2.index._index") != name {
			t.Fatalf("require_alias through alias: %s", r.raw)
		}
		r = tg.do(t, "POST", "/_bulk?require_alias=true", ndjson(
			map[string]any{"index": map[string]any{"_index": name, "_id": "b"}}, map[string]any{"f": 2},
		)).must(t, 200)
		if r.str("items.0.index.error.type") != "index_not_found_exception" {
			t.Fatalf("require_alias URL: %s", r.raw)
		}
		// _source on update items: in the action line, the source line, or
		// the URL (the default).
		tg.do(t, "PUT", "/"+name+"/_doc/u?refresh=true", map[string]any{"foo": "a", "bar": "b"}).must(t, 201)
		r = tg.do(t, "POST", "/_bulk", ndjson(
			map[string]any{"update": map[string]any{"_index": name, "_id": "u", "_source": true}}, map[string]any{"doc": map[string]any{"foo": "x"}},
			map[string]any{"update": map[string]any{"_index": name, "_id": "u"}}, map[string]any{"_source": map[string]any{"includes": "bar"}, "doc": map[string]any{"foo": "y"}},
			map[string]any{"update": map[string]any{"_index": name, "_id": "u"}}, map[string]any{"doc": map[string]any{"foo": "z"}},
		)).must(t, 200)
		if r.str("items.0.update.get._source.foo") != "x" || r.str("items.1.update.get._source.bar") != "b" ||
			r.get("items.1.update.get._source.foo") != nil || r.get("items.2.update.get") != nil {
			t.Fatalf("bulk update _source: %s", r.raw)
		}
		r = tg.do(t, "POST", "/"+name+"/_bulk?_source_includes=foo", ndjson(
			map[string]any{"update": map[string]any{"_id": "u"}}, map[string]any{"doc": map[string]any{"foo": "w"}},
		)).must(t, 200)
		if r.str("items.0.update.get._source.foo") != "w" || r.get("items.0.update.get._source.bar") != nil {
			t.Fatalf("bulk ?_source_includes: %s", r.raw)
		}
		// An item that fails validation fails the whole request, and
		// nothing is written.
		r = tg.do(t, "POST", "/_bulk", ndjson(
			map[string]any{"index": map[string]any{"_index": name, "_id": "v1"}}, map[string]any{"f": 1},
			map[string]any{"create": map[string]any{"_index": name, "_id": "v2", "version": 3, "version_type": "external"}}, map[string]any{"f": 1},
			map[string]any{"delete": map[string]any{"_index": name, "_id": "v3", "version": 3}},
		))
		r.expectError(t, 400, "action_request_validation_exception")
		if want := "Validation Failed: 1: create operations only support internal versioning. use index instead;2: internal versioning can not be used for optimistic concurrency control. Please use `if_seq_no` and `if_primary_term` instead;"; r.str("error.reason") != want {
			t.Fatalf("reason %q, want %q", r.str("error.reason"), want)
		}
		tg.do(t, "GET", "/"+name+"/_doc/v1", nil).must(t, 404)
		// An empty action line is malformed.
		r = tg.do(t, "POST", "/_bulk", ndjson(
			map[string]any{"index": map[string]any{"_index": name, "_id": "e"}}, map[string]any{"f": 1}, map[string]any{}))
		r.expectError(t, 400, "illegal_argument_exception")
		if want := "Malformed action/metadata line [3], expected FIELD_NAME but found [END_OBJECT]"; r.str("error.reason") != want {
			t.Fatalf("reason %q, want %q", r.str("error.reason"), want)
		}
		// A trailing action line without its source is ignored.
		r = tg.do(t, "POST", "/_bulk", ndjson(
			map[string]any{"index": map[string]any{"_index": name, "_id": "c"}}, map[string]any{"f": 4},
			map[string]any{"index": map[string]any{"_index": name, "_id": "d"}},
		)).must(t, 200)
		if items, _ := r.get("items").([]any); len(items) != 1 || r.get("errors") != false {
			t.Fatalf("trailing action line: %s", r.raw)
		}
	})
}

func TestFidelityUnrecognizedParams(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "params")
		tg.do(t, "PUT", "/"+name+"/_doc/1", map[string]any{"foo": "bar"}).must(t, 201)
		for _, p := range []string{
			"GET /" + name + "/_doc/1?foo=bar",
			"POST /" + name + "/_mget?_type=x",
			"GET /" + name + "/_settings?bogus=1",
			"PUT /" + name + "/_doc/2?nope=1",
		} {
			f := strings.SplitN(p, " ", 2)
			var body any
			if strings.Contains(p, "_mget") {
				body = map[string]any{"ids": []string{"1"}}
			} else if f[0] == "PUT" {
				body = map[string]any{"a": 1}
			}
			r := tg.do(t, f[0], f[1], body)
			r.expectError(t, 400, "illegal_argument_exception")
			if !strings.Contains(r.str("error.reason"), "contains unrecognized parameter") {
				t.Fatalf("%s: %s", p, r.raw)
			}
		}
		r := tg.do(t, "GET", "/"+name+"/_doc/1?realtme=false", nil)
		if want := "request [/" + name + "/_doc/1] contains unrecognized parameter: [realtme] -> did you mean [realtime]?"; r.str("error.reason") != want {
			t.Fatalf("reason %q, want %q", r.str("error.reason"), want)
		}
	})
}

// Routing is refused (one shard per index: routing would be dropped).
func TestFidelityRoutingRefused(t *testing.T) {
	eachLocal(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "routing")
		tg.do(t, "PUT", "/"+name+"/_doc/1?routing=5", map[string]any{"foo": "bar"}).refused(t, "routing")
		tg.do(t, "GET", "/"+name+"/_doc/1?routing=5", nil).refused(t, "routing")
		r := tg.do(t, "POST", "/_bulk", ndjson(map[string]any{"index": map[string]any{"_index": name, "_id": "1", "routing": "x"}}, map[string]any{"a": 1}))
		r.refused(t, "routing")
		tg.do(t, "POST", "/_mget", map[string]any{"docs": []any{map[string]any{"_index": name, "_id": "1", "routing": "x"}}}).refused(t, "routing")
		tg.do(t, "PUT", "/"+name+"-x", map[string]any{"aliases": map[string]any{name + "-a": map[string]any{"routing": "1"}}}).refused(t, "routing")
		tg.do(t, "PUT", "/"+name+"-y", map[string]any{"mappings": map[string]any{"_routing": map[string]any{"required": true}}}).refused(t, "_routing")
	})
}

func TestFidelityAliases(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		ix := tg.idx(t, "al")
		x, y := tg.prefix+"al-x", tg.prefix+"al-y"
		tg.do(t, "PUT", "/"+ix, nil).must(t, 200)
		r := tg.do(t, "POST", "/_aliases", map[string]any{"actions": []any{
			map[string]any{"add": map[string]any{"index": ix, "alias": x}},
			map[string]any{"add": map[string]any{"index": ix, "alias": y}},
		}}).must(t, 200)
		if r.get("acknowledged") != true || r.get("errors") != false {
			t.Fatalf("update aliases: %s", r.raw)
		}
		g := tg.do(t, "GET", "/_alias/"+tg.prefix+"al-*,-"+y, nil).must(t, 200)
		if g.get(ix+".aliases."+x) == nil || g.get(ix+".aliases."+y) != nil {
			t.Fatalf("alias exclusion: %s", g.raw)
		}
		// must_exist: true fails the whole request with 404.
		r = tg.do(t, "POST", "/_aliases", map[string]any{"actions": []any{
			map[string]any{"remove": map[string]any{"index": ix, "alias": tg.prefix + "nope", "must_exist": true}},
		}})
		r.expectError(t, 404, "aliases_not_found_exception")
		// Without must_exist a remove of a missing alias is reported per
		// action (Elasticsearch 8.14+: errors true and action_results).
		r = tg.do(t, "POST", "/_aliases", map[string]any{"actions": []any{
			map[string]any{"remove": map[string]any{"index": ix, "alias": tg.prefix + "nope"}},
			map[string]any{"remove": map[string]any{"index": ix, "alias": y}},
		}}).must(t, 200)
		if r.get("errors") != true || r.get("action_results.0.status") != 404.0 || r.get("action_results.1.status") != 200.0 ||
			r.str("action_results.0.error.type") != "aliases_not_found_exception" {
			t.Fatalf("action_results: %s", r.raw)
		}
		tg.do(t, "HEAD", "/_alias/"+y, nil).must(t, 404)
		// A hidden alias is left out of wildcard expansion unless
		// expand_wildcards asks for hidden ones.
		hid := tg.prefix + "al-hidden"
		tg.do(t, "PUT", "/"+ix+"/_alias/"+hid, map[string]any{"is_hidden": true}).must(t, 200)
		if r := tg.do(t, "GET", "/"+tg.prefix+"al-hid*", nil).must(t, 200); len(r.body) != 0 {
			t.Fatalf("hidden alias expanded: %s", r.raw)
		}
		if r := tg.do(t, "GET", "/"+tg.prefix+"al-hid*?expand_wildcards=open,hidden", nil).must(t, 200); r.get(ix) == nil {
			t.Fatalf("hidden alias with expand_wildcards=hidden: %s", r.raw)
		}
		tg.do(t, "DELETE", "/"+ix+"/_alias/"+hid, nil).must(t, 200)
		// DELETE with an exclusion keeps the excluded alias.
		tg.do(t, "PUT", "/"+ix+"/_alias/"+y, nil).must(t, 200)
		tg.do(t, "DELETE", "/"+ix+"/_alias/"+tg.prefix+"al-*,-"+y, nil).must(t, 200)
		tg.do(t, "HEAD", "/_alias/"+x, nil).must(t, 404)
		tg.do(t, "HEAD", "/_alias/"+y, nil).must(t, 200)
	})
}

func TestFidelitySettings(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		ix := tg.idx(t, "st")
		tg.do(t, "PUT", "/"+ix, map[string]any{"settings": map[string]any{"number_of_shards": 1, "number_of_replicas": 0}}).must(t, 200)
		r := tg.do(t, "GET", "/"+ix+"/_settings/index.number_of_*", nil).must(t, 200)
		if r.str(ix+".settings.index.number_of_shards") != "1" || r.str(ix+".settings.index.number_of_replicas") != "0" || r.get(ix+".settings.index.uuid") != nil {
			t.Fatalf("settings name filter: %s", r.raw)
		}
		r = tg.do(t, "GET", "/"+ix+"/_settings?flat_settings=true", nil).must(t, 200)
		if s, _ := r.get(ix + ".settings").(map[string]any); s == nil || s["index.number_of_shards"] != "1" {
			t.Fatalf("flat_settings: %s", r.raw)
		}
		r = tg.do(t, "GET", "/"+ix+"/_settings?include_defaults=true", nil).must(t, 200)
		if r.get(ix+".defaults.index.max_result_window") != "10000" {
			t.Fatalf("include_defaults: %s", r.raw)
		}
		// PUT /_settings changes every index; the value set is the default,
		// harmless to other indices of a shared cluster, but now explicit.
		tg.do(t, "PUT", "/_settings", map[string]any{"index": map[string]any{"max_result_window": 10000}}).must(t, 200)
		if r := tg.do(t, "GET", "/"+ix+"/_settings/index.max_result_window", nil).must(t, 200); r.str(ix+".settings.index.max_result_window") != "10000" {
			t.Fatalf("PUT /_settings: %s", r.raw)
		}
	})
}

// nested is refused: this server has no nested documents.
func TestFidelityNestedRefused(t *testing.T) {
	eachLocal(t, func(t *testing.T, tg *target) {
		ix := tg.idx(t, "nested")
		tg.do(t, "PUT", "/"+ix, map[string]any{"mappings": map[string]any{"properties": map[string]any{"n": map[string]any{"type": "nested"}}}}).refused(t, "nested")
		tg.do(t, "PUT", "/"+ix, map[string]any{"settings": map[string]any{"index.mapping.total_fields.limit": 5}}).refused(t, "index.mapping.total_fields.limit")
		tg.do(t, "PUT", "/"+ix, nil).must(t, 200)
		tg.do(t, "PUT", "/"+ix+"/_mapping", map[string]any{"properties": map[string]any{"o": map[string]any{"properties": map[string]any{"n": map[string]any{"type": "nested"}}}}}).refused(t, "nested")
		tg.do(t, "PUT", "/"+ix+"/_settings", map[string]any{"index.mapping.depth.limit": 5}).refused(t, "index.mapping.depth.limit")
		tg.do(t, "PUT", "/"+ix+"/_mapping", map[string]any{"properties": map[string]any{"n": map[string]any{"type": "long", "ignore_malformed": true}}}).refused(t, "ignore_malformed")
		tg.do(t, "PUT", "/"+ix+"/_mapping", map[string]any{"properties": map[string]any{"n": map[string]any{"type": "long", "coerce": false}}}).refused(t, "coerce")
	})
}

// Error bodies list their keys in Elasticsearch's order.
func TestFidelityErrorKeyOrder(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.prefix + "no-such"
		r := tg.do(t, "GET", "/"+name+"/_doc/1", nil)
		want := `{"error":{"root_cause":[{"type":"index_not_found_exception","reason":"no such index [` + name + `]","resource.type":"index_or_alias","resource.id":"` + name + `","index_uuid":"_na_","index":"` + name + `"}],"type":"index_not_found_exception","reason":"no such index [` + name + `]","resource.type":"index_or_alias","resource.id":"` + name + `","index_uuid":"_na_","index":"` + name + `"},"status":404}`
		if strings.TrimSpace(string(r.raw)) != want {
			t.Fatalf("error body:\n got %s\nwant %s", r.raw, want)
		}
	})
}

func TestFidelityMgetVersion(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "mgv")
		tg.do(t, "PUT", "/"+name+"/_doc/1", map[string]any{"foo": "bar"}).must(t, 201)
		r := tg.do(t, "POST", "/"+name+"/_mget", map[string]any{"docs": []any{
			map[string]any{"_id": "1", "version": 1},
			map[string]any{"_id": "1", "version": 2},
			map[string]any{"_id": "1", "version": 1, "version_type": "external"},
		}}).must(t, 200)
		if get(r.get("docs.0"), "found") != true || get(r.get("docs.1"), "error.type") != "version_conflict_engine_exception" ||
			get(r.get("docs.2"), "found") != true {
			t.Fatalf("mget version: %s", r.raw)
		}
	})
}

func TestFidelityIndexOptions(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		ix, hidden := tg.idx(t, "opt"), tg.idx(t, "opt-hidden")
		tg.do(t, "PUT", "/"+ix, map[string]any{"settings": map[string]any{"number_of_replicas": 0}}).must(t, 200)
		tg.do(t, "PUT", "/"+hidden, map[string]any{"settings": map[string]any{"index.hidden": true, "number_of_replicas": 0}}).must(t, 200)
		r := tg.do(t, "GET", "/"+tg.prefix+"opt*", nil).must(t, 200)
		if r.get(ix) == nil || r.get(hidden) != nil {
			t.Fatalf("hidden index matched by a wildcard: %s", r.raw)
		}
		r = tg.do(t, "GET", "/"+tg.prefix+"opt*?expand_wildcards=all", nil).must(t, 200)
		if r.get(hidden) == nil {
			t.Fatalf("expand_wildcards=all: %s", r.raw)
		}
		r = tg.do(t, "GET", "/"+tg.prefix+"opt*?expand_wildcards=none", nil).must(t, 200)
		if len(r.body) != 0 {
			t.Fatalf("expand_wildcards=none: %s", r.raw)
		}
		r = tg.do(t, "GET", "/"+ix+"?features=settings&flat_settings=true", nil).must(t, 200)
		if r.get(ix+".mappings") != nil || r.get(ix+".aliases") != nil {
			t.Fatalf("features=settings: %s", r.raw)
		}
		if s, _ := r.get(ix + ".settings").(map[string]any); s["index.number_of_replicas"] != "0" {
			t.Fatalf("get index flat_settings: %s", r.raw)
		}
		// preserve_existing keeps what is set.
		tg.do(t, "PUT", "/"+ix+"/_settings?preserve_existing=true", map[string]any{"index": map[string]any{"number_of_replicas": 1, "max_result_window": 77}}).must(t, 200)
		r = tg.do(t, "GET", "/"+ix+"/_settings?flat_settings=true", nil).must(t, 200)
		if s, _ := r.get(ix + ".settings").(map[string]any); s["index.number_of_replicas"] != "0" || s["index.max_result_window"] != "77" {
			t.Fatalf("preserve_existing: %s", r.raw)
		}
	})
}

func TestFidelityFilterPath(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "fp")
		r := tg.do(t, "POST", "/_bulk?filter_path=items.*.error,errors", ndjson(
			map[string]any{"index": map[string]any{"_index": name, "_id": "1"}}, map[string]any{"f": 1},
			map[string]any{"create": map[string]any{"_index": name, "_id": "1"}}, map[string]any{"f": 1},
		)).must(t, 200)
		items, _ := r.get("items").([]any)
		if r.get("errors") != true || r.get("took") != nil || len(items) != 1 || get(items[0], "create.error.type") != "version_conflict_engine_exception" {
			t.Fatalf("filter_path include: %s", r.raw)
		}
		r = tg.do(t, "GET", "/"+name+"/_doc/1?filter_path=-_source,-_seq_no", nil).must(t, 200)
		if r.get("_source") != nil || r.get("_seq_no") != nil || r.str("_id") != "1" {
			t.Fatalf("filter_path exclude: %s", r.raw)
		}
		r = tg.do(t, "GET", "/"+name+"/_doc/1?filter_path=**.f", nil).must(t, 200)
		if len(r.body) != 1 || r.get("_source.f") != 1.0 {
			t.Fatalf("filter_path **: %s", r.raw)
		}
	})
}

func TestFidelityStaticSettingsReopen(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		ix := tg.idx(t, "reopen")
		tg.do(t, "PUT", "/"+ix, map[string]any{"settings": map[string]any{"number_of_replicas": 0}}).must(t, 200)
		tg.do(t, "PUT", "/"+ix+"/_settings", map[string]any{"index.codec": "best_compression"}).expectError(t, 400, "illegal_argument_exception")
		tg.do(t, "PUT", "/"+ix+"/_settings?reopen=false", map[string]any{"index.codec": "best_compression"}).expectError(t, 400, "illegal_argument_exception")
		tg.do(t, "PUT", "/"+ix+"/_settings?reopen=true", map[string]any{"index.codec": "best_compression"}).must(t, 200)
		if r := tg.do(t, "GET", "/"+ix+"/_settings", nil).must(t, 200); r.str(ix+".settings.index.codec") != "best_compression" {
			t.Fatalf("reopen=true: %s", r.raw)
		}
	})
}

func TestFidelityClusterHealth(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		green, yellow := tg.idx(t, "h-green"), tg.idx(t, "h-yellow")
		tg.do(t, "PUT", "/"+green, map[string]any{"settings": map[string]any{"number_of_replicas": 0}}).must(t, 200)
		tg.do(t, "PUT", "/"+yellow, map[string]any{"settings": map[string]any{"number_of_replicas": 1}}).must(t, 200)
		if r := tg.do(t, "GET", "/_cluster/health/"+green+"?wait_for_status=green&timeout=5s", nil).must(t, 200); r.get("status") != "green" || r.get("timed_out") != false {
			t.Fatalf("health of a green index: %s", r.raw)
		}
		r := tg.do(t, "GET", "/_cluster/health/"+yellow+"?wait_for_status=green&timeout=100ms", nil).must(t, 200)
		if r.get("status") != "yellow" || r.get("timed_out") != true || r.get("unassigned_shards") != 1.0 {
			t.Fatalf("health wait timed out: %s", r.raw)
		}
		r = tg.do(t, "GET", "/_cluster/health/"+yellow+"?level=shards", nil).must(t, 200)
		if r.get("indices."+yellow+".shards.0.primary_active") != true || r.get("indices."+yellow+".status") != "yellow" {
			t.Fatalf("health level=shards: %s", r.raw)
		}
		// More shards than any shared server holds (the stack's serves every test).
		if r := tg.do(t, "GET", "/_cluster/health?wait_for_active_shards=1000000&timeout=1ms", nil).must(t, 200); r.get("timed_out") != true {
			t.Fatalf("wait_for_active_shards: %s", r.raw)
		}
		// auto_expand_replicas on one node: 0 replicas, green.
		auto := tg.idx(t, "h-auto")
		tg.do(t, "PUT", "/"+auto, map[string]any{"settings": map[string]any{"auto_expand_replicas": "0-1"}}).must(t, 200)
		if r := tg.do(t, "GET", "/_cluster/health/"+auto+"?wait_for_status=green&timeout=5s", nil).must(t, 200); r.get("status") != "green" {
			t.Fatalf("auto_expand_replicas: %s", r.raw)
		}
	})
}

// eachLocal runs fn on the in-process server only: for refusals that are
// this server's own (Elasticsearch implements what it refuses), which a
// real Elasticsearch behind ELASTICSEARCH_URL would not give.
func eachLocal(t *testing.T, fn func(t *testing.T, tg *target)) {
	for _, tg := range targets(t) {
		if tg.local != nil {
			t.Run(tg.name, func(t *testing.T) { fn(t, tg) })
		}
	}
}
