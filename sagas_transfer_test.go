package eventpipe_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/domains/transfer"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/internal/endpoints"
	migrate "github.com/eventpipe/eventpipe/migrations/dynamodb"
	pgmigrate "github.com/eventpipe/eventpipe/migrations/postgres"
	"github.com/eventpipe/eventpipe/sagas"
	"github.com/eventpipe/eventpipe/sagas/transfersaga"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// envSagaChild, set to a transfer deadline (a Go duration), makes the
// test binary a child process running the transfer saga as `eventpipe
// consume transfer-saga` does, on the endpoints in the environment.
const envSagaChild = "EVENTPIPE_TEST_SAGA_CHILD_TIMEOUT"

// transferCatalog is the catalogue of the saga tests: bank accounts,
// transfers, and the transfer saga with the given deadline.
func transferCatalog(timeout time.Duration) *eventpipe.Catalog {
	c := eventpipe.NewCatalog()
	for _, d := range []commands.Domain{bankaccount.Domain(), transfer.Domain()} {
		if err := c.AddDomain(d); err != nil {
			panic(err)
		}
	}
	if err := c.AddSaga(transfersaga.New(transfersaga.Config{Timeout: timeout})); err != nil {
		panic(err)
	}
	return c
}

// runSagaChildIfRequested runs the transfer saga in this process when a
// test started it as a child.
func runSagaChildIfRequested() {
	v := os.Getenv(envSagaChild)
	if v == "" {
		return
	}
	timeout, err := time.ParseDuration(v)
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		var cons *eventpipe.Consumers
		cons, err = eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{Catalog: transferCatalog(timeout), Endpoints: endpoints.FromEnv(),
			Names: []string{eventpipe.SagaConsumer(transfersaga.Name)}})
		if err == nil {
			err = cons.Run(ctx)
			_ = cons.Close()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "saga child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// background is a Run function going on a goroutine of its own until the
// test ends (goRun); what it returned reaches the test goroutine through
// done.
type background struct {
	what  string
	done  chan error
	ended bool
}

// goRun runs run on a goroutine of its own until t ends, then cancels
// its context, waits for it and fails t if it returned an error other
// than the context's cancellation. Register what must outlive run (a
// Close) with t.Cleanup before calling goRun.
func goRun(t *testing.T, what string, run func(context.Context) error) *background {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	b := &background{what: what, done: make(chan error, 1)}
	go func() { b.done <- run(ctx) }()
	t.Cleanup(func() {
		stop()
		if b.ended {
			return
		}
		if err := <-b.done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v", what, err)
		}
	})
	return b
}

// check fails t if the goroutine has returned while the test runs: call
// it from the test goroutine.
func (b *background) check(t *testing.T) {
	t.Helper()
	if b.ended {
		return
	}
	select {
	case err := <-b.done:
		b.ended = true
		t.Fatalf("%s stopped while the test ran: %v", b.what, err)
	default:
	}
}

// transferRig is the pipeline of the saga tests: the write side's command
// handlers and the relay in this process, the saga in a child process.
type transferRig struct {
	t       *testing.T
	ep      endpoints.Endpoints
	cat     *eventpipe.Catalog
	timeout time.Duration
	svc     *eventpipe.WriteSide
	db      *pgxpool.Pool
	pub     message.Publisher
	child   *exec.Cmd
	running []*background
	key     []byte // the command key of the write side and the in-process sagas
}

// alive fails the test if a Run of the rig (command handlers, relay, an
// in-process saga) has stopped.
func (r *transferRig) alive() {
	r.t.Helper()
	for _, b := range r.running {
		b.check(r.t)
	}
}

// newTransferRig starts the command handlers of transferCatalog(timeout)
// (with mws around the dispatcher) and the relay; startSaga starts the
// saga.
func newTransferRig(t *testing.T, timeout time.Duration, mws ...message.HandlerMiddleware) *transferRig {
	t.Helper()
	r := newSagaRig(t, transferCatalog(timeout), mws...)
	r.timeout = timeout
	return r
}

// newSagaRig starts the command handlers of cat (with mws around the
// dispatcher) and the relay, on fresh tables, topics and schema.
func newSagaRig(t *testing.T, cat *eventpipe.Catalog, mws ...message.HandlerMiddleware) *transferRig {
	t.Helper()
	return newSagaRigWithKey(t, cat, nil, mws...)
}

