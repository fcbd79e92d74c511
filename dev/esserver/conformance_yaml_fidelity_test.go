package esserver

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Fidelity fixes found by running Elasticsearch's REST API YAML tests
// against the server from outside (issue 29). The tests here are the
// project's own; the YAML suites they were found with are named in the
// comments (paths in the elastic/elasticsearch repository, under
// rest-api-spec/src/yamlRestTest/resources/rest-api-spec/test/).

// seedMetricDocs indexes four documents with an integer, a double and a
// keyword field, and returns the index name.
func seedMetricDocs(t *testing.T, tg *target) string {
	t.Helper()
	name := tg.idx(t, "metrics")
	tg.do(t, "PUT", "/"+name, map[string]any{"mappings": map[string]any{"properties": map[string]any{
		"i": map[string]any{"type": "integer"},
		"d": map[string]any{"type": "double"},
		"k": map[string]any{"type": "keyword"},
	}}}).must(t, 200)
	tg.do(t, "POST", "/_bulk?refresh=true", ndjson(
		map[string]any{"index": map[string]any{"_index": name, "_id": "1"}}, map[string]any{"i": 10, "d": 1.5, "k": "a"},
		map[string]any{"index": map[string]any{"_index": name, "_id": "2"}}, map[string]any{"i": 20, "k": "b"},
		map[string]any{"index": map[string]any{"_index": name, "_id": "3"}}, map[string]any{"d": 2.5},
		map[string]any{"index": map[string]any{"_index": name, "_id": "4"}}, map[string]any{"other": true},
	)).must(t, 200)
	return name
}

// The "missing" parameter of values-source aggregations (found with
// search.aggregation/100_avg_metric.yml, 150_stats_metric.yml,
// 170_cardinality_metric.yml): documents without the field are aggregated
// with the missing value, also when the field is mapped nowhere.
func TestAggMissingValue(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := seedMetricDocs(t, tg)
		for _, docValues := range []bool{false, true} {
			if tg.local != nil {
				localIndex(t, tg.local, name).cols.disabled.Store(docValues)
			} else if docValues {
				continue
			}
			r := tg.do(t, "POST", "/"+name+"/_search", map[string]any{"size": 0, "aggs": map[string]any{
				"avg_i":     map[string]any{"avg": map[string]any{"field": "i", "missing": 30}},
				"stats_u":   map[string]any{"stats": map[string]any{"field": "unmapped", "missing": 1}},
				"card_u":    map[string]any{"cardinality": map[string]any{"field": "unmapped", "missing": "x"}},
				"count_k":   map[string]any{"value_count": map[string]any{"field": "k", "missing": "z"}},
				"terms_k":   map[string]any{"terms": map[string]any{"field": "k", "missing": "none"}},
				"max_d":     map[string]any{"max": map[string]any{"field": "d", "missing": 7}},
				"sum_plain": map[string]any{"sum": map[string]any{"field": "i"}},
			}}).must(t, 200)
			checks := map[string]float64{
				"aggregations.avg_i.value":                 (10 + 20 + 30 + 30) / 4.0,
				"aggregations.stats_u.count":               4,
				"aggregations.stats_u.sum":                 4,
				"aggregations.stats_u.min":                 1,
				"aggregations.card_u.value":                1,
				"aggregations.count_k.value":               4,
				"aggregations.max_d.value":                 7,
				"aggregations.sum_plain.value":             30,
				"aggregations.terms_k.buckets.0.doc_count": 2,
			}
			for p, want := range checks {
				if got := r.num(t, p); got != want {
					t.Fatalf("docValues=%v: %s = %v, want %v; body: %s", docValues, p, got, want, r.raw)
				}
			}
			if k := r.str("aggregations.terms_k.buckets.0.key"); k != "none" {
				t.Fatalf("docValues=%v: terms missing bucket %q, want none; body: %s", docValues, k, r.raw)
			}
		}
		r := tg.do(t, "POST", "/"+name+"/_search", map[string]any{"size": 0, "aggs": map[string]any{
			"a": map[string]any{"avg": map[string]any{"field": "i", "missing": "abc"}}}})
		if r.status != 400 {
			t.Fatalf("unparsable missing value: status %d, want 400; body: %s", r.status, r.raw)
		}
	})
}

