package esserver

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// seedNotes creates an index whose documents spread words over two text
// fields and a keyword field, so that field-centric and term-centric
// multi_match types give different answers.
func seedNotes(t *testing.T, tg *target) string {
	name := tg.idx(t, "notes")
	tg.do(t, "PUT", "/"+name, map[string]any{"mappings": map[string]any{"properties": map[string]any{
		"title":   map[string]any{"type": "text"},
		"message": map[string]any{"type": "text"},
		"tag":     map[string]any{"type": "keyword"},
	}}}).must(t, 200)
	docs := []map[string]any{
		{"title": "Buy milk", "message": "from the farm shop", "tag": "groceries"},      // n1: milk and shop in different fields
		{"title": "Milk shop opening", "message": "a new store in town", "tag": "news"}, // n2: milk and shop in one field
		{"title": "Fix the bike", "message": "the chain needs oil", "tag": "milk shop"}, // n3: only the keyword holds the words
		{"title": "Call the farm", "message": "ask about fresh milk", "tag": "calls"},   // n4: farm and milk in different fields
		{"title": "Farm fresh milk", "message": "delivered daily", "tag": "dairy"},      // n5: farm and milk in one field
		{"title": "Weekend plans", "message": "ride the bike", "tag": "fun"},            // n6
	}
	lines := []any{}
	for i, d := range docs {
		lines = append(lines, map[string]any{"index": map[string]any{"_index": name, "_id": fmt.Sprintf("n%d", i+1)}}, d)
	}
	tg.do(t, "POST", "/_bulk?refresh=true", ndjson(lines...)).must(t, 200)
	return name
}

// multiMatch builds a multi_match query; extra holds type, operator, ...
func multiMatch(text string, fields []string, extra ...any) map[string]any {
	mm := map[string]any{"query": text}
	if fields != nil {
		mm["fields"] = fields
	}
	for i := 0; i+1 < len(extra); i += 2 {
		mm[extra[i].(string)] = extra[i+1]
	}
	return map[string]any{"multi_match": mm}
}

