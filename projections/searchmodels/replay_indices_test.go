package searchmodels_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/projections/elastic"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
	"github.com/eventpipe/eventpipe/projections/searchmodels"
)

// TestReplayDeletesOnlyItsOwnLeftoversAndKeepsTheLiveReplicas replays
// the todos search model beside indices whose names start with its alias:
// those of a model todos-search-v2 (its live index and a replay's
// leftover), one named like a todos-search replay's index that another
// model's alias points to, and one whose suffix is not a replay's. All of
// them survive; only a real leftover of todos-search (a replay's index no
// alias points to) and the replaced index are deleted. The live index was
// raised to 1 replica after it was created with the model's 0: the index
// the alias points to after the replay has 1 replica too, and the
// documents are those of a from-scratch application.
func TestReplayDeletesOnlyItsOwnLeftoversAndKeepsTheLiveReplicas(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	p := searchmodels.TodoSearch{}
	alias := w.alias(p) // <prefix>todos-search
	rng := rand.New(rand.NewPCG(11, 12))
	var all []eventstore.Envelope
	for _, id := range ids("todo-", 40) {
		all = append(all, w.todoHistory(id, rng)...)
	}
	if _, err := w.applier(p).Apply(ctx, all); err != nil {
		t.Fatal(err)
	}
	old, err := elastic.AliasTarget(ctx, w.es, alias)
	if err != nil {
		t.Fatal(err)
	}
	if got := replicasOf(t, w, old); got != "0" {
		t.Fatalf("the model's first index has %s replicas, want the model's 0", got)
	}
	if err := esclient.Do(ctx, w.es, esapi.IndicesPutSettingsRequest{Index: []string{old},
		Body: strings.NewReader(`{"index":{"number_of_replicas":1}}`)}, nil); err != nil {
		t.Fatal(err)
	}

	// Another model, todos-search-v2: its live index behind its alias,
	// and an index one of its replays left.
	v2 := alias + "-v2"
	if err := elastic.EnsureIndex(ctx, w.es, p, v2); err != nil {
		t.Fatal(err)
	}
	createIndex(t, w, v2+"-1700000000000", "")
	// Named like a todos-search replay's index, but another model's alias
	// points to it.
	foreign := alias + "-1650000000000"
	createIndex(t, w, foreign, w.prefix+"someone-else")
	// Starts with the alias, but its suffix is not a replay's.
	oddSuffix := alias + "-123"
	createIndex(t, w, oddSuffix, "")
	// A real leftover: a replay's index of todos-search that no alias
	// points to.
	leftover := alias + "-1600000000000"
	createIndex(t, w, leftover, "")

	res, err := elastic.Replay(ctx, elastic.ReplayConfig{Client: w.es, Store: w.store, History: w.history(), Projection: p, Alias: alias})
	if err != nil {
		t.Fatal(err)
	}
	now, err := elastic.AliasTarget(ctx, w.es, alias)
	if err != nil || now == old || !strings.HasPrefix(now, alias+"-") {
		t.Fatalf("alias %s points to %q (%v), was %s", alias, now, err, old)
	}
	if got := replicasOf(t, w, now); got != "1" {
		t.Errorf("the replayed index %s has %s replicas, want the live index's 1", now, got)
	}
	for _, kept := range []string{v2 + "-0", v2 + "-1700000000000", foreign, oddSuffix} {
		if !indexExists(t, w, kept) {
			t.Errorf("the replay of %s deleted %s, which is not its own", alias, kept)
		}
	}
	for _, gone := range []string{leftover, old} {
		if indexExists(t, w, gone) {
			t.Errorf("%s still exists after the replay of %s", gone, alias)
		}
	}
	if target, err := elastic.AliasTarget(ctx, w.es, v2); err != nil || target != v2+"-0" {
		t.Errorf("the other model's alias %s points to %q (%v), want %s-0", v2, target, err, v2)
	}
	assertSame(t, "after the replay", w.documents(alias), w.scratch(p, all))
	t.Logf("replay: %d events, swap %v, elapsed %v", res.Events, res.Swap, res.Elapsed)
}

// createIndex creates a small index, with alias when not empty.
func createIndex(t *testing.T, w *world, index, alias string) {
	t.Helper()
	body := `{"settings":{"number_of_shards":1,"number_of_replicas":0}}`
	if alias != "" {
		body = `{"settings":{"number_of_shards":1,"number_of_replicas":0},"aliases":{"` + alias + `":{}}}`
	}
	if err := esclient.Do(context.Background(), w.es, esapi.IndicesCreateRequest{Index: index, Body: strings.NewReader(body)}, nil); err != nil {
		t.Fatalf("create index %s: %v", index, err)
	}
}

// indexExists reports whether index exists.
func indexExists(t *testing.T, w *world, index string) bool {
	t.Helper()
	res, err := esapi.IndicesExistsRequest{Index: []string{index}}.Do(context.Background(), w.es)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	return res.StatusCode == 200
}

// replicasOf returns index.number_of_replicas of index.
func replicasOf(t *testing.T, w *world, index string) string {
	t.Helper()
	var res map[string]struct {
		Settings struct {
			Index struct {
				Replicas string `json:"number_of_replicas"`
			} `json:"index"`
		} `json:"settings"`
	}
	if err := esclient.Do(context.Background(), w.es, esapi.IndicesGetSettingsRequest{Index: []string{index}}, &res); err != nil {
		t.Fatal(err)
	}
	return res[index].Settings.Index.Replicas
}