// cardinality's precision_threshold (search.aggregation/170_cardinality_metric.yml):
// accepted, and a negative one is refused with Elasticsearch's reason.
func TestAggCardinalityPrecisionThreshold(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := seedMetricDocs(t, tg)
		r := tg.do(t, "POST", "/"+name+"/_search", map[string]any{"size": 0, "aggs": map[string]any{
			"c": map[string]any{"cardinality": map[string]any{"field": "k", "precision_threshold": 100}}}}).must(t, 200)
		if got := r.num(t, "aggregations.c.value"); got != 2 {
			t.Fatalf("cardinality %v, want 2; body: %s", got, r.raw)
		}
		r = tg.do(t, "POST", "/"+name+"/_search", map[string]any{"size": 0, "aggs": map[string]any{
			"c": map[string]any{"cardinality": map[string]any{"field": "k", "precision_threshold": -1}}}})
		expectReason(t, r, 400, "[precisionThreshold] must be greater than or equal to 0. Found [-1] in [c]")
		r = tg.do(t, "POST", "/"+name+"/_search", map[string]any{"size": 0, "aggs": map[string]any{
			"c": map[string]any{"avg": map[string]any{"field": "i", "precision_threshold": 100}}}})
		expectReason(t, r, 400, "[avg] unknown field [precision_threshold]")
	})
}

// A "format" on a numeric field is a java.text.DecimalFormat pattern
// (search.aggregation/10_histogram.yml "Format test"): histogram keys get
// key_as_string, metric values value_as_string, stats the *_as_string
// values. The server used to accept the format and ignore it.
func TestAggNumericFormat(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := seedMetricDocs(t, tg)
		r := tg.do(t, "POST", "/"+name+"/_search", map[string]any{"size": 0, "aggs": map[string]any{
			"h":   map[string]any{"histogram": map[string]any{"field": "i", "interval": 10, "format": "Value is ##0.0"}},
			"avg": map[string]any{"avg": map[string]any{"field": "d", "format": "0.000"}},
			"sum": map[string]any{"sum": map[string]any{"field": "i", "format": "#,##0.##'!'"}},
			"st":  map[string]any{"stats": map[string]any{"field": "i", "format": "00"}},
			"raw": map[string]any{"max": map[string]any{"field": "i"}},
		}}).must(t, 200)
		for p, want := range map[string]string{
			"aggregations.h.buckets.0.key_as_string": "Value is 10.0",
			"aggregations.h.buckets.1.key_as_string": "Value is 20.0",
			"aggregations.avg.value_as_string":       "2.000",
			"aggregations.sum.value_as_string":       "30!",
			"aggregations.st.min_as_string":          "10",
			"aggregations.st.max_as_string":          "20",
			"aggregations.st.avg_as_string":          "15",
			"aggregations.st.sum_as_string":          "30",
		} {
			if got := r.str(p); got != want {
				t.Fatalf("%s = %q, want %q; body: %s", p, got, want, r.raw)
			}
		}
		if r.get("aggregations.raw.value_as_string") != nil {
			t.Fatalf("no format: value_as_string rendered; body: %s", r.raw)
		}
		r = tg.do(t, "POST", "/"+name+"/_search", map[string]any{"size": 0, "aggs": map[string]any{
			"h": map[string]any{"histogram": map[string]any{"field": "i", "interval": 10, "format": "0.0E0"}}}})
		if tg.local != nil {
			expectReason(t, r, 400, "[eventpipe] decimal format [0.0E0]")
		}
	})
}