// TestMultiMatchTypes checks which documents each multi_match type
// matches: best_fields and most_fields apply operator and
// minimum_should_match within each field, cross_fields to the terms
// looked for across all fields.
func TestMultiMatchTypes(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := seedNotes(t, tg)
		tm := []string{"title^2", "message"}
		cases := []struct {
			name  string
			query any
			ids   []string
		}{
			{"cross_fields and finds terms in different fields", multiMatch("MILK shop", tm, "type", "cross_fields", "operator", "and"), []string{"n1", "n2"}},
			{"cross_fields and needs every term", multiMatch("milk shop bike", tm, "type", "cross_fields", "operator", "and"), nil},
			{"cross_fields or", multiMatch("milk shop", tm, "type", "cross_fields"), []string{"n1", "n2", "n4", "n5"}},
			{"cross_fields explicit or", multiMatch("bike oil", tm, "type", "cross_fields", "operator", "or"), []string{"n3", "n6"}},
			{"cross_fields minimum_should_match", multiMatch("milk farm bread", tm, "type", "cross_fields", "minimum_should_match", 2), []string{"n1", "n4", "n5"}},
			{"cross_fields minimum_should_match percent", multiMatch("milk farm shop", tm, "type", "cross_fields", "minimum_should_match", "100%"), []string{"n1"}},
			{"cross_fields single field", multiMatch("farm milk", []string{"message"}, "type", "cross_fields", "operator", "and"), nil},
			{"best_fields and needs every term in one field", multiMatch("MILK shop", tm, "type", "best_fields", "operator", "and"), []string{"n2"}},
			{"default type is best_fields", multiMatch("MILK shop", tm, "operator", "and"), []string{"n2"}},
			{"best_fields or", multiMatch("milk shop", tm, "type", "best_fields"), []string{"n1", "n2", "n4", "n5"}},
			{"best_fields minimum_should_match per field", multiMatch("milk farm bread", tm, "minimum_should_match", 2), []string{"n5"}},
			{"best_fields tie_breaker does not change matches", multiMatch("milk shop", tm, "operator", "and", "tie_breaker", 0.3), []string{"n2"}},
			{"most_fields and needs every term in one field", multiMatch("MILK shop", tm, "type", "most_fields", "operator", "and"), []string{"n2"}},
			{"most_fields or", multiMatch("bike", tm, "type", "most_fields"), []string{"n3", "n6"}},
			{"most_fields minimum_should_match per field", multiMatch("milk farm bread", tm, "type", "most_fields", "minimum_should_match", 2), []string{"n5"}},
			{"cross_fields keyword field is one whole term", multiMatch("milk shop", []string{"title", "message", "tag"}, "type", "cross_fields", "operator", "and"), []string{"n1", "n2", "n3"}},
			{"cross_fields keyword needs the whole value", multiMatch("shop", []string{"tag"}, "type", "cross_fields"), nil},
			{"cross_fields all fields by default", multiMatch("milk shop", nil, "type", "cross_fields", "operator", "and"), []string{"n1", "n2", "n3"}},
			{"cross_fields wildcard fields", multiMatch("milk farm", []string{"t*", "mess*"}, "type", "cross_fields", "operator", "and"), []string{"n1", "n4", "n5"}},
			{"no terms match nothing", multiMatch("?!", tm, "type", "cross_fields"), nil},
			{"zero_terms_query all", multiMatch("?!", tm, "zero_terms_query", "all"), []string{"n1", "n2", "n3", "n4", "n5", "n6"}},
			{"cross_fields zero_terms_query all", multiMatch("?!", tm, "type", "cross_fields", "zero_terms_query", "all"), []string{"n1", "n2", "n3", "n4", "n5", "n6"}},
			{"best_fields keyword field", multiMatch("milk shop", []string{"title", "message", "tag"}, "operator", "and"), []string{"n2", "n3"}},
		}
		for _, c := range cases {
			t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
				r := tg.do(t, "POST", "/"+name+"/_search", map[string]any{"query": c.query, "size": 100}).must(t, 200)
				if got := sortedIDs(r); !eqStrings(got, c.ids) {
					t.Fatalf("ids %v, want %v; body: %s", got, c.ids, r.raw)
				}
				if int(r.num(t, "hits.total.value")) != len(c.ids) {
					t.Fatalf("total: %s", r.raw)
				}
				for _, h := range r.get("hits.hits").([]any) {
					if s, ok := get(h, "_score").(float64); !ok || s <= 0 {
						t.Fatalf("hit without a positive _score: %v", h)
					}
				}
			})
		}
	})
}