// newSagaRigWithKey is newSagaRig whose command handlers and in-process
// sagas hold the command key key.
func newSagaRigWithKey(t *testing.T, cat *eventpipe.Catalog, key []byte, mws ...message.HandlerMiddleware) *transferRig {
	t.Helper()
	ctx := context.Background()
	ep := testEndpoints(t)
	ep.LeasesTable = testenv.UniqueName(t, "leases")
	if err := migrate.CreateLeasesTable(ctx, testenv.DynamoDB(t), ep.LeasesTable); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, testenv.DynamoDB(t), ep.LeasesTable) })
	schema, url := testenv.PostgresSchema(t, "saga")
	if _, err := pgmigrate.Migrate(ctx, pgmigrate.Config{URL: testenv.Endpoints().Postgres, Schema: schema}); err != nil {
		t.Fatal(err)
	}
	ep.Postgres = url
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	svc, err := eventpipe.NewWriteSide(ctx, eventpipe.WriteSideConfig{Endpoints: ep, Catalog: cat, ConsumerGroup: testenv.UniqueName(t, "g"), Middlewares: mws,
		CommandKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	rel, err := eventpipe.NewRelay(ctx, eventpipe.RelayConfig{Catalog: cat, Endpoints: ep, DiscoveryInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rel.Close() })
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: ep.KafkaBrokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return &transferRig{t: t, ep: ep, cat: cat, svc: svc, db: db, pub: pub, key: key, running: []*background{
		goRun(t, "command handlers", svc.RunCommandHandlers),
		goRun(t, "relay", rel.Run),
	}}
}

// runSaga runs the saga called name in this process, as `eventpipe
// consume <name>-saga` does, until t ends.
func (r *transferRig) runSaga(name string) {
	r.t.Helper()
	cons, err := eventpipe.NewConsumers(context.Background(), eventpipe.ConsumersConfig{Catalog: r.cat, Endpoints: r.ep, DB: r.db,
		CommandKey: r.key, Names: []string{eventpipe.SagaConsumer(name)}})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = cons.Close() })
	r.running = append(r.running, goRun(r.t, "saga "+name, cons.Run))
	r.waitSagaStarted(name)
}

// waitSagaStarted waits until the saga called name has started its
// consumer group (committed its start, latest by default): inputs
// published from then on reach it; earlier ones never would.
func (r *transferRig) waitSagaStarted(name string) {
	r.t.Helper()
	cons, ok := r.cat.Consumer(eventpipe.SagaConsumer(name))
	if !ok {
		r.t.Fatalf("no saga %s in the catalogue", name)
	}
	info := cons.Describe(bus.Topics{Prefix: r.ep.TopicPrefix})
	adm := kafkaAdmin(r.t)
	waitFor(r.t, "saga "+name+" to start its group", func() bool { return groupCommitted(r.t, adm, info.Group, info.Topics...) >= 0 })
}

// startSaga starts the saga's child process.
func (r *transferRig) startSaga() {
	r.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envSagaChild+"="+r.timeout.String(),
		endpoints.EnvEventsTable+"="+r.ep.EventsTable, endpoints.EnvTopicPrefix+"="+r.ep.TopicPrefix,
		endpoints.EnvPostgres+"="+r.ep.Postgres, endpoints.EnvLeasesTable+"="+r.ep.LeasesTable, "EVENTPIPE_LOG_LEVEL=warn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.child = cmd
	r.t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	r.waitSagaStarted(transfersaga.Name)
}

// killSaga kills the saga's child process with SIGKILL.
func (r *transferRig) killSaga() {
	r.t.Helper()
	if err := r.child.Process.Signal(syscall.SIGKILL); err != nil {
		r.t.Fatal(err)
	}
	_, _ = r.child.Process.Wait()
}

// dispatch runs a setup command directly and wants it accepted.
func (r *transferRig) dispatch(typ, aggType, id string, payload any) {
	r.t.Helper()
	cmd, err := commands.NewJSON(typ, aggType, id, payload)
	if err != nil {
		r.t.Fatal(err)
	}
	res, err := r.svc.Dispatcher.Dispatch(context.Background(), cmd)
	if err != nil || res.Status != commands.StatusAccepted {
		r.t.Fatalf("%s %s: %+v, %v", typ, id, res, err)
	}
}

// requestTransfer publishes a RequestTransfer onto the bus, as a user
// does.
func (r *transferRig) requestTransfer(id, from, to string, amount int64) {
	r.t.Helper()
	if err := r.publishTransfer(id, from, to, amount); err != nil {
		r.t.Fatal(err)
	}
}