func TestDecimalFormatPatterns(t *testing.T) {
	for _, c := range []struct {
		pattern string
		v       float64
		want    string
	}{
		{"#", 0, "0"},
		{"#.##", 0.5, ".5"},
		{"0.00", 1.005, "1.00"}, // 1.005 is below 1.005 in binary
		{"0.0", 0.25, "0.2"},    // half-even
		{"0.0", 0.35, "0.3"},    // 0.35 is below 0.35 in binary
		{"#,##0", 1234567, "1,234,567"},
		{"#,##0.0#", -1234.5, "-1,234.5"},
		{"000", 7, "007"},
		{"'#'0", 3, "#3"},
		{"0.", 3, "3."},
	} {
		df, err := compileDecimalFormat(c.pattern)
		if err != nil {
			t.Fatalf("%s: %v", c.pattern, err)
		}
		if got := df.format(c.v); got != c.want {
			t.Errorf("%s.format(%v) = %q, want %q", c.pattern, c.v, got, c.want)
		}
	}
	for _, p := range []string{"0%", "0.0E0", "0;(0)", "", "0.0.0"} {
		if _, err := compileDecimalFormat(p); err == nil {
			t.Errorf("%q compiled", p)
		}
	}
}

// Dotted field names in mappings are paths of objects
// (indices.put_mapping/10_basic.yml "Test Create and update mapping").
func TestMappingDottedFieldNames(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "dots")
		tg.do(t, "PUT", "/"+name, map[string]any{"mappings": map[string]any{"properties": map[string]any{
			"a.b":   map[string]any{"type": "keyword"},
			"a.c.d": map[string]any{"type": "long"},
		}}}).must(t, 200)
		tg.do(t, "PUT", "/"+name+"/_mapping", map[string]any{"properties": map[string]any{
			"sub.text": map[string]any{"type": "text"},
		}}).must(t, 200)
		r := tg.do(t, "GET", "/"+name+"/_mapping", nil).must(t, 200)
		for p, want := range map[string]string{
			name + ".mappings.properties.a.properties.b.type":              "keyword",
			name + ".mappings.properties.a.properties.c.properties.d.type": "long",
			name + ".mappings.properties.sub.properties.text.type":         "text",
		} {
			if got := r.str(p); got != want {
				t.Fatalf("%s = %q, want %q; body: %s", p, got, want, r.raw)
			}
		}
		tg.do(t, "PUT", "/"+name+"/_doc/1?refresh=true", map[string]any{"a": map[string]any{"b": "x", "c": map[string]any{"d": 5}}}).must(t, 201)
		r = tg.do(t, "POST", "/"+name+"/_search", map[string]any{"query": map[string]any{"range": map[string]any{"a.c.d": map[string]any{"gte": 5}}}}).must(t, 200)
		if r.num(t, "hits.total.value") != 1 {
			t.Fatalf("range on a.c.d: %s", r.raw)
		}
		r = tg.do(t, "PUT", "/"+name+"/_mapping", map[string]any{"properties": map[string]any{
			"k":   map[string]any{"type": "keyword"},
			"k.x": map[string]any{"type": "keyword"},
		}})
		if r.status != 400 {
			t.Fatalf("leaf and object at one name: status %d; body: %s", r.status, r.raw)
		}
	})
}

// PUT _mapping with a "_doc" type wrapper is refused as Elasticsearch 8
// refuses it (indices.put_mapping/10_basic.yml "Put mappings with explicit
// _doc type"), and a field's meta is replaced by an update, not merged
// ("Update per-field metadata").
func TestPutMappingTypeAndMeta(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "pm")
		tg.do(t, "PUT", "/"+name, map[string]any{"mappings": map[string]any{"properties": map[string]any{
			"foo": map[string]any{"type": "keyword", "meta": map[string]any{"bar": "baz"}},
		}}}).must(t, 200)
		r := tg.do(t, "PUT", "/"+name+"/_mapping", map[string]any{"_doc": map[string]any{"properties": map[string]any{
			"f": map[string]any{"type": "keyword"}}}})
		expectReason(t, r, 400, "Types cannot be provided in put mapping requests")
		if typ := r.str("error.type"); typ != "illegal_argument_exception" {
			t.Fatalf("error type %q; body: %s", typ, r.raw)
		}
		tg.do(t, "PUT", "/"+name+"/_mapping", map[string]any{"properties": map[string]any{
			"foo": map[string]any{"type": "keyword", "meta": map[string]any{"baz": "quux"}}}}).must(t, 200)
		r = tg.do(t, "GET", "/"+name+"/_mapping", nil).must(t, 200)
		meta, _ := r.get(name + ".mappings.properties.foo.meta").(map[string]any)
		if len(meta) != 1 || meta["baz"] != "quux" {
			t.Fatalf("meta after update %v, want {baz: quux}; body: %s", meta, r.raw)
		}
	})
}

