package esserver

import (
	"net/http"
	"strings"
	"testing"
)

func TestRootInfo(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		r := tg.do(t, "GET", "/", nil).must(t, 200)
		if r.header.Get("X-Elastic-Product") != "Elasticsearch" {
			t.Fatalf("X-Elastic-Product header = %q", r.header.Get("X-Elastic-Product"))
		}
		if v := r.str("version.number"); !strings.HasPrefix(v, "8.") {
			t.Fatalf("version.number = %q, want 8.x", v)
		}
		for _, k := range []string{"name", "cluster_name", "tagline"} {
			if r.str(k) == "" {
				t.Fatalf("root info lacks %s: %s", k, r.raw)
			}
		}
		if tg.local != nil && !strings.Contains(r.str("tagline"), "eventpipe") {
			t.Fatalf("local server must say what it is in its tagline: %q", r.str("tagline"))
		}
		tg.do(t, "HEAD", "/", nil).must(t, 200)
	})
}

func TestIndexLifecycle(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "life")
		body := map[string]any{
			"settings": map[string]any{"number_of_shards": 1, "number_of_replicas": 0},
			"mappings": map[string]any{"properties": map[string]any{
				"title":   map[string]any{"type": "text"},
				"tag":     map[string]any{"type": "keyword"},
				"count":   map[string]any{"type": "long"},
				"ratio":   map[string]any{"type": "double"},
				"small":   map[string]any{"type": "integer"},
				"weight":  map[string]any{"type": "float"},
				"at":      map[string]any{"type": "date"},
				"active":  map[string]any{"type": "boolean"},
				"address": map[string]any{"properties": map[string]any{"city": map[string]any{"type": "keyword"}}},
			}},
			"aliases": map[string]any{name + "-alias": map[string]any{}},
		}
		r := tg.do(t, "PUT", "/"+name, body).must(t, 200)
		if r.get("acknowledged") != true || r.str("index") != name {
			t.Fatalf("create response: %s", r.raw)
		}
		tg.do(t, "PUT", "/"+name, body).expectError(t, 400, "resource_already_exists_exception")
		tg.do(t, "HEAD", "/"+name, nil).must(t, 200)

		g := tg.do(t, "GET", "/"+name, nil).must(t, 200)
		if ty := g.str(name + ".mappings.properties.title.type"); ty != "text" {
			t.Fatalf("title type %q: %s", ty, g.raw)
		}
		if ty := g.str(name + ".mappings.properties.address.properties.city.type"); ty != "keyword" {
			t.Fatalf("address.city type %q: %s", ty, g.raw)
		}
		if g.get(name+".aliases."+name+"-alias") == nil {
			t.Fatalf("alias from create body missing: %s", g.raw)
		}
		m := tg.do(t, "GET", "/"+name+"/_mapping", nil).must(t, 200)
		for f, ty := range map[string]string{"tag": "keyword", "count": "long", "ratio": "double", "small": "integer", "weight": "float", "at": "date", "active": "boolean"} {
			if got := m.str(name + ".mappings.properties." + f + ".type"); got != ty {
				t.Fatalf("mapping of %s = %q, want %q: %s", f, got, ty, m.raw)
			}
		}
		// Reads through the alias name resolve to the index.
		tg.do(t, "GET", "/"+name+"-alias/_mapping", nil).must(t, 200)

		tg.do(t, "DELETE", "/"+name, nil).must(t, 200)
		tg.do(t, "HEAD", "/"+name, nil).must(t, 404)
		tg.do(t, "GET", "/"+name, nil).expectError(t, 404, "index_not_found_exception")
		tg.do(t, "DELETE", "/"+name, nil).expectError(t, 404, "index_not_found_exception")
		tg.do(t, "HEAD", "/_alias/"+name+"-alias", nil).must(t, 404)
	})
}

func TestIndexCreateErrors(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		for _, bad := range []string{"Upper" + strings.ToLower(tg.prefix), "_" + tg.prefix + "x", tg.prefix + "a*b", tg.prefix + "a,b", "-" + tg.prefix} {
			t.Run(bad, func(t *testing.T) {
				tg.do(t, "PUT", "/"+bad, map[string]any{}).expectError(t, 400, "invalid_index_name_exception")
			})
		}
		name := tg.idx(t, "badtype")
		r := tg.do(t, "PUT", "/"+name, map[string]any{"mappings": map[string]any{"properties": map[string]any{
			"x": map[string]any{"type": "no_such_type"}}}})
		r.expectError(t, 400, "mapper_parsing_exception")
		if !strings.Contains(string(r.raw), "no_such_type") {
			t.Fatalf("error does not name the type: %s", r.raw)
		}
		tg.do(t, "HEAD", "/"+name, nil).must(t, 404)

		// Malformed JSON body.
		tg.do(t, "PUT", "/"+name, `{"mappings": {`).expectError(t, 400, "x_content_parse_exception", "parse_exception", "json_parse_exception", "mapper_parsing_exception")
		tg.do(t, "HEAD", "/"+name, nil).must(t, 404)
	})
}

