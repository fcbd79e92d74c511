package esserver

import (
	"context"
	"testing"

	"github.com/elastic/go-elasticsearch/v8"
	"github.com/elastic/go-elasticsearch/v8/typedapi/types"
)

// mgetDocs returns the docs array of an _mget answer, checking its length.
func mgetDocs(t *testing.T, r resp, n int) []any {
	t.Helper()
	docs, _ := r.get("docs").([]any)
	if len(docs) != n {
		t.Fatalf("%d docs, want %d: %s", len(docs), n, r.raw)
	}
	return docs
}

func TestMget(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "mget")
		missing := tg.prefix + "mget-no-such-index"
		// Periodic refresh off: whatever _mget sees, it sees in real time.
		tg.do(t, "PUT", "/"+name, map[string]any{"settings": map[string]any{"refresh_interval": "-1"}}).must(t, 200)
		tg.do(t, "PUT", "/"+name+"/_doc/1", map[string]any{"n": 1, "tag": "a"}).must(t, 201)
		tg.do(t, "PUT", "/"+name+"/_doc/2", map[string]any{"n": 2, "tag": "b"}).must(t, 201)
		tg.do(t, "POST", "/"+name+"/_update/1", map[string]any{"doc": map[string]any{"n": 10}}).must(t, 200)
		if c := tg.do(t, "POST", "/"+name+"/_count", nil).must(t, 200); c.num(t, "count") != 0 {
			t.Fatalf("writes searchable before any refresh: %s", c.raw)
		}

		// Mixed: found, not found, missing index, _source switched off per item.
		r := tg.do(t, "POST", "/_mget", map[string]any{"docs": []any{
			map[string]any{"_index": name, "_id": "1"},
			map[string]any{"_index": name, "_id": "nope"},
			map[string]any{"_index": missing, "_id": "1"},
			map[string]any{"_index": name, "_id": "2", "_source": false},
		}}).must(t, 200)
		docs := mgetDocs(t, r, 4)
		d0 := docs[0]
		if get(d0, "found") != true || get(d0, "_index") != name || get(d0, "_id") != "1" ||
			get(d0, "_version") != 2.0 || get(d0, "_primary_term") != 1.0 || get(d0, "_source.n") != 10.0 {
			t.Fatalf("found doc (realtime, after an update): %v", d0)
		}
		if _, ok := get(d0, "_seq_no").(float64); !ok {
			t.Fatalf("found doc lacks _seq_no: %v", d0)
		}
		d1, _ := docs[1].(map[string]any)
		if d1["found"] != false || d1["_index"] != name || d1["_id"] != "nope" || len(d1) != 3 {
			t.Fatalf("missing doc: %v", d1)
		}
		d2 := docs[2]
		if get(d2, "_index") != missing || get(d2, "_id") != "1" || get(d2, "found") != nil ||
			get(d2, "error.type") != "index_not_found_exception" || get(d2, "error.root_cause.0.type") != "index_not_found_exception" ||
			get(d2, "error.reason") == nil {
			t.Fatalf("missing index: %v", d2)
		}
		if get(docs[3], "found") != true || get(docs[3], "_source") != nil || get(docs[3], "_version") != 1.0 {
			t.Fatalf("_source:false item: %v", docs[3])
		}

		// ids with the index in the path, in request order; GET works too.
		r = tg.do(t, "GET", "/"+name+"/_mget", map[string]any{"ids": []string{"2", "nope", "1"}}).must(t, 200)
		docs = mgetDocs(t, r, 3)
		if get(docs[0], "_id") != "2" || get(docs[0], "_source.tag") != "b" || get(docs[1], "found") != false || get(docs[2], "_source.n") != 10.0 {
			t.Fatalf("ids: %s", r.raw)
		}
		// docs without _index take the path's index; _source=false in the URL.
		r = tg.do(t, "POST", "/"+name+"/_mget?_source=false", map[string]any{"docs": []any{map[string]any{"_id": "1"}}}).must(t, 200)
		if d := mgetDocs(t, r, 1)[0]; get(d, "found") != true || get(d, "_index") != name || get(d, "_source") != nil {
			t.Fatalf("_source=false: %s", r.raw)
		}
		// A delete is visible at once too.
		tg.do(t, "DELETE", "/"+name+"/_doc/2", nil).must(t, 200)
		r = tg.do(t, "POST", "/"+name+"/_mget", map[string]any{"ids": []string{"2"}}).must(t, 200)
		if get(mgetDocs(t, r, 1)[0], "found") != false {
			t.Fatalf("deleted doc still found: %s", r.raw)
		}

		// Through an alias: the path alias resolves to its single index.
		alias := tg.prefix + "mget-alias"
		tg.do(t, "POST", "/_aliases", map[string]any{"actions": []any{
			map[string]any{"add": map[string]any{"index": name, "alias": alias}},
		}}).must(t, 200)
		r = tg.do(t, "POST", "/"+alias+"/_mget", map[string]any{"ids": []string{"1", "nope"}}).must(t, 200)
		docs = mgetDocs(t, r, 2)
		if get(docs[0], "_index") != name || get(docs[0], "found") != true || get(docs[1], "_index") != name || get(docs[1], "found") != false {
			t.Fatalf("via alias: %s", r.raw)
		}
		r = tg.do(t, "POST", "/_mget", map[string]any{"docs": []any{map[string]any{"_index": alias, "_id": "1"}}}).must(t, 200)
		if d := mgetDocs(t, r, 1)[0]; get(d, "_index") != name || get(d, "_source.n") != 10.0 {
			t.Fatalf("_index naming an alias: %s", r.raw)
		}
		// An alias over two indices cannot serve a single-index read: the
		// item fails, the request does not.
		other := tg.idx(t, "mget2")
		tg.do(t, "PUT", "/"+other+"/_doc/1", map[string]any{"n": 100}).must(t, 201)
		tg.do(t, "POST", "/_aliases", map[string]any{"actions": []any{
			map[string]any{"add": map[string]any{"index": other, "alias": alias}},
		}}).must(t, 200)
		r = tg.do(t, "POST", "/_mget", map[string]any{"docs": []any{
			map[string]any{"_index": alias, "_id": "1"},
			map[string]any{"_index": other, "_id": "1"},
		}}).must(t, 200)
		docs = mgetDocs(t, r, 2)
		if get(docs[0], "error.type") != "illegal_argument_exception" || get(docs[1], "_source.n") != 100.0 {
			t.Fatalf("alias over two indices: %s", r.raw)
		}

		// The typed client decodes both kinds of item.
		tc, err := elasticsearch.NewTypedClient(elasticsearch.Config{Addresses: []string{tg.url}})
		if err != nil {
			t.Fatal(err)
		}
		mr, err := tc.Mget().Index(name).Ids("1", "nope").Do(context.Background())
		if err != nil {
			t.Fatalf("typed mget: %v", err)
		}
		if len(mr.Docs) != 2 {
			t.Fatalf("typed mget: %+v", mr.Docs)
		}
		g0, ok0 := mr.Docs[0].(*types.GetResult)
		g1, ok1 := mr.Docs[1].(*types.GetResult)
		if !ok0 || !ok1 || !g0.Found || g0.Id_ != "1" || g0.Version_ == nil || *g0.Version_ != 2 || g1.Found {
			t.Fatalf("typed mget docs: %#v %#v", mr.Docs[0], mr.Docs[1])
		}
		mr, err = tc.Mget().Index(missing).Ids("1").Do(context.Background())
		if err != nil {
			t.Fatalf("typed mget of a missing index: %v", err)
		}
		if me, ok := mr.Docs[0].(*types.MultiGetError); !ok || me.Error.Type != "index_not_found_exception" || me.Index_ != missing {
			t.Fatalf("typed mget of a missing index: %#v", mr.Docs)
		}
	})
}