// action_results name the concrete indices an alias action resolved to
// (indices.update_aliases/40_must_exist.yml "Single result per input
// action").
func TestAliasActionResultsResolvedIndices(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		a, b := tg.idx(t, "ar1"), tg.idx(t, "ar2")
		tg.do(t, "PUT", "/"+a, nil).must(t, 200)
		tg.do(t, "PUT", "/"+b, nil).must(t, 200)
		pattern := tg.prefix + "ar*"
		r := tg.do(t, "POST", "/_aliases", map[string]any{"actions": []any{
			map[string]any{"add": map[string]any{"index": pattern, "alias": tg.prefix + "al"}},
			map[string]any{"remove": map[string]any{"index": pattern, "alias": tg.prefix + "none"}},
		}}).must(t, 200)
		for i := 0; i < 2; i++ {
			got, _ := r.get(fmt.Sprintf("action_results.%d.action.indices", i)).([]any)
			if len(got) != 2 || got[0] != a || got[1] != b {
				t.Fatalf("action %d indices %v, want [%s %s]; body: %s", i, got, a, b, r.raw)
			}
		}
	})
}

// Date math in index and alias names (indices.update_aliases/10_basic.yml
// "Aliases with date math").
func TestDateMathIndexNames(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		concrete := tg.idx(t, "logs-2022-12-31")
		expr := "<" + tg.prefix + "logs-{2022-12-31||/d{yyyy-MM-dd}}>"
		tg.do(t, "PUT", "/"+url.PathEscape(expr), nil).must(t, 200)
		tg.do(t, "HEAD", "/"+concrete, nil).must(t, 200)
		aliasExpr := "<" + tg.prefix + "al-{2022-12-31||+1d{yyyy.MM.dd}}>"
		tg.do(t, "POST", "/_aliases", map[string]any{"actions": []any{
			map[string]any{"add": map[string]any{"index": expr, "alias": aliasExpr}},
		}}).must(t, 200)
		tg.do(t, "HEAD", "/_alias/"+tg.prefix+"al-2023.01.01", nil).must(t, 200)
		tg.do(t, "PUT", "/"+url.PathEscape(expr)+"/_doc/1?refresh=true", map[string]any{"x": 1}).must(t, 201)
		r := tg.do(t, "GET", "/"+url.PathEscape("<"+tg.prefix+"logs-{2022-12-31||/d{yyyy-MM-dd}}>")+"/_count", nil).must(t, 200)
		if r.num(t, "count") != 1 {
			t.Fatalf("count through a date math name: %s", r.raw)
		}
		if tg.local != nil {
			now := time.Date(2024, 3, 5, 10, 0, 0, 0, time.UTC)
			for in, want := range map[string]string{
				"<logs-{now/d}>":                       "logs-2024.03.05",
				"<logs-{now/M{yyyy.MM}}>":              "logs-2024.03",
				"<logs-{now/d-1d{yyyy.MM.dd|+12:00}}>": "logs-2024.03.04",
				`<a\{b\}-{now/y{yyyy}}>`:               "a{b}-2024",
				"plain":                                "plain",
			} {
				got, err := resolveDateMathName(in, now)
				if err != nil || got != want {
					t.Errorf("%s: %q, %v; want %q", in, got, err, want)
				}
			}
		}
	})
}

