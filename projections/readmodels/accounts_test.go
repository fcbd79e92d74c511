package readmodels_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
	store "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	migrate "github.com/eventpipe/eventpipe/migrations/dynamodb"
	pgmigrate "github.com/eventpipe/eventpipe/migrations/postgres"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/readmodels"
)

// world is a fresh events table and a fresh, migrated Postgres schema.
type world struct {
	store  *store.Store
	db     *pgxpool.Pool
	table  string
	ddb    *dynamodb.Client
	schema string
}

func newWorld(t testing.TB) *world {
	t.Helper()
	ctx := context.Background()
	ddb := testenv.DynamoDB(t)
	table := testenv.UniqueName(t, "events")
	if err := migrate.CreateEventsTable(ctx, ddb, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, ddb, table) })
	s, err := store.New(store.Config{Client: ddb, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	admin := testenv.Postgres(t)
	schema := strings.ToLower(strings.NewReplacer("-", "_").Replace(testenv.UniqueName(t, "rm")))
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	})
	url := testenv.Endpoints().Postgres
	if _, err := pgmigrate.Migrate(ctx, pgmigrate.Config{URL: url, Schema: schema}); err != nil {
		t.Fatal(err)
	}
	db, err := schemaPool(ctx, schema)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return &world{store: s, db: db, table: table, ddb: ddb, schema: schema}
}