// publishTransfer is requestTransfer returning its error: it does not
// touch r.t, so any goroutine may call it.
func (r *transferRig) publishTransfer(id, from, to string, amount int64) error {
	cmd, err := commands.NewJSON(transfer.RequestTransfer, transfer.AggregateType, id, transfer.RequestedData{From: from, To: to, Amount: amount})
	if err != nil {
		return fmt.Errorf("request transfer %s: %w", id, err)
	}
	msg, err := cmd.ToMessage()
	if err != nil {
		return fmt.Errorf("request transfer %s: %w", id, err)
	}
	if err := r.pub.Publish(cmd.Topic(bus.Topics{Prefix: r.ep.TopicPrefix}), msg); err != nil {
		return fmt.Errorf("request transfer %s: publish: %w", id, err)
	}
	return nil
}

// account returns an account's state.
func (r *transferRig) account(id string) (bankaccount.Account, int64) {
	r.t.Helper()
	r.alive()
	st, err := r.svc.Store.State(context.Background(), eventstore.Ref{Type: bankaccount.AggregateType, ID: id})
	if err != nil {
		r.t.Fatalf("account %s: %v", id, err)
	}
	var a bankaccount.Account
	if err := json.Unmarshal(st.Data, &a); err != nil {
		r.t.Fatal(err)
	}
	return a, st.Seq
}

// transferStatus returns a transfer's status ("" while it does not exist).
func (r *transferRig) transferStatus(id string) transfer.Status {
	r.t.Helper()
	r.alive()
	st, err := r.svc.Store.State(context.Background(), eventstore.Ref{Type: transfer.AggregateType, ID: id})
	if errors.Is(err, eventstore.ErrAggregateNotFound) {
		return ""
	}
	if err != nil {
		r.t.Fatalf("transfer %s: %v", id, err)
	}
	var tr transfer.Transfer
	if err := json.Unmarshal(st.Data, &tr); err != nil {
		r.t.Fatal(err)
	}
	return tr.Status
}

// finished counts the saga's finished instances.
func (r *transferRig) finished() int64 {
	r.t.Helper()
	r.alive()
	s, err := sagas.Summarize(context.Background(), r.db, transfersaga.Name)
	if err != nil {
		r.t.Fatal(err)
	}
	var n int64
	for _, c := range s.Outcomes {
		n += c
	}
	return n
}

