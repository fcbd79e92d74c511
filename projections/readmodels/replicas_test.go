package readmodels_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/readmodels"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestTwoReplicasCatchingUpNeverMoveTheCursorBack runs the accounts read
// model's catch-up (6,000 stored events) in two replicas at once, each
// with its own Applier and connections, the second starting once the
// first recorded its start: both apply every batch they read, and each
// records its cursor after each batch, so their writes interleave. A
// poller reads projection_catchup throughout: within one start the
// cursor and the count never go back, and the start never moves. In the
// end the catch-up is done and the model equals the store.
func TestTwoReplicasCatchingUpNeverMoveTheCursorBack(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	const accounts, perAccount = 150, 39
	ctx := context.Background()
	w := newWorld(t)
	stored := w.storeAccounts(t, accounts, perAccount)
	name := readmodels.Accounts{}.Name()

	var (
		mu        sync.Mutex
		last      catchUpRow
		samples   int
		wentBack  []string
		stopPoll  = make(chan struct{})
		pollDone  = make(chan struct{})
		replicaOf = map[int]projections.CatchUpState{}
	)
	go func() {
		defer close(pollDone)
		for {
			select {
			case <-stopPoll:
				return
			default:
			}
			r := w.catchUpRow(t, name)
			mu.Lock()
			if !last.Started.IsZero() {
				switch {
				case r.Started.Before(last.Started):
					wentBack = append(wentBack, fmt.Sprintf("start %v → %v", last.Started, r.Started))
				case r.Started.Equal(last.Started) && (r.After < last.After || r.Events < last.Events || (last.Done && !r.Done)):
					wentBack = append(wentBack, fmt.Sprintf("%+v → %+v", last, r))
				}
			}
			last = r
			samples++
			mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}()

	var firstStarted atomic.Bool
	g, gctx := errgroup.WithContext(ctx)
	for i := range 2 {
		g.Go(func() error {
			if i == 1 {
				integration.Await(t, "the first replica to record its start", func() error {
					if !firstStarted.Load() {
						return fmt.Errorf("not yet")
					}
					return nil
				})
			}
			a := w.applier(t)
			st, err := projections.ResumeCatchUp(gctx, a, history(w.store), func(projections.CatchUpState) { firstStarted.Store(true) })
			mu.Lock()
			replicaOf[i] = st
			mu.Unlock()
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	close(stopPoll)
	<-pollDone
	final := w.catchUpRow(t, name)
	t.Logf("%d samples of the cursor; replicas ended with %+v and %+v; recorded %+v", samples, replicaOf[0], replicaOf[1], final)
	for _, s := range wentBack[:min(len(wentBack), 5)] {
		t.Errorf("the catch-up state went back: %s", s)
	}
	if !final.Done {
		t.Errorf("the recorded catch-up is not done: %+v", final)
	}
	w.assertAccountsEqual(t, stored)
}
