package readmodels_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
	pgmigrate "github.com/eventpipe/eventpipe/migrations/postgres"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/readmodels"
)

// appendTransaction appends one accepted transaction to account id at
// version and returns the stored event.
func (w *world) appendTransaction(ctx context.Context, t *testing.T, id string, version int64, amount int64) eventstore.Envelope {
	ref := eventstore.Ref{Type: bankaccount.AggregateType, ID: id}
	req, err := eventstore.Prepare(ref, version, eventstore.Change{Events: []eventstore.NewEvent{
		eventstore.Event(bankaccount.TransactionAccepted, bankaccount.TransactionAcceptedData{Desc: "live", Amount: amount}),
	}}, eventstore.Schema{})
	if err != nil {
		t.Error(err)
		return eventstore.Envelope{}
	}
	res, err := w.store.Append(ctx, req)
	if err != nil {
		t.Error(err)
		return eventstore.Envelope{}
	}
	return res.Events[0]
}

func (w *world) replayConfig(t *testing.T) projections.ReplayConfig {
	return projections.ReplayConfig{
		DB: w.db, Store: w.store, History: history(w.store), Count: w.store.CountByType, Projection: readmodels.Accounts{},
		CreateTables: func(ctx context.Context, schema string) error {
			_, err := pgmigrate.Migrate(ctx, pgmigrate.Config{URL: testenv.Endpoints().Postgres, Schema: schema})
			return err
		},
	}
}