func TestDocumentCRUD(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "crud")
		tg.do(t, "PUT", "/"+name, map[string]any{"mappings": map[string]any{"properties": map[string]any{"n": map[string]any{"type": "long"}}}}).must(t, 200)

		r := tg.do(t, "PUT", "/"+name+"/_doc/1", map[string]any{"n": 1, "title": "first"}).must(t, http.StatusCreated)
		if r.str("result") != "created" || r.num(t, "_version") != 1 || r.num(t, "_primary_term") != 1 || r.str("_id") != "1" || r.str("_index") != name {
			t.Fatalf("create: %s", r.raw)
		}
		if r.num(t, "_shards.successful") != 1 {
			t.Fatalf("_shards: %s", r.raw)
		}
		seq0 := r.num(t, "_seq_no")

		g := tg.do(t, "GET", "/"+name+"/_doc/1", nil).must(t, 200)
		if g.get("found") != true || g.num(t, "_source.n") != 1 || g.num(t, "_version") != 1 || g.num(t, "_seq_no") != seq0 || g.num(t, "_primary_term") != 1 {
			t.Fatalf("get: %s", g.raw)
		}
		tg.do(t, "HEAD", "/"+name+"/_doc/1", nil).must(t, 200)
		tg.do(t, "HEAD", "/"+name+"/_doc/nope", nil).must(t, 404)

		u := tg.do(t, "POST", "/"+name+"/_doc/1", map[string]any{"n": 2}).must(t, 200)
		if u.str("result") != "updated" || u.num(t, "_version") != 2 || u.num(t, "_seq_no") <= seq0 {
			t.Fatalf("update: %s", u.raw)
		}
		g = tg.do(t, "GET", "/"+name+"/_doc/1", nil).must(t, 200)
		if g.num(t, "_source.n") != 2 || g.get("_source.title") != nil {
			t.Fatalf("index must replace the source: %s", g.raw)
		}
		// _source filtering on GET.
		gs := tg.do(t, "GET", "/"+name+"/_doc/1?_source=false", nil).must(t, 200)
		if gs.get("_source") != nil {
			t.Fatalf("_source=false still returned a source: %s", gs.raw)
		}

		d := tg.do(t, "DELETE", "/"+name+"/_doc/1", nil).must(t, 200)
		if d.str("result") != "deleted" || d.num(t, "_version") != 3 {
			t.Fatalf("delete: %s", d.raw)
		}
		nf := tg.do(t, "GET", "/"+name+"/_doc/1", nil).must(t, 404)
		if nf.get("found") != false || nf.str("_id") != "1" {
			t.Fatalf("get after delete: %s", nf.raw)
		}
		d2 := tg.do(t, "DELETE", "/"+name+"/_doc/1", nil).must(t, 404)
		if d2.str("result") != "not_found" {
			t.Fatalf("delete missing: %s", d2.raw)
		}

		a := tg.do(t, "POST", "/"+name+"/_doc", map[string]any{"n": 7}).must(t, 201)
		id := a.str("_id")
		if len(id) < 16 || a.str("result") != "created" {
			t.Fatalf("auto id: %s", a.raw)
		}
		tg.do(t, "GET", "/"+name+"/_doc/"+id, nil).must(t, 200)

		// Document APIs on a missing index.
		missing := tg.prefix + "missing"
		tg.do(t, "GET", "/"+missing+"/_doc/1", nil).expectError(t, 404, "index_not_found_exception")
		tg.do(t, "DELETE", "/"+missing+"/_doc/1", nil).expectError(t, 404, "index_not_found_exception")

		// A value that does not fit the mapping is refused and changes nothing.
		tg.do(t, "PUT", "/"+name+"/_doc/bad", map[string]any{"n": "not a number"}).expectError(t, 400, "document_parsing_exception", "mapper_parsing_exception")
		tg.do(t, "GET", "/"+name+"/_doc/bad", nil).must(t, 404)
		tg.do(t, "PUT", "/"+name+"/_doc/bad2", `{"n": 1`).expectError(t, 400, "document_parsing_exception", "mapper_parsing_exception", "x_content_parse_exception")
		tg.do(t, "GET", "/"+name+"/_doc/bad2", nil).must(t, 404)
	})
}

