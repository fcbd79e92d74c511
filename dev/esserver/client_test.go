package esserver

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/elastic/go-elasticsearch/v8"
	"github.com/elastic/go-elasticsearch/v8/esapi"
	"github.com/elastic/go-elasticsearch/v8/typedapi/types"
	"github.com/elastic/go-elasticsearch/v8/typedapi/types/enums/refresh"
)

// TestGoClient drives the server through the official client: the product
// check must pass and the usual calls must work.
func TestGoClient(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		es, err := elasticsearch.NewClient(elasticsearch.Config{Addresses: []string{tg.url}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		check := func(want int) func(res *esapi.Response, err error) map[string]any {
			return func(res *esapi.Response, err error) map[string]any {
				t.Helper()
				if err != nil {
					t.Fatalf("client error: %v", err)
				}
				defer res.Body.Close()
				var body map[string]any
				_ = json.NewDecoder(res.Body).Decode(&body)
				if res.StatusCode != want {
					t.Fatalf("status %d, want %d: %v", res.StatusCode, want, body)
				}
				return body
			}
		}
		info := check(200)(es.Info())
		if v := get(info, "version.number").(string); !strings.HasPrefix(v, "8.") {
			t.Fatalf("info: %v", info)
		}
		name := tg.idx(t, "client")
		check(200)(es.Indices.Create(name, es.Indices.Create.WithBody(strings.NewReader(
			`{"mappings":{"properties":{"title":{"type":"text"},"n":{"type":"long"}}}}`))))
		check(201)(es.Index(name, strings.NewReader(`{"title":"hello client","n":1}`),
			es.Index.WithDocumentID("1"), es.Index.WithRefresh("true")))
		g := check(200)(es.Get(name, "1"))
		if get(g, "_source.n") != 1.0 {
			t.Fatalf("get: %v", g)
		}
		bulk := ndjson(
			map[string]any{"index": map[string]any{"_id": "2"}}, map[string]any{"title": "second hello", "n": 2},
			map[string]any{"create": map[string]any{"_id": "1"}}, map[string]any{"title": "dup", "n": 9},
		)
		b := check(200)(es.Bulk(strings.NewReader(bulk), es.Bulk.WithIndex(name), es.Bulk.WithRefresh("wait_for")))
		if b["errors"] != true {
			t.Fatalf("bulk: %v", b)
		}
		s := check(200)(es.Search(es.Search.WithContext(ctx), es.Search.WithIndex(name),
			es.Search.WithBody(strings.NewReader(`{"query":{"match":{"title":"hello"}},"sort":[{"n":"desc"}]}`))))
		if get(s, "hits.total.value") != 2.0 || get(s, "hits.hits.0._id") != "2" {
			t.Fatalf("search: %v", s)
		}
		c := check(200)(es.Count(es.Count.WithIndex(name)))
		if c["count"] != 2.0 {
			t.Fatalf("count: %v", c)
		}
		check(409)(es.Index(name, strings.NewReader(`{"n":1}`), es.Index.WithDocumentID("1"),
			es.Index.WithVersion(1), es.Index.WithVersionType("external")))
		check(200)(es.Indices.UpdateAliases(strings.NewReader(`{"actions":[{"add":{"index":"` + name + `","alias":"` + name + `-read"}}]}`)))
		check(200)(es.Indices.ExistsAlias([]string{name + "-read"}))
		check(200)(es.Delete(name, "1"))
		check(404)(es.Get(name, "1"))
		check(200)(es.Indices.Delete([]string{name}))

		// The typed client, which sends the compatibility media type.
		tc, err := elasticsearch.NewTypedClient(elasticsearch.Config{Addresses: []string{tg.url}})
		if err != nil {
			t.Fatal(err)
		}
		typed := tg.idx(t, "typed")
		if _, err := tc.Index(typed).Id("x").Document(map[string]any{"title": "typed doc", "n": 5}).Refresh(refresh.True).Do(ctx); err != nil {
			t.Fatalf("typed index: %v", err)
		}
		sr, err := tc.Search().Index(typed).Query(&types.Query{Match: map[string]types.MatchQuery{"title": {Query: "typed"}}}).Do(ctx)
		if err != nil {
			t.Fatalf("typed search: %v", err)
		}
		if sr.Hits.Total.Value != 1 || *sr.Hits.Hits[0].Id_ != "x" {
			t.Fatalf("typed search result: %+v", sr.Hits)
		}
	})
}