// moves returns the transactions of an account by the command that
// caused them (the saga's command ids name transfer and step).
func (r *transferRig) moves(id string) map[string][]int64 {
	r.t.Helper()
	evs, err := r.svc.Store.Load(context.Background(), eventstore.Ref{Type: bankaccount.AggregateType, ID: id}, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	out := map[string][]int64{}
	for _, e := range evs {
		if e.EventType != bankaccount.TransactionAccepted {
			continue
		}
		var d bankaccount.TransactionAcceptedData
		if err := e.DecodePayload(&d); err != nil {
			r.t.Fatal(err)
		}
		out[e.Metadata.CausationID] = append(out[e.Metadata.CausationID], d.Amount)
	}
	return out
}

// TestKilledTransferSagaConservesMoneyAndFinishesEveryTransferOnce runs
// 200 transfers between 20 accounts (4 of them closed, and some transfers
// to an account that does not exist) through the bus, the write side, the
// relay and the transfer saga in a child process that is killed with
// SIGKILL and restarted while transfers are in flight. In the end the
// money is where the outcomes say and nowhere else: the sum of the
// balances is what it was, every transfer is completed (open target) or
// compensated (closed or unknown target), and every account holds each
// debit, credit and refund at most once, as the outcome says.
func TestKilledTransferSagaConservesMoneyAndFinishesEveryTransferOnce(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	const (
		accounts  = 20
		closed    = 4 // the last four
		transfers = 200
		kills     = 6
		initial   = 100_000
	)
	rig := newTransferRig(t, 2*time.Minute)
	acc := func(i int) string { return fmt.Sprintf("acc-%02d", i) }
	for i := range accounts {
		rig.dispatch(bankaccount.OpenAccount, bankaccount.AggregateType, acc(i), struct{}{})
		rig.dispatch(bankaccount.RecordTransaction, bankaccount.AggregateType, acc(i), bankaccount.TransactionAcceptedData{Desc: "opening deposit", Amount: initial})
	}
	for i := accounts - closed; i < accounts; i++ {
		rig.dispatch(bankaccount.CloseAccount, bankaccount.AggregateType, acc(i), bankaccount.CloseAccountData{Reason: "test"})
	}
	type plan struct {
		from, to string
		amount   int64
		open     bool // the target takes the credit
	}
	rng := rand.New(rand.NewPCG(7, 16))
	plans := map[string]plan{}
	var ids []string
	for n := range transfers {
		from := rng.IntN(accounts - closed)
		p := plan{from: acc(from), amount: 1 + rng.Int64N(500)}
		switch to := rng.IntN(accounts + 1); {
		case to == accounts:
			p.to = "acc-unknown"
		case to == from:
			p.to, p.open = acc((from+1)%(accounts-closed)), true
		default:
			p.to, p.open = acc(to), to < accounts-closed
		}
		id := fmt.Sprintf("tr-%03d", n)
		plans[id], ids = p, append(ids, id)
	}

	rig.startSaga()
	// The transfers are requested on a goroutine of their own while the
	// saga is killed; its error reaches the test goroutine through
	// sender, checked while waiting (finished) and once all are sent.
	sender := goRun(t, "requesting transfers", func(ctx context.Context) error {
		for _, id := range ids {
			p := plans[id]
			if err := rig.publishTransfer(id, p.from, p.to, p.amount); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(20+rng.IntN(30)) * time.Millisecond):
			}
		}
		return nil
	})
	allSent := func() bool {
		select {
		case err := <-sender.done:
			sender.ended = true
			if err != nil {
				t.Fatal(err)
			}
		default:
		}
		return sender.ended
	}
	// Kill the saga at random moments while transfers are in flight:
	// after the running child finished some of its own, never once all
	// are done.
	var atKill []int64
	for range kills {
		before := rig.finished()
		waitFor(t, "the saga to finish transfers", func() bool { allSent(); return rig.finished() > before })
		time.Sleep(time.Duration(100+rand.IntN(700)) * time.Millisecond)
		rig.killSaga()
		atKill = append(atKill, rig.finished())
		rig.startSaga()
	}
	waitFor(t, "every transfer to be requested", allSent)
	integration.AwaitProgress(t, "transfers finished", rig.finished, transfers)
	if n := rig.finished(); n != transfers {
		t.Fatalf("%d transfers finished, want %d", n, transfers)
	}
	inFlight := 0
	for _, n := range atKill {
		if n < transfers {
			inFlight++
		}
	}
	t.Logf("finished transfers at the %d kills: %v of %d", kills, atKill, transfers)
	if inFlight < kills-1 {
		t.Errorf("only %d of %d kills landed while transfers were in flight: %v", inFlight, kills, atKill)
	}

	// Every transfer is finished on its aggregate, as its target says.
	want := map[string]int64{}
	for i := range accounts {
		want[acc(i)] = initial
	}
	for _, id := range ids {
		p := plans[id]
		var st transfer.Status
		waitFor(t, "transfer "+id+" to record its outcome", func() bool {
			st = rig.transferStatus(id)
			return st.Finished()
		})
		switch {
		case p.open && st != transfer.StatusCompleted, !p.open && st != transfer.StatusCompensated:
			t.Errorf("transfer %s %s→%s: %s", id, p.from, p.to, st)
		case p.open:
			want[p.from] -= p.amount
			want[p.to] += p.amount
		}
	}
	// Money is conserved, and each account holds exactly what the
	// outcomes say.
	var sum int64
	for i := range accounts {
		a, _ := rig.account(acc(i))
		sum += a.Balance
		if a.Balance != want[acc(i)] {
			t.Errorf("%s balance %d, want %d", acc(i), a.Balance, want[acc(i)])
		}
	}
	if sum != accounts*initial {
		t.Errorf("sum of balances %d, want %d", sum, accounts*initial)
	}
	if _, err := rig.svc.Store.State(context.Background(), eventstore.Ref{Type: bankaccount.AggregateType, ID: "acc-unknown"}); !errors.Is(err, eventstore.ErrAggregateNotFound) {
		t.Errorf("acc-unknown after credits to it: %v, want not found", err)
	}
	// None twice: each step's command moved money at most once.
	for i := range accounts {
		for cause, amounts := range rig.moves(acc(i)) {
			if len(amounts) != 1 {
				t.Errorf("%s: command %s applied %d times: %v", acc(i), cause, len(amounts), amounts)
			}
			if strings.HasPrefix(cause, transfersaga.Name+".") {
				id, step, _ := sagas.ParseCommandID(transfersaga.Name, cause)
				p := plans[id]
				switch {
				case step == transfersaga.StepDebit && acc(i) != p.from, step == transfersaga.StepRefund && (acc(i) != p.from || p.open),
					step == transfersaga.StepCredit && (acc(i) != p.to || !p.open):
					t.Errorf("%s: unexpected %s of %s (%+v)", acc(i), step, id, p)
				}
			}
		}
	}
}