// Date math in the alias names of a create-index body
// (indices.create/10_basic.yml "Create with alias containing date math").
func TestDateMathAliasOnCreate(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "dmc")
		tg.do(t, "PUT", "/"+name, map[string]any{"aliases": map[string]any{
			"<" + tg.prefix + "dmal-{2022-12-31||/M{yyyy.MM}}>": map[string]any{}}}).must(t, 200)
		tg.do(t, "HEAD", "/_alias/"+tg.prefix+"dmal-2022.12", nil).must(t, 200)
	})
}

// DELETE /{index} with ignore_unavailable=true skips missing names and
// aliases and deletes the other indices of the list
// (indices.delete/10_basic.yml "Delete index against alias - ignore
// unavailable - multiple indices"); it used to answer without deleting.
func TestDeleteIndexIgnoreUnavailableList(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		a, b := tg.idx(t, "del1"), tg.idx(t, "del2")
		alias := tg.prefix + "delal"
		tg.do(t, "PUT", "/"+a, map[string]any{"aliases": map[string]any{alias: map[string]any{}}}).must(t, 200)
		tg.do(t, "PUT", "/"+b, nil).must(t, 200)
		r := tg.do(t, "DELETE", "/"+alias, nil)
		if r.status != 400 {
			t.Fatalf("delete through an alias: status %d; body: %s", r.status, r.raw)
		}
		tg.do(t, "DELETE", "/"+alias+"?ignore_unavailable=true", nil).must(t, 200)
		tg.do(t, "HEAD", "/"+a, nil).must(t, 200)
		tg.do(t, "DELETE", "/"+alias+","+tg.prefix+"nope,"+b+"?ignore_unavailable=true", nil).must(t, 200)
		tg.do(t, "HEAD", "/"+a, nil).must(t, 200)
		tg.do(t, "HEAD", "/"+b, nil).must(t, 404)
	})
}

// human=true adds the readable creation date and version to index
// settings (indices.get/10_basic.yml "Get index infos with human settings
// ..."); the server accepted human and added nothing.
func TestHumanIndexSettings(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "human")
		tg.do(t, "PUT", "/"+name, nil).must(t, 200)
		for _, path := range []string{"/" + name + "?human=true", "/" + name + "/_settings?human"} {
			r := tg.do(t, "GET", path, nil).must(t, 200)
			created := r.str(name + ".settings.index.creation_date")
			ms, _ := strconv.ParseInt(created, 10, 64)
			if got, want := r.str(name+".settings.index.creation_date_string"), javaInstantString(ms); got != want || got == "" {
				t.Fatalf("%s: creation_date_string %q, want %q; body: %s", path, got, want, r.raw)
			}
			if got := r.str(name + ".settings.index.version.created_string"); !strings.HasPrefix(got, "8.") {
				t.Fatalf("%s: version.created_string %q; body: %s", path, got, r.raw)
			}
		}
		r := tg.do(t, "GET", "/"+name+"/_settings", nil).must(t, 200)
		if r.get(name+".settings.index.creation_date_string") != nil {
			t.Fatalf("without human: %s", r.raw)
		}
		if tg.local != nil {
			for ms, want := range map[int64]string{
				1709632800000: "2024-03-05T10:00Z",
				1709632807000: "2024-03-05T10:00:07Z",
				1709632807250: "2024-03-05T10:00:07.250Z",
			} {
				if got := javaInstantString(ms); got != want {
					t.Errorf("javaInstantString(%d) = %q, want %q", ms, got, want)
				}
			}
		}
	})
}

// human=true on cluster health adds the readable queue wait and shard
// percentage, as ClusterHealthResponse does.
func TestHumanClusterHealth(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		r := tg.do(t, "GET", "/_cluster/health?human=true", nil).must(t, 200)
		if r.str("task_max_waiting_in_queue") == "" || !strings.HasSuffix(r.str("active_shards_percent"), "%") {
			t.Fatalf("human health: %s", r.raw)
		}
		r = tg.do(t, "GET", "/_cluster/health", nil).must(t, 200)
		if r.get("active_shards_percent") != nil {
			t.Fatalf("health without human: %s", r.raw)
		}
	})
}