// TestMultiMatchBoostsAndScores checks the clear-cut effects of field
// boosts on the order of hits, and that most_fields rewards matching in
// several fields.
func TestMultiMatchBoostsAndScores(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := seedNotes(t, tg)
		search := func(q any) resp {
			return tg.do(t, "POST", "/"+name+"/_search", map[string]any{"query": q}).must(t, 200)
		}
		// n3 has "bike" in its title, n6 in its message; the two fields have
		// the same length in both documents.
		for _, typ := range []string{"best_fields", "most_fields", "cross_fields"} {
			for _, c := range []struct {
				text   string
				fields []string
				first  string
			}{
				{"bike", []string{"title^10", "message"}, "n3"},
				{"bike", []string{"title", "message^10"}, "n6"},
				{"the bike", []string{"title^10", "message"}, "n3"},
				{"the bike", []string{"title", "message^10"}, "n6"},
			} {
				r := search(multiMatch(c.text, c.fields, "type", typ))
				ids := hitIDs(r)
				if len(ids) < 2 || ids[0] != c.first {
					t.Fatalf("%s %q over %v: order %v, want %s first; body: %s", typ, c.text, c.fields, ids, c.first, r.raw)
				}
				if r.num(t, "hits.hits.0._score") <= r.num(t, "hits.hits.1._score") {
					t.Fatalf("%s %q over %v: boost gave no clear lead: %s", typ, c.text, c.fields, r.raw)
				}
			}
		}
		// The query-level boost counts inside a bool query: whichever
		// clause is boosted decides which of n3 ("the bike" in its title) and
		// n6 ("the bike" in its message) comes first.
		for _, c := range []struct {
			boosted, other, first string
		}{{"title", "message", "n3"}, {"message", "title", "n6"}} {
			r := search(map[string]any{"bool": map[string]any{"should": []any{
				map[string]any{"multi_match": map[string]any{"query": "the bike", "fields": []string{c.boosted}, "boost": 10}},
				map[string]any{"multi_match": map[string]any{"query": "the bike", "fields": []string{c.other}}},
			}}})
			if ids := hitIDs(r); len(ids) == 0 || ids[0] != c.first {
				t.Fatalf("boost on %s: order %v, want %s first; body: %s", c.boosted, ids, c.first, r.raw)
			}
		}
		// "the" is in both fields of n3, in the title only of n4 and in the
		// message only of n1; those titles and messages have the same
		// lengths. most_fields adds the field scores, best_fields takes the
		// best one plus tie_breaker times the others.
		scores := func(r resp) map[string]float64 {
			out := map[string]float64{}
			for _, h := range r.get("hits.hits").([]any) {
				out[get(h, "_id").(string)] = get(h, "_score").(float64)
			}
			return out
		}
		near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-4*math.Max(math.Abs(a), math.Abs(b)) }
		fields := []string{"title", "message"}
		for _, c := range []struct {
			name  string
			query any
			tie   float64
		}{
			{"most_fields", multiMatch("the", fields, "type", "most_fields"), 1},
			{"best_fields", multiMatch("the", fields), 0},
			{"best_fields tie_breaker", multiMatch("the", fields, "tie_breaker", 0.5), 0.5},
		} {
			r := search(c.query)
			sc := scores(r)
			if !eqStrings(sortedIDs(r), []string{"n1", "n3", "n4", "n6"}) {
				t.Fatalf("%s: hits %s", c.name, r.raw)
			}
			hi, lo := math.Max(sc["n4"], sc["n1"]), math.Min(sc["n4"], sc["n1"])
			if want := hi + c.tie*lo; !near(sc["n3"], want) {
				t.Fatalf("%s: n3 scored %v, want %v (n4 %v, n1 %v)", c.name, sc["n3"], want, sc["n4"], sc["n1"])
			}
			if c.tie > 0 && hitIDs(r)[0] != "n3" {
				t.Fatalf("%s: matching in two fields should rank first: %v", c.name, hitIDs(r))
			}
		}
	})
}

// TestMultiMatchErrors checks parameters multi_match refuses.
func TestMultiMatchErrors(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := seedNotes(t, tg)
		path := "/" + name + "/_search"
		tg.do(t, "POST", path, map[string]any{"query": multiMatch("milk", []string{"title", "message"}, "type", "cross_fields", "fuzziness", "AUTO")}).
			expectError(t, 400, "parsing_exception", "x_content_parse_exception", "illegal_argument_exception")
		tg.do(t, "POST", path, map[string]any{"query": multiMatch("milk", []string{"title"}, "type", "no_such_type")}).
			expectError(t, 400, "parsing_exception", "parse_exception", "x_content_parse_exception", "illegal_argument_exception")
		// Fuzziness is fine for the field-centric types.
		r := tg.do(t, "POST", path, map[string]any{"query": multiMatch("milc", []string{"title", "message"}, "fuzziness", "AUTO")}).must(t, 200)
		if !eqStrings(sortedIDs(r), []string{"n1", "n2", "n4", "n5"}) {
			t.Fatalf("best_fields fuzziness: %s", r.raw)
		}
	})
}
