package esserver

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestBulk(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "bulk")
		other := tg.idx(t, "bulk2")
		tg.do(t, "PUT", "/"+name, map[string]any{"mappings": map[string]any{"properties": map[string]any{"n": map[string]any{"type": "long"}}}}).must(t, 200)
		tg.do(t, "PUT", "/"+name+"/_doc/exists", map[string]any{"n": 0}).must(t, 201)
		tg.do(t, "PUT", "/"+name+"/_doc/ext?version=10&version_type=external", map[string]any{"n": 10}).must(t, 201)
		tg.do(t, "PUT", "/"+name+"/_doc/extdel?version=10&version_type=external", map[string]any{"n": 10}).must(t, 201)

		body := ndjson(
			map[string]any{"index": map[string]any{"_index": name, "_id": "1"}}, map[string]any{"n": 1},
			map[string]any{"create": map[string]any{"_index": name, "_id": "2"}}, map[string]any{"n": 2},
			map[string]any{"create": map[string]any{"_index": name, "_id": "exists"}}, map[string]any{"n": 99},
			map[string]any{"index": map[string]any{"_index": name, "_id": "ext", "version": 5, "version_type": "external"}}, map[string]any{"n": 5},
			map[string]any{"index": map[string]any{"_index": name, "_id": "ext", "version": 11, "version_type": "external"}}, map[string]any{"n": 11},
			map[string]any{"delete": map[string]any{"_index": name, "_id": "extdel", "version": 3, "version_type": "external"}},
			map[string]any{"index": map[string]any{"_index": name, "_id": "badsrc"}}, map[string]any{"n": "not-a-number"},
			map[string]any{"update": map[string]any{"_index": name, "_id": "1"}}, map[string]any{"doc": map[string]any{"extra": true}},
			map[string]any{"update": map[string]any{"_index": name, "_id": "nope"}}, map[string]any{"doc": map[string]any{"extra": true}},
			map[string]any{"delete": map[string]any{"_index": name, "_id": "2"}},
			map[string]any{"delete": map[string]any{"_index": name, "_id": "never"}},
			map[string]any{"index": map[string]any{"_id": "o1"}}, map[string]any{"n": 1},
			map[string]any{"index": map[string]any{"_index": name}}, map[string]any{"n": 42},
		)
		r := tg.do(t, "POST", "/"+other+"/_bulk?refresh=true", body).must(t, 200)
		if r.get("errors") != true {
			t.Fatalf("errors flag: %s", r.raw)
		}
		if _, ok := r.get("took").(float64); !ok {
			t.Fatalf("took missing: %s", r.raw)
		}
		want := []struct {
			action, id, result string
			status             int
			errType            string
		}{
			{"index", "1", "created", 201, ""},
			{"create", "2", "created", 201, ""},
			{"create", "exists", "", 409, "version_conflict_engine_exception"},
			{"index", "ext", "", 409, "version_conflict_engine_exception"},
			{"index", "ext", "updated", 200, ""},
			{"delete", "extdel", "", 409, "version_conflict_engine_exception"},
			{"index", "badsrc", "", 400, "document_parsing_exception|mapper_parsing_exception"},
			{"update", "1", "updated", 200, ""},
			{"update", "nope", "", 404, "document_missing_exception"},
			{"delete", "2", "deleted", 200, ""},
			{"delete", "never", "not_found", 404, ""},
			{"index", "o1", "created", 201, ""},
			{"index", "", "created", 201, ""},
		}
		items, _ := r.get("items").([]any)
		if len(items) != len(want) {
			t.Fatalf("%d items, want %d: %s", len(items), len(want), r.raw)
		}
		for i, w := range want {
			it := get(items[i], w.action)
			if it == nil {
				t.Fatalf("item %d: no %q key: %v", i, w.action, items[i])
			}
			if int(get(it, "status").(float64)) != w.status {
				t.Fatalf("item %d (%s %s): status %v, want %d: %v", i, w.action, w.id, get(it, "status"), w.status, it)
			}
			if w.id != "" && get(it, "_id") != w.id {
				t.Fatalf("item %d: _id %v, want %s", i, get(it, "_id"), w.id)
			}
			if w.result != "" && get(it, "result") != w.result {
				t.Fatalf("item %d: result %v, want %s", i, get(it, "result"), w.result)
			}
			if w.errType != "" {
				ty, _ := get(it, "error.type").(string)
				if !strings.Contains("|"+w.errType+"|", "|"+ty+"|") || get(it, "error.reason") == nil {
					t.Fatalf("item %d: error %v, want %s", i, get(it, "error"), w.errType)
				}
			}
			if w.errType == "" && w.status < 300 {
				if _, ok := get(it, "_seq_no").(float64); !ok {
					t.Fatalf("item %d lacks _seq_no: %v", i, it)
				}
			}
		}
		if get(items[11], "index._index") != other {
			t.Fatalf("default index from the path not used: %v", items[11])
		}
		// The effects are visible.
		if g := tg.do(t, "GET", "/"+name+"/_doc/exists", nil).must(t, 200); g.num(t, "_source.n") != 0 {
			t.Fatalf("a failed create overwrote the document: %s", g.raw)
		}
		if g := tg.do(t, "GET", "/"+name+"/_doc/ext", nil).must(t, 200); g.num(t, "_version") != 11 || g.num(t, "_source.n") != 11 {
			t.Fatalf("ext: %s", g.raw)
		}
		tg.do(t, "GET", "/"+name+"/_doc/extdel", nil).must(t, 200)
		tg.do(t, "GET", "/"+name+"/_doc/2", nil).must(t, 404)
		tg.do(t, "GET", "/"+name+"/_doc/badsrc", nil).must(t, 404)
		if g := tg.do(t, "GET", "/"+name+"/_doc/1", nil).must(t, 200); g.get("_source.extra") != true {
			t.Fatalf("bulk update: %s", g.raw)
		}
		// refresh=true made everything searchable.
		c := tg.do(t, "POST", "/"+name+"/_count", nil).must(t, 200)
		// exists, ext, extdel, 1 and the auto-id document.
		if c.num(t, "count") != 5 {
			t.Fatalf("count after bulk: %s", c.raw)
		}
	})
}

