package readmodels_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/projections/readmodels"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// catchUpRow is a read model's row of projection_catchup as the test
// reads it.
type catchUpRow struct {
	Started time.Time
	After   string
	Events  int64
	Done    bool
}

func (w *world) catchUpRow(t *testing.T, projection string) catchUpRow {
	t.Helper()
	var r catchUpRow
	err := w.db.QueryRow(context.Background(), `SELECT started_at, after_event, events, done_at IS NOT NULL FROM projection_catchup WHERE projection = $1`,
		projection).Scan(&r.Started, &r.After, &r.Events, &r.Done)
	if errors.Is(err, pgx.ErrNoRows) {
		return catchUpRow{}
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// storeAccounts appends n accounts to w's store, each in one append of
// AccountOpened and perAccount transactions, from 8 goroutines; it
// returns the stored events by account id.
func (w *world) storeAccounts(t *testing.T, n, perAccount int) map[string][]eventstore.Envelope {
	t.Helper()
	results := make([][]eventstore.Envelope, n)
	g, ctx := errgroup.WithContext(context.Background())
	// DynamoDB Local writes one transaction at a time (SQLite): a few
	// appenders keep it busy (about 80 appends/s here, whether 1 or 16);
	// 32 were several times slower.
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			id := fmt.Sprintf("acc-%05d", i)
			ch := eventstore.Change{Events: []eventstore.NewEvent{eventstore.Event(bankaccount.AccountOpened, bankaccount.AccountOpenedData{ID: id})}}
			for j := range perAccount {
				ch.Events = append(ch.Events, eventstore.Event(bankaccount.TransactionAccepted,
					bankaccount.TransactionAcceptedData{Desc: fmt.Sprint("t", j), Amount: int64(rand.IntN(200) - 80)}))
			}
			req, err := eventstore.Prepare(eventstore.Ref{Type: bankaccount.AggregateType, ID: id}, 0, ch, eventstore.Schema{})
			if err != nil {
				return err
			}
			res, err := w.store.Append(ctx, req)
			if err != nil {
				return fmt.Errorf("append %s: %w", id, err)
			}
			results[i] = res.Events
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	out := make(map[string][]eventstore.Envelope, n)
	for _, evs := range results {
		out[evs[0].AggregateID] = evs
	}
	return out
}

// TestKilledCatchUpResumesAndEndsEqualToTheStore is the issue's
// acceptance test for a read model: 125 accounts (5,000 events) exist
// only in the event store, the live topics are empty (a namespace of the
// test's own), and the accounts read model runs in a child process
// (eventpipe.NewConsumers with the read model's default start: history)
// that is killed with SIGKILL three times during its catch-up and
// restarted. Each kill follows a batch the running child committed (its
// projection_catchup row moved), and after each kill the row shows the
// catch-up mid-way: not done, 0 < events < 5,000, events above the
// previous kill's (the restart resumed and made progress), and never
// claiming more than the read model holds. Polled throughout, the row
// never goes back and keeps its first start: no restart begins again.
// In the end the catch-up is
// done with exactly 5,000 events counted (a catch-up that started over
// after a kill would count the re-read events again), the group was
// started on the live topics, and every account's row, position and
// transactions equal what its stored events give, each event applied
// once (apply_count = version).
func TestKilledCatchUpResumesAndEndsEqualToTheStore(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	const accounts, perAccount, kills = 125, 39, 3
	const total = accounts * (1 + perAccount)
	began := time.Now()
	w := newWorld(t)
	stored := w.storeAccounts(t, accounts, perAccount)
	t.Logf("stored %d events of %d accounts in %v", total, accounts, time.Since(began).Round(time.Millisecond))
	topics := bus.Topics{Prefix: testenv.UniqueName(t, "ns") + "."}
	name := readmodels.Accounts{}.Name()

	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envConsumeChildSchema+"="+w.schema, envConsumeChildStart+"=default",
			endpoints.EnvEventsTable+"="+w.table, endpoints.EnvTopicPrefix+"="+topics.Prefix)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	applied := func() int64 {
		var n int64
		if err := w.db.QueryRow(context.Background(), `SELECT coalesce(sum(seq), 0) FROM projection_positions WHERE projection = $1`, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// observe reads the state, failing t if it ever goes back or names
	// another start than the first one seen: a catch-up begun again
	// instead of resumed. seen is every distinct events count observed.
	var (
		first catchUpRow
		last  catchUpRow
		seen  []int64
	)
	observe := func() catchUpRow {
		r := w.catchUpRow(t, name)
		switch {
		case r.Started.IsZero():
			return r
		case first.Started.IsZero():
			first = r
		case !r.Started.Equal(first.Started):
			t.Fatalf("the catch-up began again at %v (first began at %v): state %+v", r.Started, first.Started, r)
		}
		if r.Events < last.Events || r.After < last.After {
			t.Fatalf("the catch-up state went back from %+v to %+v", last, r)
		}
		if r.Events != last.Events {
			seen = append(seen, r.Events)
		}
		last = r
		return r
	}

	catchUpStarted := time.Now()
	child := start()
	t.Cleanup(func() { _ = child.Process.Kill(); _, _ = child.Process.Wait() })
	var at []catchUpRow
	prev := catchUpRow{}
	for k := range kills {
		// Wait for the running child to commit a batch beyond the
		// previous kill's state.
		deadline := time.Now().Add(integration.HangAfter()) // polled every 5 ms, to kill soon after the batch
		for {
			r := observe()
			if r.Done {
				t.Fatalf("kill %d: the catch-up finished (%+v) before the kill; kills so far at %+v", k+1, r, at)
			}
			if r.Events > prev.Events {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("kill %d: the catch-up did not move past %d events in %v (%s; state %+v)", k+1, prev.Events, integration.HangAfter(), integration.EnvHangAfter, r)
			}
			time.Sleep(5 * time.Millisecond)
		}
		// Land somewhere in the next batch: reading it from the store,
		// or in its transaction.
		time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond)
		_ = child.Process.Signal(syscall.SIGKILL)
		_, _ = child.Process.Wait()
		r, pos := observe(), applied()
		at = append(at, r)
		t.Logf("kill %d: catch-up state events=%d after=%s done=%v; positions add up to %d of %d", k+1, r.Events, r.After, r.Done, pos, total)
		switch {
		case r.Done || r.Events <= 0 || r.Events >= total:
			t.Fatalf("kill %d did not land mid-catch-up: state %+v of %d events", k+1, r, total)
		case r.Events <= prev.Events || r.After <= prev.After:
			t.Fatalf("kill %d: state %+v did not advance past the previous kill's %+v", k+1, r, prev)
		case pos < r.Events:
			t.Fatalf("kill %d: the state claims %d events but the positions add up to %d", k+1, r.Events, pos)
		case pos >= total:
			t.Fatalf("kill %d: every event was applied already (positions %d)", k+1, pos)
		}
		prev = r
		child = start()
	}

	// The last child finishes the catch-up and hands over to the topics.
	var final catchUpRow
	integration.AwaitProgress(t, "the catch-up after the last kill (its events, then done)", func() int64 {
		if final = observe(); final.Done {
			return total + 1
		}
		return min(final.Events, total)
	}, total+1)
	t.Logf("caught up %v after the first start, through %d kills; state events=%d after=%s; events counts seen: %v",
		time.Since(catchUpStarted).Round(time.Millisecond), kills, final.Events, final.After, seen)
	if final.Events != total {
		t.Errorf("the catch-up counted %d events, want exactly the %d stored: more means it read events again after a kill instead of resuming", final.Events, total)
	}
	if final.After < prev.After {
		t.Errorf("the final cursor %s is below the last kill's %s", final.After, prev.After)
	}
	brokers := testenv.KafkaBrokers(t)
	group, topic := topics.Prefix+"projection."+name, topics.Events(bankaccount.AggregateType)
	integration.Await(t, "the group "+group+" to start on "+topic+" after the catch-up", func() error {
		if len(testenv.CommittedOffsets(t, brokers, group, topic)) == 0 {
			return errors.New("no offset committed")
		}
		return nil
	})

	w.assertAccountsEqual(t, stored)
	t.Logf("test took %v", time.Since(began).Round(time.Millisecond))
}

// assertAccountsEqual fails t unless the accounts read model holds
// exactly the accounts of stored, each row, position and transaction
// what its events give, every event applied once.
func (w *world) assertAccountsEqual(t *testing.T, stored map[string][]eventstore.Envelope) {
	t.Helper()
	w.assertAccountsEqualIn(t, readmodels.Accounts{}.Name(), stored)
}

// assertAccountsEqualIn is assertAccountsEqual for the read model called
// projection, which writes the accounts tables (and may read other
// aggregate types too).
func (w *world) assertAccountsEqualIn(t *testing.T, projection string, stored map[string][]eventstore.Envelope) {
	t.Helper()
	ctx := context.Background()
	type txRow struct {
		amount, balance int64
	}
	wantRows := map[string]row{}
	wantTx := map[string]txRow{}
	for id, evs := range stored {
		var balance int64
		for _, e := range evs {
			if e.EventType != bankaccount.TransactionAccepted {
				continue
			}
			var d bankaccount.TransactionAcceptedData
			if err := e.DecodePayload(&d); err != nil {
				t.Fatal(err)
			}
			balance += d.Amount
			wantTx[fmt.Sprintf("%s/%d", id, e.Sequence)] = txRow{d.Amount, balance}
		}
		wantRows[id] = want(evs, balance)
	}
	rows, err := w.db.Query(ctx, `SELECT a.account_id, a.balance, a.version, a.apply_count,
		(SELECT count(*) FROM account_transactions x WHERE x.account_id = a.account_id),
		coalesce((SELECT seq FROM projection_positions p WHERE p.projection = $1 AND p.aggregate_type = $2 AND p.aggregate_id = a.account_id), -1)
		FROM accounts a`, projection, bankaccount.AggregateType)
	if err != nil {
		t.Fatal(err)
	}
	gotRows := map[string]row{}
	for rows.Next() {
		var id string
		var r row
		if err := rows.Scan(&id, &r.balance, &r.version, &r.applyCount, &r.transactions, &r.position); err != nil {
			t.Fatal(err)
		}
		gotRows[id] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	bad := 0
	for id, wr := range wantRows {
		if gr, ok := gotRows[id]; !ok || gr != wr {
			if bad++; bad <= 5 {
				t.Errorf("account %s: read model %+v (present %v), want %+v", id, gr, ok, wr)
			}
		}
	}
	if len(gotRows) != len(wantRows) || bad > 0 {
		t.Fatalf("%d accounts in the read model, want %d; %d differ from their stored events", len(gotRows), len(wantRows), bad)
	}
	// Each row's position is its account's last stored sequence (above);
	// and there is no position of anything else.
	var positions int
	if err := w.db.QueryRow(ctx, `SELECT count(*) FROM projection_positions WHERE projection = $1 AND aggregate_type = $2`,
		projection, bankaccount.AggregateType).Scan(&positions); err != nil {
		t.Fatal(err)
	}
	if positions != len(stored) {
		t.Errorf("%d positions, want %d", positions, len(stored))
	}
	rows, err = w.db.Query(ctx, `SELECT account_id, seq, amount, balance FROM account_transactions`)
	if err != nil {
		t.Fatal(err)
	}
	gotTx := map[string]txRow{}
	for rows.Next() {
		var id string
		var seq int64
		var r txRow
		if err := rows.Scan(&id, &seq, &r.amount, &r.balance); err != nil {
			t.Fatal(err)
		}
		gotTx[fmt.Sprintf("%s/%d", id, seq)] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var diffs []string
	for k, wt := range wantTx {
		if gt, ok := gotTx[k]; !ok || gt != wt {
			diffs = append(diffs, fmt.Sprintf("%s: %+v (present %v), want %+v", k, gt, ok, wt))
		}
	}
	if len(gotTx) != len(wantTx) || len(diffs) > 0 {
		t.Fatalf("%d transaction rows, want %d; differing: %s", len(gotTx), len(wantTx), strings.Join(diffs[:min(len(diffs), 5)], "; "))
	}
}