// openAccount appends AccountOpened and n transactions; it returns the
// stored events and the balance they add up to.
func (w *world) openAccount(t *testing.T, id string, n int) ([]eventstore.Envelope, int64) {
	t.Helper()
	ref := eventstore.Ref{Type: bankaccount.AggregateType, ID: id}
	ch := eventstore.Change{Events: []eventstore.NewEvent{eventstore.Event(bankaccount.AccountOpened, bankaccount.AccountOpenedData{ID: id})}}
	var balance int64
	for i := range n {
		amount := int64(rand.IntN(200) - 80)
		balance += amount
		ch.Events = append(ch.Events, eventstore.Event(bankaccount.TransactionAccepted, bankaccount.TransactionAcceptedData{Desc: fmt.Sprint(i), Amount: amount}))
	}
	req, err := eventstore.Prepare(ref, 0, ch, eventstore.Schema{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.store.Append(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res.Events, balance
}

func (w *world) applier(t testing.TB) *projections.Applier {
	t.Helper()
	a, err := projections.NewApplier(projections.ApplierConfig{DB: w.db, Store: w.store, Projection: readmodels.Accounts{}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// assertEqualsScratchReplay applies the stored events of the accounts
// ids to a fresh schema and fails t unless w's read model (called label)
// equals it row by row, with every event applied once.
func (w *world) assertEqualsScratchReplay(t *testing.T, ids []string, label string) {
	t.Helper()
	ctx := context.Background()
	var all []eventstore.Envelope
	for _, id := range ids {
		evs, err := w.store.Load(ctx, eventstore.Ref{Type: bankaccount.AggregateType, ID: id}, 0)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, evs...)
	}
	scratch := newWorld(t)
	scratch.store = w.store
	if _, err := scratch.applier(t).Apply(ctx, all); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`SELECT account_id, balance, version, apply_count, closed, closed_at FROM accounts ORDER BY 1`,
		`SELECT account_id, seq, description, amount, balance FROM account_transactions ORDER BY 1, 2`,
		`SELECT aggregate_id, seq FROM projection_positions ORDER BY 1`,
		`SELECT count(*) FROM accounts WHERE apply_count <> version`,
	} {
		a, b := dump(t, w, q), dump(t, scratch, q)
		if a != b || a == "" {
			t.Fatalf("%s\n%s:\n%.2000s\nfrom scratch:\n%.2000s", q, label, a, b)
		}
	}
}

// schemaPool connects to the stack's Postgres with search_path = schema.
func schemaPool(ctx context.Context, schema string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(testenv.Endpoints().Postgres)
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	return pgxpool.NewWithConfig(ctx, cfg)
}

// row is what the read model holds for an account.
type row struct {
	balance, version, applyCount, transactions, position int64
}

func (w *world) row(t *testing.T, id string) row {
	t.Helper()
	var r row
	err := w.db.QueryRow(context.Background(), `SELECT a.balance, a.version, a.apply_count,
		(SELECT count(*) FROM account_transactions x WHERE x.account_id = a.account_id),
		(SELECT seq FROM projection_positions p WHERE p.projection = 'accounts' AND p.aggregate_id = a.account_id)
		FROM accounts a WHERE a.account_id = $1`, id).Scan(&r.balance, &r.version, &r.applyCount, &r.transactions, &r.position)
	if err != nil {
		t.Fatalf("account %s: %v", id, err)
	}
	return r
}

func want(events []eventstore.Envelope, balance int64) row {
	n := int64(len(events))
	return row{balance: balance, version: n, applyCount: n, transactions: n - 1, position: n}
}

// TestDuplicatesAndShuffledBatchesApplyOnce delivers an account's events
// three times over, shuffled, in random batches: the row equals the
// replay, every event was applied exactly once (apply_count), and the
// position is the last sequence.
func TestDuplicatesAndShuffledBatchesApplyOnce(t *testing.T) {
	w := newWorld(t)
	events, balance := w.openAccount(t, "acc-1", 40)
	deliveries := append(append(append([]eventstore.Envelope{}, events...), events...), events...)
	rand.Shuffle(len(deliveries), func(i, j int) { deliveries[i], deliveries[j] = deliveries[j], deliveries[i] })
	a := w.applier(t)
	for len(deliveries) > 0 {
		n := min(len(deliveries), 1+rand.IntN(10))
		if _, err := a.Apply(context.Background(), deliveries[:n]); err != nil {
			t.Fatal(err)
		}
		deliveries = deliveries[n:]
	}
	if got, w := w.row(t, "acc-1"), want(events, balance); got != w {
		t.Fatalf("read model %+v, want %+v", got, w)
	}
}

// TestDroppedEventsAreRepairedFromTheStore delivers events 1, 2 and then
// 6: events 3–5 are read from the store and applied first, in order.
func TestDroppedEventsAreRepairedFromTheStore(t *testing.T) {
	w := newWorld(t)
	events, balance := w.openAccount(t, "acc-gap", 7)
	a := w.applier(t)
	ctx := context.Background()
	if _, err := a.Apply(ctx, events[:2]); err != nil {
		t.Fatal(err)
	}
	out, err := a.Apply(ctx, events[5:])
	if err != nil {
		t.Fatal(err)
	}
	if out.Repaired != 3 || out.Applied != 3 {
		t.Fatalf("outcome %+v, want 3 repaired and 3 applied", out)
	}
	if got, w := w.row(t, "acc-gap"), want(events, balance); got != w {
		t.Fatalf("read model %+v, want %+v", got, w)
	}
	var seqs []int64
	rows, _ := w.db.Query(ctx, `SELECT seq FROM account_transactions WHERE account_id = 'acc-gap' ORDER BY seq`)
	seqs, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(seqs) != 7 || seqs[0] != 2 || seqs[6] != 8 {
		t.Fatalf("transaction rows %v, %v", seqs, err)
	}
}

// TestConcurrentAppliersApplyEachEventOnce races 6 appliers delivering
// the same events of 5 accounts in different orders at the same time:
// every event is applied exactly once.
func TestConcurrentAppliersApplyEachEventOnce(t *testing.T) {
	w := newWorld(t)
	type account struct {
		events  []eventstore.Envelope
		balance int64
	}
	accounts := map[string]account{}
	var all []eventstore.Envelope
	for i := range 5 {
		id := fmt.Sprintf("acc-%d", i)
		evs, bal := w.openAccount(t, id, 30)
		accounts[id] = account{evs, bal}
		all = append(all, evs...)
	}
	a := w.applier(t)
	var wg sync.WaitGroup
	for range 6 {
		mine := append([]eventstore.Envelope{}, all...)
		rand.Shuffle(len(mine), func(i, j int) { mine[i], mine[j] = mine[j], mine[i] })
		wg.Go(func() {
			for len(mine) > 0 {
				n := min(len(mine), 1+rand.IntN(20))
				if _, err := a.Apply(context.Background(), mine[:n]); err != nil {
					t.Error(err)
					return
				}
				mine = mine[n:]
			}
		})
	}
	wg.Wait()
	for id, acc := range accounts {
		if got, w := w.row(t, id), want(acc.events, acc.balance); got != w {
			t.Errorf("%s: read model %+v, want %+v", id, got, w)
		}
	}
}

// TestClosedAccountKeepsItsRowAndItsRefunds closes an account and then
// refunds it, through the ledger's rules: delivered twice over, the row
// is closed at the closing event's time, keeps its balance plus the
// refund, and each event is applied once; an open account stays open.
func TestClosedAccountKeepsItsRowAndItsRefunds(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	ledger, err := bankaccount.NewFacet(w.store, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := ledger.Append(ctx, "acc-closed", eventstore.Change{Events: []eventstore.NewEvent{
		bankaccount.Opened("acc-closed"), bankaccount.Transacted("in", 500), bankaccount.Closed("customer left"), bankaccount.Refunded("refund of t1", 70),
	}})
	if err != nil {
		t.Fatal(err)
	}
	open, balance := w.openAccount(t, "acc-open", 3)
	events := append(append([]eventstore.Envelope{}, res.Events...), open...)
	a := w.applier(t)
	for _, batch := range [][]eventstore.Envelope{events[:3], events, events[2:]} {
		if _, err := a.Apply(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	// Four events, two of them transactions.
	if got, w := w.row(t, "acc-closed"), (row{balance: 570, version: 4, applyCount: 4, transactions: 2, position: 4}); got != w {
		t.Fatalf("closed account %+v, want %+v", got, w)
	}
	if got, w := w.row(t, "acc-open"), want(open, balance); got != w {
		t.Fatalf("open account %+v, want %+v", got, w)
	}
	for id, wantClosed := range map[string]*time.Time{"acc-closed": &res.Events[2].OccurredAt, "acc-open": nil} {
		var closed bool
		var closedAt *time.Time
		if err := w.db.QueryRow(ctx, `SELECT closed, closed_at FROM accounts WHERE account_id = $1`, id).Scan(&closed, &closedAt); err != nil {
			t.Fatal(err)
		}
		switch {
		case wantClosed == nil && (closed || closedAt != nil):
			t.Errorf("%s: closed %v at %v, want open", id, closed, closedAt)
		case wantClosed != nil && (!closed || closedAt == nil || !closedAt.Equal(wantClosed.Truncate(time.Microsecond))):
			t.Errorf("%s: closed %v at %v, want closed at %v", id, closed, closedAt, *wantClosed)
		}
	}
	w.assertEqualsScratchReplay(t, []string{"acc-closed", "acc-open"}, "closed and open accounts")
}

// The read models that hold personal data export it (operator.ExportSubject).
var (
	_ projections.Exporter = readmodels.Todos{}
	_ projections.Exporter = readmodels.Accounts{}
)