// TestATransferWhoseCreditNeverAnswersIsCompensatedAfterItsDeadlineAcrossARestart
// drops the credit command of one transfer on the write side, so it never
// answers. The saga is killed once the debit is done, stays down past
// the transfer's deadline, and is started again: the stored timeout
// fires in the new process, cancels the credit (a refusal recorded under
// its command id) and refunds the source. The credit, delivered late,
// then changes nothing.
func TestATransferWhoseCreditNeverAnswersIsCompensatedAfterItsDeadlineAcrossARestart(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	// The debit and the credit's send must be done before the deadline
	// for the kill to land before it: about 1.5 s on a quiet machine, so
	// 12 s leaves a machine several times slower room.
	const timeout = 12 * time.Second
	id := "tr-slow"
	creditID := sagas.CommandID(transfersaga.Name, id, transfersaga.StepCredit)
	var dropped sync.Map
	drop := func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			if msg.UUID == creditID {
				dropped.Store(creditID, msg)
				return nil, nil // acked, never handled: no answer
			}
			return h(msg)
		}
	}
	rig := newTransferRig(t, timeout, drop)
	rig.dispatch(bankaccount.OpenAccount, bankaccount.AggregateType, "a", struct{}{})
	rig.dispatch(bankaccount.RecordTransaction, bankaccount.AggregateType, "a", bankaccount.TransactionAcceptedData{Desc: "deposit", Amount: 1000})
	rig.dispatch(bankaccount.OpenAccount, bankaccount.AggregateType, "b", struct{}{})

	rig.startSaga()
	requested := time.Now()
	rig.requestTransfer(id, "a", "b", 300)
	waitFor(t, "the debit", func() bool { a, _ := rig.account("a"); return a.Balance == 700 })
	waitFor(t, "the credit to be sent (and dropped)", func() bool { _, ok := dropped.Load(creditID); return ok })
	rig.killSaga()
	killedAfter := time.Since(requested)
	if killedAfter >= timeout {
		t.Fatalf("the saga was killed %v after the request, past the transfer's deadline %v: nothing left to test", killedAfter, timeout)
	}
	time.Sleep(time.Until(requested.Add(timeout + time.Second)))
	inst, err := sagas.Get(context.Background(), rig.db, transfersaga.Name, id)
	if err != nil {
		t.Fatal(err)
	}
	if inst.Outcome != "" || rig.transferStatus(id) != transfer.StatusRequested {
		t.Fatalf("with the saga down past the deadline: outcome %q, transfer %s", inst.Outcome, rig.transferStatus(id))
	}
	t.Logf("saga killed %v after the request, restarted %v after it (deadline %v)", killedAfter.Round(time.Millisecond), time.Since(requested).Round(time.Millisecond), timeout)

	rig.startSaga()
	waitFor(t, "the transfer to be compensated", func() bool { return rig.transferStatus(id) == transfer.StatusCompensated })
	a, _ := rig.account("a")
	b, bVersion := rig.account("b")
	if a.Balance != 1000 || b.Balance != 0 {
		t.Errorf("balances a %d, b %d; want 1000 and 0", a.Balance, b.Balance)
	}
	if inst, err = sagas.Get(context.Background(), rig.db, transfersaga.Name, id); err != nil || inst.Outcome != transfersaga.OutcomeCompensated {
		t.Errorf("saga instance %+v, %v", inst, err)
	}

	// Status shows the saga's group and its one compensated instance.
	r := eventpipe.Status(context.Background(), eventpipe.StatusConfig{Catalog: transferCatalog(timeout), Endpoints: rig.ep, DB: rig.db})
	if len(r.Sagas) != 1 || r.Sagas[0].Err != nil || r.Sagas[0].Summary.Outcomes[transfersaga.OutcomeCompensated] != 1 || r.Sagas[0].Summary.Running != 0 {
		t.Errorf("status sagas: %+v", r.Sagas)
	}
	if !slices.ContainsFunc(r.Groups, func(g eventpipe.GroupStatus) bool { return g.Saga == transfersaga.Name && len(g.Topics) == 2 }) {
		t.Errorf("status groups lack the saga's: %+v", r.Groups)
	}

	// The dropped credit, delivered now, is answered with the recorded
	// cancellation and moves nothing.
	v, _ := dropped.Load(creditID)
	cmd, err := commands.FromMessage(v.(*message.Message))
	if err != nil {
		t.Fatal(err)
	}
	res, err := rig.svc.Dispatcher.Dispatch(context.Background(), cmd)
	if err != nil || res.Status != commands.StatusRejected || !res.Duplicate || !strings.Contains(res.Reason, "deadline") {
		t.Errorf("late credit: %+v, %v", res, err)
	}
	if b, v := rig.account("b"); b.Balance != 0 || v != bVersion {
		t.Errorf("late credit moved b to %d (version %d→%d)", b.Balance, bVersion, v)
	}
}