// terms include/exclude with arrays of exact values, value_type for
// unmapped fields, and keys of a field that is long in one index and
// double in another (found reading search.aggregation/20_terms.yml, whose
// setup maps an ip field and is refused as a whole).
func TestTermsIncludeExcludeValueType(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		a, b := tg.idx(t, "tl"), tg.idx(t, "td")
		tg.do(t, "PUT", "/"+a, map[string]any{"mappings": map[string]any{"properties": map[string]any{
			"str": map[string]any{"type": "keyword"}, "number": map[string]any{"type": "long"},
			"date": map[string]any{"type": "date"}}}}).must(t, 200)
		tg.do(t, "PUT", "/"+b, map[string]any{"mappings": map[string]any{"properties": map[string]any{
			"number": map[string]any{"type": "double"}}}}).must(t, 200)
		tg.do(t, "POST", "/_bulk?refresh=true", ndjson(
			map[string]any{"index": map[string]any{"_index": a, "_id": "1"}}, map[string]any{"str": "abc", "number": 100, "date": "2016-05-03"},
			map[string]any{"index": map[string]any{"_index": a, "_id": "2"}}, map[string]any{"str": "abc", "number": 10, "date": "2014-09-01"},
			map[string]any{"index": map[string]any{"_index": a, "_id": "3"}}, map[string]any{"str": "bcd", "date": "2016-05-03"},
			map[string]any{"index": map[string]any{"_index": b, "_id": "1"}}, map[string]any{"number": 10.0},
			map[string]any{"index": map[string]any{"_index": b, "_id": "2"}}, map[string]any{"number": 14.6},
		)).must(t, 200)
		search := func(index string, aggs map[string]any) resp {
			return tg.do(t, "POST", "/"+index+"/_search", map[string]any{"size": 0, "aggs": aggs})
		}
		keys := func(r resp, agg string) []string {
			var out []string
			bs, _ := r.get("aggregations." + agg + ".buckets").([]any)
			for _, x := range bs {
				m := x.(map[string]any)
				k := fmt.Sprint(m["key"])
				if f, ok := m["key"].(float64); ok {
					k = strconv.FormatFloat(f, 'f', -1, 64)
				}
				if s, ok := m["key_as_string"].(string); ok {
					k += "/" + s
				}
				out = append(out, k+":"+fmt.Sprint(m["doc_count"]))
			}
			return out
		}
		r := search(a, map[string]any{
			"inc":  map[string]any{"terms": map[string]any{"field": "str", "include": []any{"bcd", "zzz"}}},
			"exc":  map[string]any{"terms": map[string]any{"field": "str", "exclude": []any{"bcd"}}},
			"date": map[string]any{"terms": map[string]any{"field": "date", "include": []any{"2016-05-03"}}},
			"num":  map[string]any{"terms": map[string]any{"field": "number", "exclude": []any{100}}},
		}).must(t, 200)
		for agg, want := range map[string][]string{
			"inc":  {"bcd:1"},
			"exc":  {"abc:2"},
			"date": {"1462233600000/2016-05-03T00:00:00.000Z:2"},
			"num":  {"10:1"},
		} {
			if got := keys(r, agg); !eqStrings(got, want) {
				t.Fatalf("%s: %v, want %v; body: %s", agg, got, want, r.raw)
			}
		}
		if other := r.num(t, "aggregations.exc.sum_other_doc_count"); other != 0 {
			t.Fatalf("excluded terms counted in sum_other_doc_count: %s", r.raw)
		}
		r = search(a, map[string]any{
			"s":  map[string]any{"terms": map[string]any{"field": "u1", "value_type": "string", "missing": "abc"}},
			"bo": map[string]any{"terms": map[string]any{"field": "u2", "value_type": "boolean", "missing": true}},
			"d":  map[string]any{"terms": map[string]any{"field": "u3", "value_type": "date", "missing": "2016-05-11"}},
			"l":  map[string]any{"terms": map[string]any{"field": "u4", "value_type": "long", "missing": 3}},
		}).must(t, 200)
		for agg, want := range map[string][]string{
			"s":  {"abc:3"},
			"bo": {"1/true:3"},
			"d":  {"1462924800000/2016-05-11T00:00:00.000Z:3"},
			"l":  {"3:3"},
		} {
			if got := keys(r, agg); !eqStrings(got, want) {
				t.Fatalf("%s: %v, want %v; body: %s", agg, got, want, r.raw)
			}
		}
		r = search(a+","+b, map[string]any{"n": map[string]any{"terms": map[string]any{"field": "number"}}}).must(t, 200)
		if got, want := keys(r, "n"), []string{"10:2", "14.6:1", "100:1"}; !eqStrings(got, want) {
			t.Fatalf("mixed long/double keys: %v, want %v; body: %s", got, want, r.raw)
		}
		if tg.local != nil {
			r = search(a, map[string]any{"x": map[string]any{"terms": map[string]any{"field": "str", "include": "a.*"}}})
			expectReason(t, r, 400, "[eventpipe] terms [include] regular expressions")
			r = search(a, map[string]any{"x": map[string]any{"terms": map[string]any{"field": "str",
				"include": map[string]any{"partition": 0, "num_partitions": 2}}}})
			expectReason(t, r, 400, "[eventpipe] terms [include] partitions")
		}
	})
}