// TestReplaySwapsInARebuiltModelWhileCommandsKeepArriving rebuilds the
// accounts read model while a writer keeps appending transactions and
// applying them to the live model, and readers keep querying it: no
// reader ever sees fewer accounts or transactions than before (never an
// empty or half-built model), events applied live after the history was
// read are brought into the new model at the swap, and afterwards the
// model equals a from-scratch replay row by row, every event applied
// once.
func TestReplaySwapsInARebuiltModelWhileCommandsKeepArriving(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	const accounts = 40
	ctx := context.Background()
	w := newWorld(t)
	live := w.applier(t)
	versions := map[string]int64{}
	var ids []string
	for i := range accounts {
		id := fmt.Sprintf("acc-%02d", i)
		evs, _ := w.openAccount(t, id, 10)
		if _, err := live.Apply(ctx, evs); err != nil {
			t.Fatal(err)
		}
		versions[id] = int64(len(evs))
		ids = append(ids, id)
	}

	// The writer: append a transaction to a random account and apply it
	// live, until stopped. Every fourth one is left for "the topic" (not
	// applied live), as if the consumer had not got to it yet.
	var (
		mu       sync.Mutex
		unseen   []eventstore.Envelope
		writes   atomic.Int64
		stop     = make(chan struct{})
		writerWG sync.WaitGroup
	)
	writeOne := func() {
		mu.Lock()
		defer mu.Unlock()
		id := ids[rand.IntN(len(ids))]
		e := w.appendTransaction(ctx, t, id, versions[id], int64(rand.IntN(50)+1))
		if e.Sequence == 0 {
			return
		}
		versions[id] = e.Sequence
		if writes.Add(1)%4 == 0 {
			unseen = append(unseen, e)
			return
		}
		if _, err := live.Apply(ctx, []eventstore.Envelope{e}); err != nil {
			t.Error(err)
		}
	}
	stopWriter := sync.OnceFunc(func() { close(stop); writerWG.Wait() })
	defer stopWriter()
	writerWG.Add(1)
	go func() {
		defer writerWG.Done()
		for {
			select {
			case <-stop:
				return
			default:
				writeOne()
			}
		}
	}()

	// Readers: counts never go down and never hit zero.
	var (
		readerErr  atomic.Pointer[error]
		reads      atomic.Int64
		readerStop = make(chan struct{})
		readersWG  sync.WaitGroup
	)
	stopReaders := sync.OnceFunc(func() { close(readerStop); readersWG.Wait() })
	defer stopReaders()
	for range 3 {
		readersWG.Add(1)
		go func() {
			defer readersWG.Done()
			var lastAccounts, lastTx int64
			for {
				select {
				case <-readerStop:
					return
				default:
				}
				var nAcc, nTx int64
				err := w.db.QueryRow(ctx, `SELECT (SELECT count(*) FROM accounts), (SELECT count(*) FROM account_transactions)`).Scan(&nAcc, &nTx)
				if err == nil && (nAcc != accounts || nTx < lastTx || nAcc < lastAccounts) {
					err = fmt.Errorf("a reader saw %d accounts and %d transactions after %d and %d", nAcc, nTx, lastAccounts, lastTx)
				}
				if err != nil {
					readerErr.CompareAndSwap(nil, &err)
					return
				}
				lastAccounts, lastTx = nAcc, nTx
				reads.Add(1)
			}
		}()
	}

	cfg := w.replayConfig(t)
	var phases []string
	cfg.Progress = func(p projections.ReplayProgress) {
		if len(phases) == 0 || phases[len(phases)-1] != p.Phase {
			phases = append(phases, p.Phase)
		}
		if p.Phase == "swap" && len(phases) == 2 {
			// Just before the swap: one more event applied live only,
			// which the swap must bring into the rebuilt model.
			writeOne()
			writeOne()
			writeOne()
			writeOne()
		}
	}
	time.Sleep(300 * time.Millisecond) // let the writer get ahead of the history
	res, err := projections.Replay(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // readers and the writer on the new tables
	stopWriter()
	stopReaders()
	if p := readerErr.Load(); p != nil {
		t.Fatal(*p)
	}
	t.Logf("replay: %d events from history, %d caught up at the swap, swap %s, %d live writes, %d reads", res.Events, res.CaughtUp, res.Swap, writes.Load(), reads.Load())
	if fmt.Sprint(phases) != "[rebuild swap done]" {
		t.Errorf("phases %v", phases)
	}
	if res.CaughtUp == 0 {
		t.Error("nothing was caught up at the swap, though events were applied live after the history was read")
	}
	if reads.Load() == 0 {
		t.Error("the readers read nothing")
	}

	// The consumer gets to the events it had not seen, on the new tables.
	if _, err := live.Apply(ctx, unseen); err != nil {
		t.Fatal(err)
	}
	w.assertEqualsScratchReplay(t, ids, "after the replay")
	var leftovers int
	if err := w.db.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname = $1 OR nspname LIKE '%retired%'`, projections.ShadowSchema(w.schema, "accounts")).Scan(&leftovers); err != nil {
		t.Fatal(err)
	}
	if leftovers != 0 {
		t.Errorf("%d shadow or retired schemas left behind", leftovers)
	}
}

// TestReplayRefusesASecondReplayOfTheSameProjection: while one replay
// holds the projection's replay lock, another fails with
// ErrReplayRunning and leaves the live model alone.
func TestReplayRefusesASecondReplayOfTheSameProjection(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	evs, _ := w.openAccount(t, "acc-1", 3)
	if _, err := w.applier(t).Apply(ctx, evs); err != nil {
		t.Fatal(err)
	}
	before := dump(t, w, `SELECT account_id, balance, version FROM accounts`)
	first := w.replayConfig(t)
	started, release := make(chan struct{}), make(chan struct{})
	first.Progress = func(p projections.ReplayProgress) {
		if p.Phase == "rebuild" && p.Done == 0 {
			close(started)
			<-release
		}
	}
	done := make(chan error, 1)
	go func() { _, err := projections.Replay(ctx, first); done <- err }()
	<-started
	_, err := projections.Replay(ctx, w.replayConfig(t))
	close(release)
	if !errors.Is(err, projections.ErrReplayRunning) {
		t.Fatalf("second replay: %v, want ErrReplayRunning", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if after := dump(t, w, `SELECT account_id, balance, version FROM accounts`); after != before {
		t.Fatalf("model changed: %s -> %s", before, after)
	}
}
