package readmodels_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestRunnerBatchesAndPoisonsOnlyTheBadMessage publishes 24 accounts'
// events at once, with one event of a type the projection does not know
// among them. The runner applies them in fewer transactions than
// messages; the batch holding the bad event falls back to one by one, so
// every good event is applied once and only the bad message lands on the
// poison topic.
func TestRunnerBatchesAndPoisonsOnlyTheBadMessage(t *testing.T) {
	w := newWorld(t)
	var all []eventstore.Envelope
	for i := range 24 {
		evs, _ := w.openAccount(t, fmt.Sprintf("acc-%02d", i), 4)
		all = append(all, evs...)
	}
	bad := all[7]
	bad.EventID, bad.AggregateID, bad.Sequence, bad.EventType = "01BADBADBADBADBADBADBADBAD", "acc-bad", 1, "NOT_A_BANK_EVENT"

	brokers := testenv.KafkaBrokers(t)
	topics := bus.Topics{Prefix: testenv.UniqueName(t, "ns") + "."}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	var msgs []*message.Message
	for _, e := range append(all[:20:20], append([]eventstore.Envelope{bad}, all[20:]...)...) {
		m, err := bus.EventMessage(e)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	if err := pub.Publish(topics.Events(bankaccount.AggregateType), msgs...); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	runner, err := projections.NewRunner(projections.RunnerConfig{Applier: w.applier(t), Brokers: brokers, Topics: topics, Publisher: pub, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx) }()
	defer func() { cancel(); <-done }()

	poisoned := testenv.Consume(t, brokers, "poison-reader", runner.PoisonTopic(), 1)
	if got := poisoned[0].UUID; got != bad.EventID {
		t.Errorf("poisoned message %s, want the bad event %s", got, bad.EventID)
	}
	positions := func() int64 {
		var n int64
		if err := w.db.QueryRow(ctx, `SELECT coalesce(sum(seq), 0) FROM projection_positions`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	integration.AwaitProgress(t, "positions", positions, int64(len(all)))
	if n := positions(); n != int64(len(all)) {
		t.Fatalf("positions add up to %d, want %d", n, len(all))
	}
	var twice, rows int
	if err := w.db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE apply_count <> version), count(*) FROM accounts`).Scan(&twice, &rows); err != nil {
		t.Fatal(err)
	}
	if twice != 0 || rows != 24 {
		t.Errorf("%d of %d rows applied other than once (want 0 of 24)", twice, rows)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var txs uint64
	var batched float64
	for _, f := range families {
		if f.GetName() == "eventpipe_projection_batch_messages" {
			txs, batched = f.Metric[0].Histogram.GetSampleCount(), f.Metric[0].Histogram.GetSampleSum()
		}
	}
	t.Logf("%d messages in %d transactions", int(batched), txs)
	if txs == 0 || txs >= uint64(len(msgs)) {
		t.Errorf("%d messages took %d transactions; want batches of more than one", len(msgs), txs)
	}
}

// burstSubscriber hands out every message at once, in a random order and
// without waiting for acks, and hands a nacked message out again: the
// worst a subscriber may do to the Runner (the key-ordered one never
// delivers an aggregate's next event before the previous one was acked).
// Its messages are on the topic of their aggregate type; the read
// model's other topics (the subjects' facts) get none.
type burstSubscriber struct {
	msgs      []*message.Message
	closed    chan struct{}
	closeOnce sync.Once
}

func (s *burstSubscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	out := make(chan *message.Message)
	if !strings.HasSuffix(topic, "."+bankaccount.AggregateType) {
		go func() {
			select {
			case <-ctx.Done():
			case <-s.closed:
			}
			close(out)
		}()
		return out, nil
	}
	stop := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-s.closed:
		}
		close(stop)
	}()
	msgs := append([]*message.Message{}, s.msgs...)
	rand.Shuffle(len(msgs), func(i, j int) { msgs[i], msgs[j] = msgs[j], msgs[i] })
	var (
		wg      sync.WaitGroup
		deliver func(m *message.Message)
	)
	deliver = func(m *message.Message) {
		defer wg.Done()
		select {
		case out <- m:
		case <-stop:
			return
		}
		select {
		case <-m.Acked():
		case <-m.Nacked():
			wg.Add(1)
			go deliver(m.Copy())
		case <-stop:
		}
	}
	for _, m := range msgs {
		wg.Add(1)
		go deliver(m.Copy())
	}
	go func() { <-stop; wg.Wait(); close(out) }()
	return out, nil
}

// Close is called once per subscription: the Runner closes the
// subscriber of each of its topics.
func (s *burstSubscriber) Close() error { s.closeOnce.Do(func() { close(s.closed) }); return nil }

// concurrencySink is the Applier, counting how many of its transactions
// run at once.
type concurrencySink struct {
	*projections.Applier
	mu        sync.Mutex
	now, most int
}

func (c *concurrencySink) Apply(ctx context.Context, events []eventstore.Envelope) (projections.Outcome, error) {
	c.mu.Lock()
	c.now++
	c.most = max(c.most, c.now)
	c.mu.Unlock()
	defer func() { c.mu.Lock(); c.now--; c.mu.Unlock() }()
	return c.Applier.Apply(ctx, events)
}

// TestRunnerTransactionsAtOnceApplyEachEventOnceInOrder runs the Runner
// with 4 transactions at once and small batches behind a subscriber that
// hands out 6 accounts' 41 events each all at once, shuffled: an
// account's events land in concurrent transactions, out of order. Every
// event is applied exactly once (the read model equals the events), the
// transactions did overlap, and the gaps the shuffle opened were
// repaired from the store or waited for.
func TestRunnerTransactionsAtOnceApplyEachEventOnceInOrder(t *testing.T) {
	w := newWorld(t)
	type account struct {
		events  []eventstore.Envelope
		balance int64
	}
	accounts := map[string]account{}
	sub := &burstSubscriber{closed: make(chan struct{})}
	for i := range 6 {
		id := fmt.Sprintf("acc-%d", i)
		evs, bal := w.openAccount(t, id, 40)
		accounts[id] = account{evs, bal}
		for _, e := range evs {
			m, err := bus.EventMessage(e)
			if err != nil {
				t.Fatal(err)
			}
			sub.msgs = append(sub.msgs, m)
		}
	}
	sink := &concurrencySink{Applier: w.applier(t)}
	runner, err := projections.NewRunner(projections.RunnerConfig{Applier: sink, Topics: bus.Topics{Prefix: "burst."},
		NewSubscriber: func(string) (message.Subscriber, error) { return sub, nil },
		Publisher:     gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{}),
		BatchSize:     5, Transactions: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "every account's position at its last event", func() (bool, string) {
		var n int64
		if err := w.db.QueryRow(ctx, `SELECT coalesce(sum(seq), 0) FROM projection_positions`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 6*41, fmt.Sprintf("positions add up to %d of %d", n, 6*41)
	})
	for id, acc := range accounts {
		if got, want := w.row(t, id), want(acc.events, acc.balance); got != want {
			t.Errorf("%s: read model %+v, want %+v", id, got, want)
		}
	}
	var rows int
	if err := w.db.QueryRow(ctx, `SELECT count(*) FROM account_transactions`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 6*40 {
		t.Errorf("%d transaction rows, want %d", rows, 6*40)
	}
	sink.mu.Lock()
	most := sink.most
	sink.mu.Unlock()
	t.Logf("at most %d transactions at once", most)
	if most < 2 {
		t.Errorf("at most %d transaction at once; the test needs them to overlap", most)
	}
}