func TestBulkMalformed(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "bulkbad")
		tg.do(t, "PUT", "/"+name, nil).must(t, 200)
		cases := map[string]string{
			"not json action":   "nonsense\n{}\n",
			"unknown action":    ndjson(map[string]any{"explode": map[string]any{"_index": name, "_id": "1"}}, map[string]any{}),
			"broken json":       `{"index":{"_index":"` + name + `","_id":"1"}` + "\n" + `{"n":1}` + "\n",
			"no final newline":  ndjson(map[string]any{"index": map[string]any{"_index": name, "_id": "1"}}) + `{"n":1}`,
			"unknown parameter": ndjson(map[string]any{"index": map[string]any{"_index": name, "_id": "1", "bogus": 1}}, map[string]any{"n": 1}),
		}
		for what, body := range cases {
			t.Run(strings.ReplaceAll(what, " ", "_"), func(t *testing.T) {
				full := ndjson(map[string]any{"index": map[string]any{"_index": name, "_id": "first"}}, map[string]any{"n": 1}) + body
				r := tg.do(t, "POST", "/_bulk", full)
				r.expectError(t, 400, "illegal_argument_exception", "x_content_parse_exception", "parse_exception", "json_parse_exception")
				tg.do(t, "GET", "/"+name+"/_doc/first", nil).must(t, 404)
			})
		}
		tg.do(t, "POST", "/_bulk", "").expectError(t, 400, "action_request_validation_exception", "parse_exception")
	})
}

func TestRefreshVisibility(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "refresh")
		tg.do(t, "PUT", "/"+name, map[string]any{"settings": map[string]any{"refresh_interval": "-1"}}).must(t, 200)
		count := func() float64 {
			return tg.do(t, "POST", "/"+name+"/_search", map[string]any{"query": map[string]any{"match_all": map[string]any{}}}).must(t, 200).num(t, "hits.total.value")
		}
		tg.do(t, "PUT", "/"+name+"/_doc/1", map[string]any{"v": 1}).must(t, 201)
		// GET by id is real time; search only sees refreshed writes.
		tg.do(t, "GET", "/"+name+"/_doc/1", nil).must(t, 200)
		if n := count(); n != 0 {
			t.Fatalf("search saw %v documents before any refresh (refresh disabled)", n)
		}
		tg.do(t, "POST", "/"+name+"/_refresh", nil).must(t, 200)
		if n := count(); n != 1 {
			t.Fatalf("search saw %v documents after _refresh, want 1", n)
		}
		tg.do(t, "PUT", "/"+name+"/_doc/2?refresh=true", map[string]any{"v": 2}).must(t, 201)
		if n := count(); n != 2 {
			t.Fatalf("refresh=true: %v documents", n)
		}
		tg.do(t, "PUT", "/"+name+"/_doc/3?refresh=wait_for", map[string]any{"v": 3}).must(t, 201)
		if n := count(); n != 3 {
			t.Fatalf("refresh=wait_for: %v documents", n)
		}
		tg.do(t, "DELETE", "/"+name+"/_doc/3", nil).must(t, 200)
		if n := count(); n != 3 {
			t.Fatalf("delete visible before refresh: %v documents", n)
		}
		tg.do(t, "GET", "/_refresh", nil).must(t, 200)
		if n := count(); n != 2 {
			t.Fatalf("after global refresh: %v", n)
		}
		// With a periodic refresh interval writes become visible on their own.
		tg.do(t, "PUT", "/"+name+"/_settings", map[string]any{"index": map[string]any{"refresh_interval": "200ms"}}).must(t, 200)
		tg.do(t, "PUT", "/"+name+"/_doc/4", map[string]any{"v": 4}).must(t, 201)
		start := time.Now()
		waitFor(t, "periodic refresh", func() bool { return count() == 3 })
		t.Logf("visible after %v", time.Since(start))
		if s := tg.do(t, "GET", "/"+name+"/_settings", nil).must(t, 200); s.str(name+".settings.index.refresh_interval") != "200ms" {
			t.Fatalf("settings: %s", s.raw)
		}
	})
}

func TestRefreshIntervalBound(t *testing.T) {
	// Local only: the configured RefreshInterval bounds the visibility delay.
	_, url := startLocal(t, t.TempDir(), 150*time.Millisecond)
	tg := &target{name: "local", url: url, client: http.DefaultClient, prefix: "bound-"}
	tg.do(t, "PUT", "/v/_doc/1", map[string]any{"v": 1}).must(t, 201)
	start := time.Now()
	waitFor(t, "visibility", func() bool {
		return tg.do(t, "GET", "/v/_count", nil).must(t, 200).num(t, "count") == 1
	})
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("write became visible after %v with RefreshInterval 150ms", d)
	}
}