func TestMgetErrors(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		name := tg.idx(t, "mgetbad")
		tg.do(t, "PUT", "/"+name+"/_doc/1", map[string]any{"n": 1}).must(t, 201)
		// ids need an index from the path; docs need an _index without one.
		tg.do(t, "POST", "/_mget", map[string]any{"ids": []string{"1"}}).expectError(t, 400, "action_request_validation_exception")
		tg.do(t, "POST", "/_mget", map[string]any{"docs": []any{map[string]any{"_id": "1"}}}).expectError(t, 400, "action_request_validation_exception")
		tg.do(t, "POST", "/_mget", map[string]any{"docs": []any{map[string]any{"_index": name}}}).expectError(t, 400, "action_request_validation_exception")
		tg.do(t, "POST", "/"+name+"/_mget", map[string]any{"ids": []string{}}).expectError(t, 400, "action_request_validation_exception")
		tg.do(t, "POST", "/"+name+"/_mget", map[string]any{}).expectError(t, 400, "action_request_validation_exception")
		tg.do(t, "POST", "/"+name+"/_mget", nil).expectError(t, 400, "parse_exception", "action_request_validation_exception")
		tg.do(t, "POST", "/"+name+"/_mget", map[string]any{"keys": []string{"1"}}).expectError(t, 400, "parsing_exception")
		tg.do(t, "POST", "/"+name+"/_mget", map[string]any{"ids": "1"}).expectError(t, 400, "parsing_exception")
		tg.do(t, "POST", "/"+name+"/_mget", map[string]any{"docs": []any{"1"}}).expectError(t, 400, "illegal_argument_exception")
		tg.do(t, "POST", "/"+name+"/_mget", map[string]any{"docs": []any{map[string]any{"_id": "1", "bogus": 1}}}).expectError(t, 400, "parse_exception")
		tg.do(t, "POST", "/"+name+"/_mget", `{"ids": [`).expectError(t, 400, "x_content_parse_exception", "parse_exception", "json_parse_exception", "parsing_exception")
		// Nothing above disturbed the document.
		r := tg.do(t, "POST", "/"+name+"/_mget", map[string]any{"ids": []string{"1"}}).must(t, 200)
		if get(mgetDocs(t, r, 1)[0], "_source.n") != 1.0 {
			t.Fatalf("after errors: %s", r.raw)
		}
	})
}
