package readmodels_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// envVersionChild runs balances (the version it names) in a child;
// envVersionSchema is its Postgres schema.
const (
	envVersionChild  = "EVENTPIPE_TEST_VERSION_CHILD"
	envVersionSchema = "EVENTPIPE_TEST_VERSION_SCHEMA"
)

// balances is a read model of the bank accounts' balances in a table of
// its own (a projections.Migrator). Each row records the generation of
// the model that last wrote it (built_by): a rebuild by generation 2
// writes every row again. Without transactions it reads AccountOpened
// alone (every balance 0).
type balances struct {
	version      int
	transactions bool
	gen          int
}

// spec is b as the child's environment names it.
func (m balances) spec() string { return fmt.Sprintf("%d:%t:%d", m.version, m.transactions, m.gen) }

func (balances) Name() string { return "balances" }

func (m balances) Version() int { return m.version }

func (balances) AggregateTypes() []string { return []string{bankaccount.AggregateType} }

func (m balances) EventTypes() []string {
	if !m.transactions {
		return []string{bankaccount.AccountOpened}
	}
	return []string{bankaccount.AccountOpened, bankaccount.TransactionAccepted}
}

func (balances) Tables() []string { return []string{"balances"} }

func (balances) Migrations() fs.FS {
	return fstest.MapFS{"001_balances.sql": {Data: []byte(`CREATE TABLE balances (
    account_id  text PRIMARY KEY,
    balance     bigint NOT NULL,
    events      integer NOT NULL,
    apply_count integer NOT NULL,
    built_by    integer NOT NULL
);
---- create above / drop below ----
DROP TABLE balances;
`)}}
}

func (m balances) Apply(_ context.Context, b *pgx.Batch, e eventstore.Envelope) error {
	switch {
	case e.EventType == bankaccount.AccountOpened:
		b.Queue(`INSERT INTO balances (account_id, balance, events, apply_count, built_by) VALUES ($1, 0, 1, 1, $2)`, e.AggregateID, m.gen)
	case e.EventType == bankaccount.TransactionAccepted && m.transactions:
		var d bankaccount.TransactionAcceptedData
		if err := json.Unmarshal(e.Payload, &d); err != nil {
			return &eventstore.DecodeError{What: e.String(), Field: "payload", Reason: err.Error()}
		}
		b.Queue(`UPDATE balances SET balance = balance + $2, events = events + 1, apply_count = apply_count + 1, built_by = $3 WHERE account_id = $1`,
			e.AggregateID, d.Amount, m.gen)
	}
	return nil
}

// runVersionChildIfRequested runs balances at the version
// envVersionChild names in this process with NewConsumers' defaults
// (start: history, automatic rebuilds), until SIGTERM or SIGKILL.
func runVersionChildIfRequested() {
	runModelChildIfRequested("version child", envVersionChild, envVersionSchema, func(v string) (projections.Projection, error) {
		var m balances
		if _, err := fmt.Sscanf(strings.ReplaceAll(v, ":", " "), "%d %t %d", &m.version, &m.transactions, &m.gen); err != nil {
			return nil, fmt.Errorf("child spec %q: %w", v, err)
		}
		return m, nil
	})
}

// TestAReadModelWhoseVersionChangesIsRebuiltBesideTheLiveOne builds
// balances at version 1 from 200 stored accounts (8,000 events), then
// deploys version 2 (a fixed fold). The child rebuilds the model into a
// shadow schema while the live table keeps answering reads (every
// account there, built by version 1) and stays live: transactions on
// other accounts keep being written and published all along, and the
// live table applies them during the rebuild. The child is killed with
// SIGKILL twice mid-rebuild, each time after the shadow committed a
// batch; each restart resumes the same rebuild (same start, further on).
// After the swap every row was built by version 2, equals its stored
// events, each applied once, and the model's recorded version is 2.
func TestAReadModelWhoseVersionChangesIsRebuiltBesideTheLiveOne(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	testRebuildBesideTheLiveOne(t, balances{version: 1, transactions: true, gen: 1}, balances{version: 2, transactions: true, gen: 2})
}

