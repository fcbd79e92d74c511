package esserver

import (
	"net/http"
	"strings"
	"testing"
)

// expectBlocked checks a refused write: 403 cluster_block_exception naming
// the index and the write block.
func expectBlocked(t *testing.T, r resp, index string) {
	t.Helper()
	r.expectError(t, 403, "cluster_block_exception")
	want := "index [" + index + "] blocked by: [FORBIDDEN/8/index write (api)];"
	if r.str("error.reason") != want || r.str("error.root_cause.0.reason") != want {
		t.Fatalf("reason %q, want %q", r.str("error.reason"), want)
	}
}

func TestWriteBlock(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name, other := tg.idx(t, "blocked"), tg.idx(t, "open")
		alias := tg.prefix + "blocked-alias"
		tg.do(t, "PUT", "/"+name, map[string]any{"aliases": map[string]any{alias: map[string]any{}}}).must(t, 200)
		tg.do(t, "PUT", "/"+name+"/_doc/1?refresh=true", map[string]any{"n": 1}).must(t, 201)
		tg.do(t, "PUT", "/"+other+"/_doc/a?refresh=true", map[string]any{"n": 1}).must(t, 201)

		r := tg.do(t, "PUT", "/"+name+"/_block/write", nil).must(t, 200)
		if r.get("acknowledged") != true || r.get("shards_acknowledged") != true ||
			r.str("indices.0.name") != name || r.get("indices.0.blocked") != true || len(r.get("indices").([]any)) != 1 {
			t.Fatalf("add block: %s", r.raw)
		}
		if s := tg.do(t, "GET", "/"+name+"/_settings", nil).must(t, 200); s.str(name+".settings.index.blocks.write") != "true" {
			t.Fatalf("settings after add block: %s", s.raw)
		}

		// Every document write is refused, directly or through the alias.
		expectBlocked(t, tg.do(t, "PUT", "/"+name+"/_doc/2", map[string]any{"n": 2}), name)
		expectBlocked(t, tg.do(t, "POST", "/"+name+"/_doc", map[string]any{"n": 2}), name)
		expectBlocked(t, tg.do(t, "PUT", "/"+name+"/_create/3", map[string]any{"n": 3}), name)
		expectBlocked(t, tg.do(t, "POST", "/"+name+"/_update/1", map[string]any{"doc": map[string]any{"n": 5}}), name)
		expectBlocked(t, tg.do(t, "POST", "/"+name+"/_update/new", map[string]any{"doc": map[string]any{"n": 5}, "doc_as_upsert": true}), name)
		expectBlocked(t, tg.do(t, "DELETE", "/"+name+"/_doc/1", nil), name)
		expectBlocked(t, tg.do(t, "PUT", "/"+alias+"/_doc/4", map[string]any{"n": 4}), name)

		// In a bulk only the items aimed at the blocked index fail.
		b := tg.do(t, "POST", "/_bulk?refresh=true", ndjson(
			map[string]any{"index": map[string]any{"_index": name, "_id": "5"}}, map[string]any{"n": 5},
			map[string]any{"index": map[string]any{"_index": other, "_id": "b"}}, map[string]any{"n": 2},
			map[string]any{"delete": map[string]any{"_index": name, "_id": "1"}},
			map[string]any{"update": map[string]any{"_index": alias, "_id": "1"}}, map[string]any{"doc": map[string]any{"n": 9}},
			map[string]any{"create": map[string]any{"_index": other, "_id": "c"}}, map[string]any{"n": 3},
		)).must(t, 200)
		if b.get("errors") != true {
			t.Fatalf("bulk errors flag: %s", b.raw)
		}
		items, _ := b.get("items").([]any)
		if len(items) != 5 {
			t.Fatalf("bulk items: %s", b.raw)
		}
		for i, action := range []string{"index", "index", "delete", "update", "create"} {
			it := get(items[i], action)
			status := int(get(it, "status").(float64))
			if i == 1 || i == 4 {
				if status != 201 || get(it, "_index") != other {
					t.Fatalf("bulk item %d into the open index: %v", i, it)
				}
				continue
			}
			if status != 403 || get(it, "_index") != name || get(it, "error.type") != "cluster_block_exception" ||
				!strings.Contains(get(it, "error.reason").(string), "FORBIDDEN/8/index write (api)") {
				t.Fatalf("bulk item %d into the blocked index: %v", i, it)
			}
		}

		// Reads, search and metadata changes still work.
		if g := tg.do(t, "GET", "/"+name+"/_doc/1", nil).must(t, 200); g.num(t, "_source.n") != 1 || g.num(t, "_version") != 1 {
			t.Fatalf("get from a blocked index: %s", g.raw)
		}
		if c := tg.do(t, "POST", "/"+alias+"/_count", nil).must(t, 200); c.num(t, "count") != 1 {
			t.Fatalf("count of a blocked index: %s", c.raw)
		}
		if s := tg.do(t, "POST", "/"+name+"/_search", map[string]any{"query": map[string]any{"term": map[string]any{"n": 1}}}).must(t, 200); !eqStrings(hitIDs(s), []string{"1"}) {
			t.Fatalf("search of a blocked index: %s", s.raw)
		}
		m := tg.do(t, "POST", "/_mget", map[string]any{"docs": []any{
			map[string]any{"_index": name, "_id": "1"}, map[string]any{"_index": other, "_id": "b"},
		}}).must(t, 200)
		if get(m.body, "docs.0.found") != true || get(m.body, "docs.1.found") != true {
			t.Fatalf("mget: %s", m.raw)
		}
		tg.do(t, "PUT", "/"+name+"/_mapping", map[string]any{"properties": map[string]any{"tag": map[string]any{"type": "keyword"}}}).must(t, 200)
		tg.do(t, "POST", "/"+name+"/_refresh", nil).must(t, 200)

		// Bad requests.
		tg.do(t, "PUT", "/"+name+"/_block/bogus", nil).expectError(t, 400, "illegal_argument_exception")
		tg.do(t, "PUT", "/"+tg.prefix+"no-such-index/_block/write", nil).expectError(t, 404, "index_not_found_exception")
		tg.do(t, "PUT", "/"+tg.prefix+"*/_block/write", nil).expectError(t, 400, "illegal_argument_exception")
		tg.do(t, "PUT", "/"+name+"/_settings", map[string]any{"index.blocks.write": "maybe"}).expectError(t, 400, "illegal_argument_exception")
		expectBlocked(t, tg.do(t, "PUT", "/"+name+"/_doc/2", map[string]any{"n": 2}), name)

		// Lifting the block through the settings API allows writes again.
		tg.do(t, "PUT", "/"+name+"/_settings", map[string]any{"index": map[string]any{"blocks": map[string]any{"write": false}}}).must(t, 200)
		if s := tg.do(t, "GET", "/"+name+"/_settings", nil).must(t, 200); s.str(name+".settings.index.blocks.write") != "false" {
			t.Fatalf("settings after lifting the block: %s", s.raw)
		}
		tg.do(t, "PUT", "/"+name+"/_doc/2", map[string]any{"n": 2}).must(t, 201)
		tg.do(t, "PUT", "/"+alias+"/_doc/4", map[string]any{"n": 4}).must(t, 201)
		b = tg.do(t, "POST", "/_bulk", ndjson(map[string]any{"index": map[string]any{"_index": name, "_id": "5"}}, map[string]any{"n": 5})).must(t, 200)
		if b.get("errors") != false {
			t.Fatalf("bulk after lifting the block: %s", b.raw)
		}

		// The setting sets the block just as the API does, and a blocked
		// index can still be deleted.
		tg.do(t, "PUT", "/"+name+"/_settings", map[string]any{"index.blocks.write": true}).must(t, 200)
		expectBlocked(t, tg.do(t, "DELETE", "/"+name+"/_doc/2", nil), name)
		tg.do(t, "DELETE", "/"+name, nil).must(t, 200)
		tg.do(t, "HEAD", "/"+name, nil).must(t, 404)

		// An index created with the block refuses its first write.
		born := tg.idx(t, "born-blocked")
		tg.do(t, "PUT", "/"+born, map[string]any{"settings": map[string]any{"index": map[string]any{"blocks": map[string]any{"write": true}}}}).must(t, 200)
		expectBlocked(t, tg.do(t, "PUT", "/"+born+"/_doc/1", map[string]any{"n": 1}), born)
		tg.do(t, "GET", "/"+born+"/_doc/1", nil).must(t, 404)

		if tg.local != nil {
			// Blocks the local server does not enforce are refused, not
			// silently accepted; turning them off is harmless.
			for _, blk := range []string{"read_only", "read_only_allow_delete", "read", "metadata"} {
				r := tg.do(t, "PUT", "/"+other+"/_settings", map[string]any{"index.blocks." + blk: true})
				r.expectError(t, 400, "illegal_argument_exception")
				if !strings.HasPrefix(r.str("error.reason"), "[eventpipe]") {
					t.Fatalf("unsupported block %s: %s", blk, r.raw)
				}
				tg.do(t, "PUT", "/"+other+"/_block/"+blk, nil).expectError(t, 400, "illegal_argument_exception")
				tg.do(t, "PUT", "/"+other+"/_settings", map[string]any{"index.blocks." + blk: false}).must(t, 200)
			}
			tg.do(t, "PUT", "/"+other+"/_settings", map[string]any{"index.blocks.bogus": true}).expectError(t, 400, "illegal_argument_exception")
			tg.do(t, "PUT", "/"+other+"/_doc/d", map[string]any{"n": 4}).must(t, 201)
		}
	})
}

