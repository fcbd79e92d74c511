package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/domains/transfer"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/operator"
	"github.com/eventpipe/eventpipe/sagas"
	"github.com/eventpipe/eventpipe/sagas/transfersaga"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

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
	// Every transfer's deadline is one only a hang reaches: the test
	// counts transfers completed through kills, not deadlines. With 2
	// minutes, a full run on a loaded machine (load 15 on 2 cores) saw 17
	// open transfers compensated in a test that took 251 s, as a deadline
	// passed on a backlog would do; a wrong outcome now prints the saga's
	// own record of it. A hang still fails the test first, at
	// AwaitProgress after HangAfter without progress.
	rig := rigs.NewTransferRig(t, 4*integration.HangAfter())
	acc := func(i int) string { return fmt.Sprintf("acc-%02d", i) }
	for i := range accounts {
		rig.Dispatch(bankaccount.OpenAccount, bankaccount.AggregateType, acc(i), struct{}{})
		rig.Dispatch(bankaccount.RecordTransaction, bankaccount.AggregateType, acc(i), bankaccount.TransactionAcceptedData{Desc: "opening deposit", Amount: initial})
	}
	for i := accounts - closed; i < accounts; i++ {
		rig.Dispatch(bankaccount.CloseAccount, bankaccount.AggregateType, acc(i), bankaccount.CloseAccountData{Reason: "test"})
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

	rig.StartSaga()
	// The transfers are requested on a goroutine of their own while the
	// saga is killed; its error reaches the test goroutine through
	// sender, checked while waiting (finished) and once all are sent.
	sender := rigs.GoRun(t, "requesting transfers", func(ctx context.Context) error {
		for _, id := range ids {
			p := plans[id]
			if err := rig.PublishTransfer(id, p.from, p.to, p.amount); err != nil {
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
	allSent := func() bool { return sender.Returned(t) }
	// Kill the saga at random moments while transfers are in flight:
	// after the running child finished some of its own, never once all
	// are done.
	var atKill []int64
	for range kills {
		before := rig.Finished()
		rigs.WaitFor(t, "the saga to finish transfers", func() bool { allSent(); return rig.Finished() > before })
		time.Sleep(time.Duration(100+rand.IntN(700)) * time.Millisecond)
		rig.KillSaga()
		atKill = append(atKill, rig.Finished())
		rig.StartSaga()
	}
	rigs.WaitFor(t, "every transfer to be requested", allSent)
	integration.AwaitProgress(t, "transfers finished", rig.Finished, transfers)
	if n := rig.Finished(); n != transfers {
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
		rigs.WaitFor(t, "transfer "+id+" to record its outcome", func() bool {
			st = rig.TransferStatus(id)
			return st.Finished()
		})
		switch {
		case p.open && st != transfer.StatusCompleted, !p.open && st != transfer.StatusCompensated:
			inst, err := sagas.Get(context.Background(), rig.DB, transfersaga.Name, id)
			t.Errorf("transfer %s %s→%s: %s; the saga's outcome %q, state %s, created %v, updated %v (%v)", id, p.from, p.to, st,
				inst.Outcome, inst.State, inst.CreatedAt.Format(time.RFC3339Nano), inst.UpdatedAt.Format(time.RFC3339Nano), err)
		case p.open:
			want[p.from] -= p.amount
			want[p.to] += p.amount
		}
	}
	// Money is conserved, and each account holds exactly what the
	// outcomes say.
	var sum int64
	for i := range accounts {
		a, _ := rig.Account(acc(i))
		sum += a.Balance
		if a.Balance != want[acc(i)] {
			t.Errorf("%s balance %d, want %d", acc(i), a.Balance, want[acc(i)])
		}
	}
	if sum != accounts*initial {
		t.Errorf("sum of balances %d, want %d", sum, accounts*initial)
	}
	if _, err := rig.Svc.Store.State(context.Background(), eventstore.Ref{Type: bankaccount.AggregateType, ID: "acc-unknown"}); !errors.Is(err, eventstore.ErrAggregateNotFound) {
		t.Errorf("acc-unknown after credits to it: %v, want not found", err)
	}
	// None twice: each step's command moved money at most once.
	for i := range accounts {
		for cause, amounts := range rig.Moves(acc(i)) {
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
	rig := rigs.NewTransferRig(t, timeout, drop)
	rig.Dispatch(bankaccount.OpenAccount, bankaccount.AggregateType, "a", struct{}{})
	rig.Dispatch(bankaccount.RecordTransaction, bankaccount.AggregateType, "a", bankaccount.TransactionAcceptedData{Desc: "deposit", Amount: 1000})
	rig.Dispatch(bankaccount.OpenAccount, bankaccount.AggregateType, "b", struct{}{})

	rig.StartSaga()
	requested := time.Now()
	rig.RequestTransfer(id, "a", "b", 300)
	rigs.WaitFor(t, "the debit", func() bool { a, _ := rig.Account("a"); return a.Balance == 700 })
	rigs.WaitFor(t, "the credit to be sent (and dropped)", func() bool { _, ok := dropped.Load(creditID); return ok })
	rig.KillSaga()
	killedAfter := time.Since(requested)
	if killedAfter >= timeout {
		t.Fatalf("the saga was killed %v after the request, past the transfer's deadline %v: nothing left to test", killedAfter, timeout)
	}
	time.Sleep(time.Until(requested.Add(timeout + time.Second)))
	inst, err := sagas.Get(context.Background(), rig.DB, transfersaga.Name, id)
	if err != nil {
		t.Fatal(err)
	}
	if inst.Outcome != "" || rig.TransferStatus(id) != transfer.StatusRequested {
		t.Fatalf("with the saga down past the deadline: outcome %q, transfer %s", inst.Outcome, rig.TransferStatus(id))
	}
	t.Logf("saga killed %v after the request, restarted %v after it (deadline %v)", killedAfter.Round(time.Millisecond), time.Since(requested).Round(time.Millisecond), timeout)

	rig.StartSaga()
	rigs.WaitFor(t, "the transfer to be compensated", func() bool { return rig.TransferStatus(id) == transfer.StatusCompensated })
	a, _ := rig.Account("a")
	b, bVersion := rig.Account("b")
	if a.Balance != 1000 || b.Balance != 0 {
		t.Errorf("balances a %d, b %d; want 1000 and 0", a.Balance, b.Balance)
	}
	if inst, err = sagas.Get(context.Background(), rig.DB, transfersaga.Name, id); err != nil || inst.Outcome != transfersaga.OutcomeCompensated {
		t.Errorf("saga instance %+v, %v", inst, err)
	}

	// Status shows the saga's group and its one compensated instance.
	r := operator.Status(context.Background(), operator.StatusConfig{Process: eventpipe.Process{Catalog: rigs.TransferCatalog(timeout), Endpoints: rig.EP}, DB: rig.DB})
	if len(r.Sagas) != 1 || r.Sagas[0].Err != nil || r.Sagas[0].Summary.Outcomes[transfersaga.OutcomeCompensated] != 1 || r.Sagas[0].Summary.Running != 0 {
		t.Errorf("status sagas: %+v", r.Sagas)
	}
	if !slices.ContainsFunc(r.Groups, func(g operator.GroupStatus) bool { return g.Saga == transfersaga.Name && len(g.Topics) == 2 }) {
		t.Errorf("status groups lack the saga's: %+v", r.Groups)
	}

	// The dropped credit, delivered now, is answered with the recorded
	// cancellation and moves nothing.
	v, _ := dropped.Load(creditID)
	cmd, err := commands.FromMessage(v.(*message.Message))
	if err != nil {
		t.Fatal(err)
	}
	res, err := rig.Svc.Dispatcher.Dispatch(context.Background(), cmd)
	if err != nil || res.Status != commands.StatusRejected || !res.Duplicate || !strings.Contains(res.Reason, "deadline") {
		t.Errorf("late credit: %+v, %v", res, err)
	}
	if b, v := rig.Account("b"); b.Balance != 0 || v != bVersion {
		t.Errorf("late credit moved b to %d (version %d→%d)", b.Balance, bVersion, v)
	}
}