// TestAReadModelThatGainsAnEventTypeOfATypeItReadIsRebuilt: balances
// first reads AccountOpened alone (200 accounts, every balance 0), then
// gains TransactionAccepted (7,800 stored events) at the same version.
// Its positions are past those events, so a catch-up beside the live
// consumer could not apply them: the consumer rebuilds the model as for a
// version change, and the same kills, resumes and checks as
// TestAReadModelWhoseVersionChangesIsRebuiltBesideTheLiveOne hold; live
// accounts keep being opened (events of the other type) all along.
func TestAReadModelThatGainsAnEventTypeOfATypeItReadIsRebuilt(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	testRebuildBesideTheLiveOne(t, balances{version: 1, transactions: false, gen: 1}, balances{version: 1, transactions: true, gen: 2})
}

// testRebuildBesideTheLiveOne runs from over stored accounts, then
// deploys to, killing it twice mid-rebuild while live events flow, and
// checks the swapped-in model against the store.
func testRebuildBesideTheLiveOne(t *testing.T, from, to balances) {
	const accounts, perAccount, kills = 200, 39, 2
	const total = accounts * (1 + perAccount)
	ctx := context.Background()
	w := newWorld(t)
	if _, _, err := eventpipe.MigratePostgres(ctx, w.db.Config().ConnConfig, w.schema, nil, balances{}); err != nil {
		t.Fatal(err)
	}
	topics := bus.Topics{Prefix: testenv.UniqueName(t, "ns") + "."}
	name := balances{}.Name()
	shadow := projections.ShadowSchema(w.schema, name)
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: testenv.KafkaBrokers(t), Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()

	// live appends a transaction to one of the live accounts (opening it
	// first) and publishes its events, as the relay would.
	const liveAccounts = 10
	liveSeq := map[string]int64{}
	var liveWritten int64
	live := func() error {
		id := fmt.Sprintf("live-%02d", rand.IntN(liveAccounts))
		ch := eventstore.Change{Events: []eventstore.NewEvent{bankaccount.Transacted("live", 1)}}
		if liveSeq[id] == 0 {
			ch.Events = append([]eventstore.NewEvent{bankaccount.Opened(id)}, ch.Events...)
		}
		req, err := eventstore.Prepare(eventstore.Ref{Type: bankaccount.AggregateType, ID: id}, liveSeq[id], ch, eventstore.Schema{})
		if err != nil {
			return err
		}
		res, err := w.store.Append(ctx, req)
		if err != nil {
			return err
		}
		liveSeq[id] = res.LastSeq
		liveWritten += int64(len(res.Events))
		for _, e := range res.Events {
			m, err := bus.EventMessage(e)
			if err != nil {
				return err
			}
			if err := pub.Publish(topics.Events(bankaccount.AggregateType), m); err != nil {
				return err
			}
		}
		return nil
	}

	var child *exec.Cmd
	start := func(version string) {
		child = exec.Command(os.Args[0], "-test.run=^$")
		child.Env = append(os.Environ(), envVersionChild+"="+version, envVersionSchema+"="+w.schema, endpoints.EnvKafkaInstanceID+"=version-child",
			endpoints.EnvEventsTable+"="+w.table, endpoints.EnvTopicPrefix+"="+topics.Prefix)
		child.Stdout, child.Stderr = os.Stderr, os.Stderr
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
	}
	kill := func() {
		_ = child.Process.Signal(syscall.SIGKILL)
		_, _ = child.Process.Wait()
	}
	t.Cleanup(func() { kill() })
	count := func(sql string, args ...any) int64 {
		var n int64
		if err := w.db.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// shadowState is the rebuild's catch-up state in the shadow schema
	// (zero while there is none).
	shadowState := func() projections.CatchUpState {
		var exists bool
		if err := w.db.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, pgx.Identifier{shadow, "projection_catchup"}.Sanitize()).Scan(&exists); err != nil {
			t.Fatal(err)
		}
		if !exists {
			return projections.CatchUpState{}
		}
		var st projections.CatchUpState
		var done *time.Time
		err := w.db.QueryRow(ctx, `SELECT started_at, after_event, events, done_at, version FROM `+pgx.Identifier{shadow, "projection_catchup"}.Sanitize()+
			` WHERE projection = $1`, name).Scan(&st.Started, &st.After, &st.Events, &done, &st.Version)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == "42703" || pgErr.Code == "42P01") {
			return projections.CatchUpState{} // the shadow's migrations are still running
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		if done != nil {
			st.Done = *done
		}
		return st
	}
	// built is when the live model's finished catch-up began (zero while
	// it is not finished): a swap replaces it with the rebuild's.
	built := func() time.Time {
		var started time.Time
		err := w.db.QueryRow(ctx, `SELECT started_at FROM projection_catchup WHERE projection = $1 AND done_at IS NOT NULL`, name).Scan(&started)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		return started
	}
	liveApplied := func() int64 {
		return count(`SELECT coalesce(sum(events), 0) FROM balances WHERE account_id LIKE 'live-%'`)
	}

	// Version 1, caught up from the store.
	stored := w.storeAccounts(t, accounts, perAccount)
	start(from.spec())
	integration.AwaitProgress(t, "the first model's catch-up", func() int64 {
		if !built().IsZero() {
			return total + 1
		}
		return count(`SELECT coalesce(sum(events), 0) FROM balances`)
	}, total+1)
	kill()
	first := built()
	swapped := func() bool { b := built(); return !b.IsZero() && !b.Equal(first) }
	if n := count(`SELECT count(*) FROM balances WHERE built_by = $1`, from.gen); n != accounts {
		t.Fatalf("the first model built %d rows, want %d", n, accounts)
	}

	// Version 2; live transactions keep coming.
	stop := make(chan struct{})
	writing := make(chan struct{})
	go func() {
		defer close(writing)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				if err := live(); err != nil {
					t.Errorf("write a live transaction: %v", err)
					return
				}
			}
		}
	}()
	stopWriting := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-writing
	}
	defer stopWriting()
	start(to.spec())
	var prev projections.CatchUpState
	var liveDuringRebuild int64
	for k := range kills {
		for deadline := time.Now().Add(integration.HangAfter()); ; time.Sleep(5 * time.Millisecond) {
			st := shadowState()
			if swapped() {
				t.Fatalf("kill %d: the rebuild finished and swapped (shadow %+v) before the kill", k+1, st)
			}
			// Before the first kill the live table must also have
			// applied a live transaction: it stays live meanwhile.
			if st.Events > prev.Events && (k > 0 || liveApplied() > 0) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("kill %d: the rebuild did not commit a batch past %d events in %v (%s; shadow %+v)", k+1, prev.Events, integration.HangAfter(), integration.EnvHangAfter, st)
			}
		}
		time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond) // land in the next batch
		liveNow := liveApplied()
		kill()
		st := shadowState()
		// Reads still answer from version 1's table, whole.
		old := count(`SELECT count(*) FROM balances WHERE account_id LIKE 'acc-%' AND built_by = $1`, from.gen)
		t.Logf("kill %d: shadow events=%d after=%s done=%v; live table: %d accounts built by the first model, %d live events applied", k+1, st.Events, st.After, !st.Done.IsZero(), old, liveNow)
		if !st.Done.IsZero() || st.Events <= 0 || st.Events >= total {
			t.Fatalf("kill %d did not land mid-rebuild: shadow state %+v of %d events", k+1, st, total)
		}
		if st.Version != to.version {
			t.Fatalf("kill %d: the shadow is a rebuild at version %d, want %d", k+1, st.Version, to.version)
		}
		if old != accounts || swapped() {
			t.Fatalf("kill %d: the live table has %d accounts built by the first model (want %d), swapped %v", k+1, old, accounts, swapped())
		}
		if k > 0 && (!st.Started.Equal(prev.Started) || st.Events <= prev.Events) {
			t.Fatalf("kill %d: shadow state %+v did not resume the previous kill's %+v", k+1, st, prev)
		}
		if k == 0 {
			liveDuringRebuild = liveNow
		}
		prev = st
		start(to.spec())
	}
	integration.AwaitProgress(t, "the rebuild to swap in", func() int64 {
		if swapped() {
			return total + 1
		}
		return min(shadowState().Events, total)
	}, total+1)
	stopWriting()
	integration.AwaitProgress(t, "every live transaction to be applied", liveApplied, liveWritten)
	if liveDuringRebuild == 0 {
		t.Error("no live transaction was applied during the rebuild")
	}
	// The rebuild drops the shadow schema right after the swap commits:
	// on a loaded machine that may be a moment after the swap shows.
	integration.Await(t, "the shadow schema dropped after the swap", func() error {
		if st := shadowState(); !st.Started.IsZero() {
			return fmt.Errorf("the shadow schema is still there: %+v", st)
		}
		return nil
	})

	// Every account equals its stored events, built by version 2, each
	// event applied once, at the position of its last event.
	type rowOf struct{ balance, events, applyCount, builtBy, position int64 }
	rows := map[string]rowOf{}
	rs, err := w.db.Query(ctx, `SELECT b.account_id, b.balance, b.events, b.apply_count, b.built_by, coalesce(p.seq, 0)
		FROM balances b LEFT JOIN projection_positions p ON p.projection = $1 AND p.aggregate_type = $2 AND p.aggregate_id = b.account_id`,
		name, bankaccount.AggregateType)
	if err != nil {
		t.Fatal(err)
	}
	for rs.Next() {
		var id string
		var r rowOf
		if err := rs.Scan(&id, &r.balance, &r.events, &r.applyCount, &r.builtBy, &r.position); err != nil {
			t.Fatal(err)
		}
		rows[id] = r
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	for id, seq := range liveSeq {
		evs, err := w.store.Load(ctx, eventstore.Ref{Type: bankaccount.AggregateType, ID: id}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(evs)) != seq {
			t.Fatalf("%s: %d events stored, want %d", id, len(evs), seq)
		}
		stored[id] = evs
	}
	if len(rows) != len(stored) {
		t.Errorf("%d rows, want %d accounts", len(rows), len(stored))
	}
	var wrong []string
	for id, evs := range stored {
		var balance int64
		for _, e := range evs[1:] {
			var d bankaccount.TransactionAcceptedData
			if err := json.Unmarshal(e.Payload, &d); err != nil {
				t.Fatal(err)
			}
			balance += d.Amount
		}
		want := rowOf{balance: balance, events: int64(len(evs)), applyCount: int64(len(evs)), builtBy: int64(to.gen), position: int64(len(evs))}
		if got := rows[id]; got != want {
			wrong = append(wrong, fmt.Sprintf("%s: %+v, want %+v", id, got, want))
		}
	}
	if len(wrong) > 0 {
		t.Errorf("%d of %d accounts differ from the store after the swap, e.g. %v", len(wrong), len(stored), wrong[:min(3, len(wrong))])
	}
	if v := count(`SELECT version FROM projection_catchup WHERE projection = $1`, name); v != int64(to.version) {
		t.Errorf("the model's recorded version is %d, want %d", v, to.version)
	}
	t.Logf("rebuilt %d stored events at version %d through %d kills; %d live events written, %d applied before the first kill", total, to.version, kills, liveWritten, liveDuringRebuild)
}
