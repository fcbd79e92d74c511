package searchmodels_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/eventpipe/eventpipe/projections/elastic/esclient"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/elastic"
	"github.com/eventpipe/eventpipe/projections/searchmodels"
)

// TestReplayUnderLiveTrafficNeverShowsAnEmptyIndex rebuilds the todos
// index while a live writer keeps appending and applying events through
// the alias and searchers keep counting through it: no search fails or
// sees fewer documents than were there before, a second replay is refused
// while the first runs, and afterwards the alias points to a new index
// equal to a from-scratch application of everything stored; the old index
// is gone.
func TestReplayUnderLiveTrafficNeverShowsAnEmptyIndex(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	w := newWorld(t)
	ctx := context.Background()
	p := searchmodels.TodoSearch{}
	alias := w.alias(p)
	rng := rand.New(rand.NewPCG(7, 8))
	var mu sync.Mutex
	var all []eventstore.Envelope
	for _, id := range ids("todo-", 150) {
		all = append(all, w.todoHistory(id, rng)...)
	}
	live := w.applier(p)
	if _, err := live.Apply(ctx, all); err != nil {
		t.Fatal(err)
	}
	before := len(w.documents(alias))
	old, err := elastic.AliasTarget(ctx, w.es, alias)
	if err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var written, searched atomic.Int64
	// The live writer: new todos and updates of existing ones, each
	// applied through the alias as the consumer would.
	wg.Add(1)
	go func() {
		defer wg.Done()
		wrng := rand.New(rand.NewPCG(9, 10))
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			var evs []eventstore.Envelope
			if i%3 == 0 {
				evs = w.todoHistory(fmt.Sprintf("live-%04d", i), wrng)
			} else {
				id := fmt.Sprintf("todo-%04d", wrng.IntN(150))
				ref := eventstore.Ref{Type: todo.AggregateType, ID: id}
				cur, err := w.store.Load(ctx, ref, 0)
				if err != nil {
					t.Error(err)
					return
				}
				if cur[len(cur)-1].EventType == todo.TodoDeleted {
					continue
				}
				evs = w.append(ref, cur[len(cur)-1].Sequence, eventstore.Event(todo.TodoUpdated, todo.TodoData{Title: "live update " + fmt.Sprint(i)}))
			}
			mu.Lock()
			all = append(all, evs...)
			mu.Unlock()
			// A write aimed at the old index after the swap is refused
			// by its block: retry through the alias, as the Runner does.
			for attempt := 0; ; attempt++ {
				_, err := live.Apply(ctx, evs)
				if err == nil {
					break
				}
				if attempt == 20 {
					t.Errorf("live write: %v", err)
					return
				}
			}
			written.Add(int64(len(evs)))
		}
	}()
	// Searchers: every count through the alias answers, with at least
	// the documents there were before the replay.
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				var res struct {
					Count int `json:"count"`
				}
				if err := esclient.Do(ctx, w.es, esapi.CountRequest{Index: []string{alias}}, &res); err != nil {
					t.Errorf("count through the alias during the replay: %v", err)
					return
				}
				if res.Count < before {
					t.Errorf("a search saw %d documents, fewer than the %d before the replay", res.Count, before)
					return
				}
				if _, err := (searchmodels.TodoIndex{Client: w.es, Alias: alias}).Search(ctx, searchmodels.TodoQuery{Q: "milk", Page: searchmodels.Page{Size: 5}}); err != nil {
					t.Errorf("search during the replay: %v", err)
					return
				}
				searched.Add(1)
			}
		}()
	}

	var second error
	secondOnce := sync.Once{}
	cfg := elastic.ReplayConfig{Client: w.es, Store: w.store, History: w.history(), Projection: p, Alias: alias,
		Count: w.store.CountByType}
	cfg.Progress = func(pr projections.ReplayProgress) {
		if pr.Phase == "rebuild" && pr.Done > 0 {
			secondOnce.Do(func() { _, second = elastic.Replay(ctx, cfg) })
		}
	}
	res, err := elastic.Replay(ctx, cfg)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(second, projections.ErrReplayRunning) {
		t.Errorf("a second replay during the first: %v, want ErrReplayRunning", second)
	}
	if written.Load() == 0 || searched.Load() == 0 {
		t.Fatalf("the replay ran without live traffic (%d events written, %d searches)", written.Load(), searched.Load())
	}
	now, err := elastic.AliasTarget(ctx, w.es, alias)
	if err != nil || now == old || !strings.HasPrefix(now, alias+"-") {
		t.Fatalf("alias %s points to %q (%v), was %s", alias, now, err, old)
	}
	exists, err := esapi.IndicesExistsRequest{Index: []string{old}}.Do(ctx, w.es)
	if err != nil || exists.StatusCode != 404 {
		t.Errorf("the old index %s still exists after the replay (%v, %v)", old, exists, err)
	}
	assertSame(t, "after the replay", w.documents(alias), w.scratch(p, all))
	t.Logf("replay: %d events rebuilt, %d caught up at the swap, swap %v, elapsed %v; meanwhile %d events written live, %d searches",
		res.Events, res.CaughtUp, res.Swap, res.Elapsed, written.Load(), searched.Load())
}