// TestWriteBlockSurvivesRestart checks that the block is durable state: it
// survives kill -9 (replayed from the write-ahead log) and a clean restart
// (restored from the snapshot), and so does lifting it.
func TestWriteBlockSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	c := startChild(t, dir)
	tg := &target{name: "local", url: c.url, client: http.DefaultClient}
	tg.do(t, "PUT", "/wb/_doc/1", map[string]any{"n": 1}).must(t, 201)
	tg.do(t, "PUT", "/wb/_block/write", nil).must(t, 200)
	expectBlocked(t, tg.do(t, "PUT", "/wb/_doc/2", map[string]any{"n": 2}), "wb")
	c.kill()

	c = startChild(t, dir)
	tg = &target{name: "local", url: c.url, client: http.DefaultClient}
	expectBlocked(t, tg.do(t, "PUT", "/wb/_doc/2", map[string]any{"n": 2}), "wb")
	tg.do(t, "PUT", "/wb/_settings", map[string]any{"index.blocks.write": false}).must(t, 200)
	tg.do(t, "PUT", "/wb/_doc/2", map[string]any{"n": 2}).must(t, 201)
	tg.do(t, "PUT", "/wb/_settings", map[string]any{"index.blocks.write": true}).must(t, 200)
	c.kill()

	srv, tg2 := openLocal(t, dir)
	expectBlocked(t, tg2.do(t, "PUT", "/wb/_doc/3", map[string]any{"n": 3}), "wb")
	if g := tg2.do(t, "GET", "/wb/_doc/2", nil).must(t, 200); g.num(t, "_source.n") != 2 {
		t.Fatalf("write made while unblocked: %s", g.raw)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	// After a clean close the state comes from the snapshot.
	srv, tg3 := openLocal(t, dir)
	expectBlocked(t, tg3.do(t, "PUT", "/wb/_doc/3", map[string]any{"n": 3}), "wb")
	tg3.do(t, "PUT", "/wb/_settings", map[string]any{"index.blocks.write": nil}).must(t, 200)
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	_, tg4 := openLocal(t, dir)
	tg4.do(t, "PUT", "/wb/_doc/3", map[string]any{"n": 3}).must(t, 201)
	if s := tg4.do(t, "GET", "/wb/_settings", nil).must(t, 200); s.get("wb.settings.index.blocks") != nil {
		t.Fatalf("reset block setting still listed: %s", s.raw)
	}
}