// Each aggregation type takes the parameters its Elasticsearch parser
// declares: the server used to accept terms-only parameters (shard_size,
// execution_hint, ...) and keyed on every type and ignore them.
// shard_min_doc_count applies (one shard), hard_bounds is refused.
func TestAggParamsPerType(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := seedMetricDocs(t, tg)
		for _, c := range []struct {
			agg    map[string]any
			reason string
		}{
			{map[string]any{"avg": map[string]any{"field": "i", "shard_size": 5}}, "[avg] unknown field [shard_size]"},
			{map[string]any{"terms": map[string]any{"field": "k", "keyed": false}}, "[terms] unknown field [keyed]"},
			{map[string]any{"terms": map[string]any{"field": "k", "missing_bucket": true}}, "[terms] unknown field [missing_bucket]"},
			{map[string]any{"cardinality": map[string]any{"field": "k", "format": "0"}}, "[cardinality] unknown field [format]"},
			{map[string]any{"max": map[string]any{"field": "i", "interval": 5}}, "[max] unknown field [interval]"},
		} {
			r := tg.do(t, "POST", "/"+name+"/_search", map[string]any{"size": 0, "aggs": map[string]any{"a": c.agg}})
			expectReason(t, r, 400, c.reason)
		}
		if tg.local != nil {
			r := tg.do(t, "POST", "/"+name+"/_search", map[string]any{"size": 0, "aggs": map[string]any{"a": map[string]any{
				"histogram": map[string]any{"field": "i", "interval": 5, "hard_bounds": map[string]any{"min": 0, "max": 10}}}}})
			expectReason(t, r, 400, "[eventpipe] [hard_bounds]")
		}
		tg.do(t, "POST", "/_bulk?refresh=true", ndjson(
			map[string]any{"index": map[string]any{"_index": name, "_id": "5"}}, map[string]any{"k": "a"})).must(t, 200)
		r := tg.do(t, "POST", "/"+name+"/_search", map[string]any{"size": 0, "aggs": map[string]any{"a": map[string]any{
			"terms": map[string]any{"field": "k", "shard_min_doc_count": 2, "shard_size": 10, "execution_hint": "map"}}}}).must(t, 200)
		bs, _ := r.get("aggregations.a.buckets").([]any)
		if len(bs) != 1 || r.str("aggregations.a.buckets.0.key") != "a" {
			t.Fatalf("shard_min_doc_count 2: %s", r.raw)
		}
	})
}

