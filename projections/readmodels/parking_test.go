package readmodels_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/parking"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/readmodels"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// refusingAccounts is the accounts read model with a bug: while broken
// is set, it refuses, permanently, a transaction described "poison".
type refusingAccounts struct {
	readmodels.Accounts
	broken *atomic.Bool
}

type refusedError struct{ e eventstore.Envelope }

func (r refusedError) Error() string   { return "refused " + r.e.String() + ": poison" }
func (r refusedError) Permanent() bool { return true }

func (p refusingAccounts) Apply(ctx context.Context, b *pgx.Batch, e eventstore.Envelope) error {
	if p.broken.Load() && e.EventType == bankaccount.TransactionAccepted {
		var d bankaccount.TransactionAcceptedData
		if err := e.DecodePayload(&d); err != nil {
			return err
		}
		if d.Desc == "poison" {
			return refusedError{e}
		}
	}
	return p.Accounts.Apply(ctx, b, e)
}

// appendTransactions appends transactions described descs to account id
// (opening it first when expected is 0) and returns the stored events.
func (w *world) appendTransactions(t *testing.T, id string, expected int64, descs ...string) []eventstore.Envelope {
	t.Helper()
	ref := eventstore.Ref{Type: bankaccount.AggregateType, ID: id}
	var ch eventstore.Change
	if expected == 0 {
		ch.Events = append(ch.Events, eventstore.Event(bankaccount.AccountOpened, bankaccount.AccountOpenedData{ID: id}))
	}
	for _, d := range descs {
		ch.Events = append(ch.Events, eventstore.Event(bankaccount.TransactionAccepted, bankaccount.TransactionAcceptedData{Desc: d, Amount: 10}))
	}
	req, err := eventstore.Prepare(ref, expected, ch, eventstore.Schema{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.store.Append(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res.Events
}

// parkingRig is a world with a Kafka namespace and a parking store.
type parkingRig struct {
	*world
	brokers []string
	topics  bus.Topics
	pub     message.Publisher
	lot     *parking.Store
	broken  atomic.Bool
	sent    int64
}

func newParkingRig(t *testing.T) *parkingRig {
	r := &parkingRig{world: newWorld(t), brokers: testenv.KafkaBrokers(t), topics: bus.Topics{Prefix: testenv.UniqueName(t, "ns") + "."}}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: r.brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	r.pub = pub
	if r.lot, err = parking.New(parking.Config{DB: r.db}); err != nil {
		t.Fatal(err)
	}
	r.broken.Store(true)
	return r
}

func (r *parkingRig) projection() projections.Projection {
	return refusingAccounts{broken: &r.broken}
}

func (r *parkingRig) applier(t *testing.T) *projections.Applier {
	t.Helper()
	a, err := projections.NewApplier(projections.ApplierConfig{DB: r.db, Store: r.store, Projection: r.projection()})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (r *parkingRig) publish(t *testing.T, events ...eventstore.Envelope) {
	t.Helper()
	var msgs []*message.Message
	for _, e := range events {
		m, err := bus.EventMessage(e)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	if err := r.pub.Publish(r.topics.Events(bankaccount.AggregateType), msgs...); err != nil {
		t.Fatal(err)
	}
	r.sent += int64(len(events))
}

// run starts a Runner in consumer group group (from the oldest offset
// when the group is new) and returns its stop func.
func (r *parkingRig) run(t *testing.T, group string) func() {
	t.Helper()
	subs := kafka.Subscribers(kafka.SubscriberConfig{Brokers: r.brokers, ClientID: "parking-test", Logger: watermill.NopLogger{}})
	runner, err := projections.NewRunner(projections.RunnerConfig{Applier: r.applier(t), Topics: r.topics, Publisher: r.pub, Parking: r.lot,
		NewSubscriber: func(string) (message.Subscriber, error) { return subs(group) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("runner: %v", err)
			}
		}
	}
	t.Cleanup(stop)
	return stop
}

// position is the projection's position of account id (0: none).
func (r *parkingRig) position(t *testing.T, id string) int64 {
	t.Helper()
	var seq int64
	err := r.db.QueryRow(context.Background(), `SELECT coalesce(max(seq), 0) FROM projection_positions WHERE projection = 'accounts' AND aggregate_id = $1`, id).Scan(&seq)
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

// parkedSeqs lists the sequences parked for account id, with their
// reasons.
func (r *parkingRig) parked(t *testing.T, id string) ([]int64, []string) {
	t.Helper()
	evs, err := r.lot.List(context.Background(), parking.Filter{Consumer: "accounts", Aggregate: eventstore.Ref{Type: bankaccount.AggregateType, ID: id}})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	var reasons []string
	for _, ev := range evs {
		seqs = append(seqs, ev.Envelope.Sequence)
		reasons = append(reasons, ev.Reason)
	}
	return seqs, reasons
}

// waitFor polls cond until it holds; it fails t, with the state cond
// last reported, when cond does not hold within integration.HangAfter.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	integration.Await(t, what, func() error {
		if ok, state := cond(); !ok {
			return errors.New(state)
		}
		return nil
	})
}

// TestAPoisonedEventParksItsAggregateOnlyAndReapplyAppliesItOnceInOrder
// publishes account A with a transaction the (broken) read model refuses
// permanently at sequence 3 and three later events, among accounts B and
// C: A parks at 3 with 4, 5 and 6 behind it while B and C are applied to
// their end. A's next events, published later, are parked too. A second
// runner in a new consumer group reads everything again from offset 0:
// nothing is parked or applied twice. After the fix, a re-apply of the
// parked events (while a runner runs) applies A's events in order, once,
// and unparks A; A's next live event is applied by the runner; and a
// third runner from offset 0 again parks and applies nothing.
func TestAPoisonedEventParksItsAggregateOnlyAndReapplyAppliesItOnceInOrder(t *testing.T) {
	r := newParkingRig(t)
	ctx := context.Background()
	a := r.appendTransactions(t, "acc-a", 0, "a1", "poison", "a3", "a4", "a5") // seq 1..6, poison at 3
	var b, c []eventstore.Envelope
	for i := range 10 {
		b = append(b, r.appendTransactions(t, "acc-b", int64(len(b)), fmt.Sprint("b", i))...)
		c = append(c, r.appendTransactions(t, "acc-c", int64(len(c)), fmt.Sprint("c", i))...)
	}
	var mixed []eventstore.Envelope
	for i := range 11 {
		if i < len(a) {
			mixed = append(mixed, a[i])
		}
		mixed = append(mixed, b[i], c[i])
	}
	r.publish(t, mixed...)
	stop := r.run(t, testenv.UniqueName(t, "g1"))

	waitFor(t, "B and C applied to their end, A parked at 3..6", func() (bool, string) {
		pa, pb, pc := r.position(t, "acc-a"), r.position(t, "acc-b"), r.position(t, "acc-c")
		seqs, _ := r.parked(t, "acc-a")
		return pb == 11 && pc == 11 && fmt.Sprint(seqs) == "[3 4 5 6]",
			fmt.Sprintf("positions A %d B %d C %d, A parked %v", pa, pb, pc, seqs)
	})
	if pa := r.position(t, "acc-a"); pa != 2 {
		t.Fatalf("A's position %d, want 2 (the events before the poisoned one)", pa)
	}
	_, reasons := r.parked(t, "acc-a")
	if !strings.Contains(reasons[0], "poison") || reasons[1] != parking.BehindReason(3) {
		t.Fatalf("parked reasons %q", reasons)
	}
	for _, id := range []string{"acc-b", "acc-c"} {
		if got := r.row(t, id); got.version != 11 || got.applyCount != 11 {
			t.Fatalf("%s: %+v, want version and apply count 11", id, got)
		}
		if seqs, _ := r.parked(t, id); len(seqs) != 0 {
			t.Fatalf("%s parked %v", id, seqs)
		}
	}

	// A's next events arrive while it is parked: parked too, while a new
	// account D flows.
	a = append(a, r.appendTransactions(t, "acc-a", 6, "a6", "a7")...) // 7, 8
	d := r.appendTransactions(t, "acc-d", 0, "d1", "d2")
	r.publish(t, append(a[6:8:8], d...)...)
	waitFor(t, "D applied and A parked at 3..8", func() (bool, string) {
		seqs, _ := r.parked(t, "acc-a")
		return r.position(t, "acc-d") == 3 && fmt.Sprint(seqs) == "[3 4 5 6 7 8]", fmt.Sprintf("D at %d, A parked %v", r.position(t, "acc-d"), seqs)
	})
	var parkedAt time.Time
	if err := r.db.QueryRow(ctx, `SELECT parked_at FROM parked_events WHERE aggregate_id = 'acc-a' AND seq = 3`).Scan(&parkedAt); err != nil {
		t.Fatal(err)
	}
	stop()

	// Everything again, from offset 0, in a new group: the parked events
	// are not parked twice, the applied ones not applied twice.
	g2 := testenv.UniqueName(t, "g2")
	stop = r.run(t, g2)
	testenv.WaitCommitted(t, r.brokers, g2, r.topics.Events(bankaccount.AggregateType), r.sent)
	var rows int
	var again time.Time
	if err := r.db.QueryRow(ctx, `SELECT count(*), min(parked_at) FILTER (WHERE seq = 3) FROM parked_events`).Scan(&rows, &again); err != nil {
		t.Fatal(err)
	}
	if rows != 6 || !again.Equal(parkedAt) {
		t.Fatalf("after a redelivery: %d parked rows (want 6), seq 3 parked at %v (want %v)", rows, again, parkedAt)
	}
	if got := r.row(t, "acc-a"); got.version != 2 || got.applyCount != 2 {
		t.Fatalf("A after a redelivery: %+v, want version and apply count 2", got)
	}
	for _, id := range []string{"acc-b", "acc-c"} {
		if got := r.row(t, id); got.applyCount != 11 {
			t.Fatalf("%s after a redelivery: %+v, want apply count 11", id, got)
		}
	}

	// A re-apply before the fix fails again: A stays parked, nothing applied.
	res, err := r.lot.Reapply(ctx, parking.ReapplyConfig{Consumer: "accounts", Apply: r.applyFunc(t)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Aggregates) != 1 || res.Aggregates[0].Unparked || res.Aggregates[0].Reapplied != 0 || !eventstore.IsPermanent(res.Aggregates[0].Err) {
		t.Fatalf("re-apply before the fix: %+v", res)
	}
	if seqs, _ := r.parked(t, "acc-a"); fmt.Sprint(seqs) != "[3 4 5 6 7 8]" {
		t.Fatalf("after a failed re-apply A parked %v", seqs)
	}

	// The fix; the re-apply runs beside the live runner.
	r.broken.Store(false)
	res, err = r.lot.Reapply(ctx, parking.ReapplyConfig{Consumer: "accounts", Aggregate: eventstore.Ref{Type: bankaccount.AggregateType, ID: "acc-a"}, Apply: r.applyFunc(t)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Aggregates) != 1 || !res.Aggregates[0].Unparked || res.Aggregates[0].Reapplied != 6 || res.Aggregates[0].Applied != 6 || res.StillParked() != 0 {
		t.Fatalf("re-apply after the fix: %+v", res)
	}
	if got := r.row(t, "acc-a"); got.version != 8 || got.applyCount != 8 || got.position != 8 || got.transactions != 7 {
		t.Fatalf("A after the re-apply: %+v, want version, apply count and position 8, 7 transactions", got)
	}
	assertTransactionsInOrder(t, r, "acc-a", 8)
	if seqs, _ := r.parked(t, "acc-a"); len(seqs) != 0 {
		t.Fatalf("A still parked %v", seqs)
	}

	// A is live again.
	a = append(a, r.appendTransactions(t, "acc-a", 8, "a8")...)
	r.publish(t, a[8])
	waitFor(t, "A's live event 9 applied", func() (bool, string) {
		return r.position(t, "acc-a") == 9, fmt.Sprint("A at ", r.position(t, "acc-a"))
	})
	stop()

	// And everything once more from offset 0: nothing parked or applied.
	g3 := testenv.UniqueName(t, "g3")
	r.run(t, g3)
	testenv.WaitCommitted(t, r.brokers, g3, r.topics.Events(bankaccount.AggregateType), r.sent)
	if err := r.db.QueryRow(ctx, `SELECT count(*) FROM parked_events`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("parked rows after the last redelivery: %d, %v", rows, err)
	}
	for id, n := range map[string]int64{"acc-a": 9, "acc-b": 11, "acc-c": 11, "acc-d": 3} {
		if got := r.row(t, id); got.version != n || got.applyCount != n || got.position != n {
			t.Fatalf("%s at the end: %+v, want version, apply count and position %d", id, got, n)
		}
	}
}

func (r *parkingRig) applyFunc(t *testing.T) parking.ApplyFunc {
	a := r.applier(t)
	return func(ctx context.Context, events []eventstore.Envelope) (int, error) {
		out, err := a.Apply(ctx, events)
		return out.Applied, err
	}
}

// assertTransactionsInOrder checks that account id's transaction rows
// are sequences 2..n and their running balances add up in that order.
func assertTransactionsInOrder(t *testing.T, r *parkingRig, id string, n int64) {
	t.Helper()
	rows, err := r.db.Query(context.Background(), `SELECT seq, amount, balance FROM account_transactions WHERE account_id = $1 ORDER BY seq`, id)
	if err != nil {
		t.Fatal(err)
	}
	type tx struct{ seq, amount, balance int64 }
	txs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (tx, error) {
		var x tx
		err := row.Scan(&x.seq, &x.amount, &x.balance)
		return x, err
	})
	if err != nil {
		t.Fatal(err)
	}
	var balance int64
	for i, x := range txs {
		balance += x.amount
		if x.seq != int64(i)+2 || x.balance != balance {
			t.Fatalf("%s transactions %+v: not applied in order", id, txs)
		}
	}
	if int64(len(txs)) != n-1 {
		t.Fatalf("%s has %d transactions, want %d", id, len(txs), n-1)
	}
}
