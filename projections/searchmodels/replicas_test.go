package searchmodels_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/elastic"
	"github.com/eventpipe/eventpipe/projections/searchmodels"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestTwoSearchReplicasCatchingUpNeverMoveTheCursorBack runs the todos
// search model's catch-up (4,000 stored events) in two replicas at once,
// each with its own Applier, the second starting once the first recorded
// a batch, so that their state writes interleave. A poller reads the
// catch-up document throughout: within one start the cursor and the
// count never go back, "done" is never undone, and the start never moves.
// In the end the catch-up is done and the documents equal the store.
func TestTwoSearchReplicasCatchingUpNeverMoveTheCursorBack(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	const todos, updates = 100, 39
	w := newWorld(t)
	all, _ := w.storeTodos(todos, updates)
	p := searchmodels.TodoSearch{}
	alias := w.alias(p)
	stateIndex := elastic.Alias(w.prefix, elastic.DefaultCatchUpIndex)

	var (
		mu       sync.Mutex
		last     searchCatchUp
		samples  int
		wentBack []string
		stopPoll = make(chan struct{})
		pollDone = make(chan struct{})
	)
	go func() {
		defer close(pollDone)
		for {
			select {
			case <-stopPoll:
				return
			default:
			}
			st := w.catchUpDoc(stateIndex, alias)
			mu.Lock()
			if !last.Started.IsZero() {
				switch {
				case st.Started.Before(last.Started):
					wentBack = append(wentBack, fmt.Sprintf("start %v → %v", last.Started, st.Started))
				case st.Started.Equal(last.Started) && (st.After < last.After || st.Events < last.Events || (last.Done != nil && st.Done == nil)):
					wentBack = append(wentBack, fmt.Sprintf("%+v → %+v", last, st))
				}
			}
			last = st
			samples++
			mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}()

	if err := elastic.EnsureIndex(context.Background(), w.es, p, alias); err != nil {
		t.Fatal(err)
	}
	var firstBatch atomic.Bool
	g, ctx := errgroup.WithContext(context.Background())
	for i := range 2 {
		g.Go(func() error {
			if i == 1 {
				integration.Await(t, "the first replica to record a batch", func() error {
					if !firstBatch.Load() {
						return fmt.Errorf("not yet")
					}
					return nil
				})
			}
			a, err := elastic.NewApplier(elastic.ApplierConfig{Client: w.es, Store: w.store, Projection: p, Index: alias, CatchUpIndex: stateIndex})
			if err != nil {
				return err
			}
			_, err = projections.ResumeCatchUp(ctx, a, w.history(), func(projections.CatchUpState) { firstBatch.Store(true) })
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	close(stopPoll)
	<-pollDone
	final := w.catchUpDoc(stateIndex, alias)
	t.Logf("%d samples of the catch-up document; recorded %+v", samples, final)
	for _, s := range wentBack[:min(len(wentBack), 5)] {
		t.Errorf("the catch-up state went back: %s", s)
	}
	if final.Done == nil || final.Events != int64(len(all)) {
		t.Errorf("the recorded catch-up is %+v, want done with %d events", final, len(all))
	}
	assertSame(t, "after two replicas caught up", w.documents(alias), w.scratch(p, all))
}