func TestCreateConflict(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "create")
		tg.do(t, "PUT", "/"+name+"/_create/1", map[string]any{"v": "a"}).must(t, 201)
		r := tg.do(t, "PUT", "/"+name+"/_create/1", map[string]any{"v": "b"})
		r.expectError(t, 409, "version_conflict_engine_exception")
		if want := "[1]: version conflict, document already exists (current version [1])"; r.str("error.reason") != want {
			t.Fatalf("reason %q, want %q", r.str("error.reason"), want)
		}
		tg.do(t, "PUT", "/"+name+"/_doc/1?op_type=create", map[string]any{"v": "c"}).expectError(t, 409, "version_conflict_engine_exception")
		g := tg.do(t, "GET", "/"+name+"/_doc/1", nil).must(t, 200)
		if g.str("_source.v") != "a" || g.num(t, "_version") != 1 {
			t.Fatalf("conflicting create changed the document: %s", g.raw)
		}
	})
}

func TestExternalVersioning(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "extver")
		tg.do(t, "PUT", "/"+name, nil).must(t, 200)
		doc := "/" + name + "/_doc/1"
		r := tg.do(t, "PUT", doc+"?version=5&version_type=external", map[string]any{"v": 5}).must(t, 201)
		if r.num(t, "_version") != 5 {
			t.Fatalf("external version not used: %s", r.raw)
		}
		c := tg.do(t, "PUT", doc+"?version=5&version_type=external", map[string]any{"v": 55})
		c.expectError(t, 409, "version_conflict_engine_exception")
		if want := "[1]: version conflict, current version [5] is higher or equal to the one provided [5]"; c.str("error.reason") != want {
			t.Fatalf("reason %q, want %q", c.str("error.reason"), want)
		}
		tg.do(t, "PUT", doc+"?version=3&version_type=external", map[string]any{"v": 3}).expectError(t, 409, "version_conflict_engine_exception")
		tg.do(t, "PUT", doc+"?version=7&version_type=external", map[string]any{"v": 7}).must(t, 200)
		tg.do(t, "PUT", doc+"?version=7&version_type=external_gte", map[string]any{"v": 77}).must(t, 200)
		tg.do(t, "PUT", doc+"?version=6&version_type=external_gte", map[string]any{"v": 6}).expectError(t, 409, "version_conflict_engine_exception")
		g := tg.do(t, "GET", doc, nil).must(t, 200)
		if g.num(t, "_source.v") != 77 || g.num(t, "_version") != 7 {
			t.Fatalf("after conflicts: %s", g.raw)
		}
		// Deletes with external versions: stale is refused, newer leaves a
		// tombstone that still refuses stale writes.
		tg.do(t, "DELETE", doc+"?version=6&version_type=external", nil).expectError(t, 409, "version_conflict_engine_exception")
		tg.do(t, "GET", doc, nil).must(t, 200)
		d := tg.do(t, "DELETE", doc+"?version=10&version_type=external", nil).must(t, 200)
		if d.num(t, "_version") != 10 || d.str("result") != "deleted" {
			t.Fatalf("external delete: %s", d.raw)
		}
		tg.do(t, "PUT", doc+"?version=9&version_type=external", map[string]any{"v": 9}).expectError(t, 409, "version_conflict_engine_exception")
		tg.do(t, "GET", doc, nil).must(t, 404)
		n := tg.do(t, "PUT", doc+"?version=11&version_type=external", map[string]any{"v": 11}).must(t, 201)
		if n.num(t, "_version") != 11 || n.str("result") != "created" {
			t.Fatalf("re-create after tombstone: %s", n.raw)
		}
		// Internal versioning cannot be used for concurrency control.
		tg.do(t, "PUT", doc+"?version=11", map[string]any{"v": 0}).expectError(t, 400, "action_request_validation_exception")
	})
}