// Search URL parameters validated as SearchRequest's setters do, before
// the targets are resolved; a pre_filter_shard_size that would run the
// can-match phase, and aggregations on metadata fields (which returned
// empty buckets), are refused (search/140_pre_filter_search_shards.yml).
func TestSearchShardParamsAndMetadataAggs(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		a, b := tg.idx(t, "pf1"), tg.idx(t, "pf2")
		tg.do(t, "PUT", "/"+a+"/_doc/1?refresh=true", map[string]any{"x": 1}).must(t, 201)
		tg.do(t, "PUT", "/"+b+"/_doc/1?refresh=true", map[string]any{"x": 2}).must(t, 201)
		for q, want := range map[string]string{
			"pre_filter_shard_size=0":         "preFilterShardSize must be >= 1",
			"batched_reduce_size=1":           "batchedReduceSize must be >= 2",
			"max_concurrent_shard_requests=0": "maxConcurrentShardRequests must be >= 1",
		} {
			expectReason(t, tg.do(t, "GET", "/"+tg.prefix+"missing/_search?"+q, nil), 400, want)
		}
		r := tg.do(t, "GET", "/"+a+","+b+"/_search?pre_filter_shard_size=2", nil).must(t, 200)
		if r.num(t, "hits.total.value") != 2 {
			t.Fatalf("pre_filter_shard_size at the shard count: %s", r.raw)
		}
		if tg.local != nil {
			expectReason(t, tg.do(t, "GET", "/"+a+","+b+"/_search?pre_filter_shard_size=1", nil), 400,
				"[eventpipe] [pre_filter_shard_size]")
			expectReason(t, tg.do(t, "POST", "/"+a+","+b+"/_search", map[string]any{"size": 0, "aggs": map[string]any{
				"i": map[string]any{"terms": map[string]any{"field": "_index"}}}}), 400, "[eventpipe] aggregations on metadata field [_index]")
		}
	})
}

// A field with index: false keeps its doc values: it is aggregated,
// sorted and (Elasticsearch 8.1+) searched through them
// (search.aggregation/361_date_histogram_multivalue.yml,
// search/140_pre_filter_search_shards.yml "prefilter on non-indexed date
// fields"). The server dropped such fields entirely: no hits, no buckets.
func TestNotIndexedFieldWithDocValues(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "noidx")
		tg.do(t, "PUT", "/"+name, map[string]any{"mappings": map[string]any{"properties": map[string]any{
			"d": map[string]any{"type": "date", "index": false},
			"k": map[string]any{"type": "keyword", "index": false},
			"n": map[string]any{"type": "long", "index": false},
		}}}).must(t, 200)
		tg.do(t, "POST", "/_bulk?refresh=true", ndjson(
			map[string]any{"index": map[string]any{"_index": name, "_id": "1"}}, map[string]any{"d": "2016-01-01", "k": "a", "n": 1},
			map[string]any{"index": map[string]any{"_index": name, "_id": "2"}}, map[string]any{"d": "2017-01-01", "k": "b", "n": 2},
		)).must(t, 200)
		r := tg.do(t, "POST", "/"+name+"/_search", map[string]any{
			"query": map[string]any{"range": map[string]any{"d": map[string]any{"gte": "2016-02-01"}}},
			"aggs":  map[string]any{"k": map[string]any{"terms": map[string]any{"field": "k"}}, "n": map[string]any{"sum": map[string]any{"field": "n"}}},
			"sort":  []any{map[string]any{"n": "desc"}},
		}).must(t, 200)
		if r.num(t, "hits.total.value") != 1 || r.str("hits.hits.0._id") != "2" ||
			r.str("aggregations.k.buckets.0.key") != "b" || r.num(t, "aggregations.n.value") != 2 {
			t.Fatalf("index: false field: %s", r.raw)
		}
		r = tg.do(t, "POST", "/"+name+"/_search", map[string]any{"query": map[string]any{"term": map[string]any{"k": "a"}}}).must(t, 200)
		if r.num(t, "hits.total.value") != 1 {
			t.Fatalf("term on index: false keyword: %s", r.raw)
		}
	})
}