func TestIfSeqNo(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "seqno")
		doc := "/" + name + "/_doc/1"
		r := tg.do(t, "PUT", doc, map[string]any{"v": 1}).must(t, 201)
		seq := int(r.num(t, "_seq_no"))
		u := tg.do(t, "PUT", doc+"?if_seq_no="+itoa(int64(seq))+"&if_primary_term=1", map[string]any{"v": 2}).must(t, 200)
		if int(u.num(t, "_seq_no")) <= seq {
			t.Fatalf("seq_no did not advance: %s", u.raw)
		}
		c := tg.do(t, "PUT", doc+"?if_seq_no="+itoa(int64(seq))+"&if_primary_term=1", map[string]any{"v": 3})
		c.expectError(t, 409, "version_conflict_engine_exception")
		if !strings.Contains(c.str("error.reason"), "required seqNo ["+itoa(int64(seq))+"]") {
			t.Fatalf("reason: %s", c.raw)
		}
		tg.do(t, "DELETE", doc+"?if_seq_no="+itoa(int64(seq))+"&if_primary_term=1", nil).expectError(t, 409, "version_conflict_engine_exception")
		tg.do(t, "PUT", doc+"?if_seq_no="+itoa(int64(seq+1))+"&if_primary_term=2", map[string]any{"v": 4}).expectError(t, 409, "version_conflict_engine_exception")
		g := tg.do(t, "GET", doc, nil).must(t, 200)
		if g.num(t, "_source.v") != 2 {
			t.Fatalf("a refused write changed the document: %s", g.raw)
		}
		tg.do(t, "PUT", "/"+name+"/_doc/none?if_seq_no=0&if_primary_term=1", map[string]any{"v": 1}).expectError(t, 409, "version_conflict_engine_exception")
	})
}

func TestUpdateAPI(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "upd")
		tg.do(t, "PUT", "/"+name+"/_doc/1", map[string]any{"a": 1, "o": map[string]any{"x": 1, "y": 2}}).must(t, 201)
		u := tg.do(t, "POST", "/"+name+"/_update/1", map[string]any{"doc": map[string]any{"b": 2, "o": map[string]any{"y": 3}}}).must(t, 200)
		if u.str("result") != "updated" || u.num(t, "_version") != 2 {
			t.Fatalf("update: %s", u.raw)
		}
		g := tg.do(t, "GET", "/"+name+"/_doc/1", nil).must(t, 200)
		if g.num(t, "_source.a") != 1 || g.num(t, "_source.b") != 2 || g.num(t, "_source.o.x") != 1 || g.num(t, "_source.o.y") != 3 {
			t.Fatalf("merge: %s", g.raw)
		}
		n := tg.do(t, "POST", "/"+name+"/_update/1", map[string]any{"doc": map[string]any{"b": 2}}).must(t, 200)
		if n.str("result") != "noop" || n.num(t, "_version") != 2 {
			t.Fatalf("noop: %s", n.raw)
		}
		tg.do(t, "POST", "/"+name+"/_update/2", map[string]any{"doc": map[string]any{"b": 2}}).expectError(t, 404, "document_missing_exception")
		up := tg.do(t, "POST", "/"+name+"/_update/2", map[string]any{"doc": map[string]any{"b": 5}, "doc_as_upsert": true}).must(t, 201)
		if up.str("result") != "created" {
			t.Fatalf("upsert: %s", up.raw)
		}
	})
}

// TestMoreThanOneShardIsRefused: the server keeps one shard per index, so
// it refuses number_of_shards (and number_of_routing_shards) above 1
// rather than echo a setting whose effects (a refresh that shows only the
// written shards' changes, routing) it cannot have; nothing is created.
// Elasticsearch creates such an index.
func TestMoreThanOneShardIsRefused(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		for _, settings := range []map[string]any{
			{"number_of_shards": 3},
			{"index": map[string]any{"number_of_shards": "5", "number_of_routing_shards": 5}},
			{"number_of_shards": 1, "number_of_routing_shards": 2},
		} {
			name := tg.idx(t, "shards")
			r := tg.do(t, "PUT", "/"+name, map[string]any{"settings": settings})
			if tg.local == nil {
				r.must(t, 200)
				continue
			}
			r.expectError(t, 400, "illegal_argument_exception")
			if reason := r.str("error.reason"); !strings.Contains(reason, "[eventpipe]") || !strings.Contains(reason, "one shard") {
				t.Fatalf("settings %v: reason %q, want one naming the server's one shard", settings, reason)
			}
			tg.do(t, "HEAD", "/"+name, nil).must(t, 404)
		}
		name := tg.idx(t, "one-shard")
		tg.do(t, "PUT", "/"+name, map[string]any{"settings": map[string]any{"number_of_shards": 1, "number_of_routing_shards": 1}}).must(t, 200)
	})
}
