package operator_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/domains/transfer"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/operator"
	"github.com/eventpipe/eventpipe/sagas"
	"github.com/eventpipe/eventpipe/sagas/transfersaga"
)

// failingPublisher fails every publish of a message whose UUID is in
// fail: the saga's outbox row for it stays unsent.
type failingPublisher struct {
	message.Publisher
	fail sync.Map
}

func (p *failingPublisher) Publish(topic string, msgs ...*message.Message) error {
	for _, m := range msgs {
		if _, ok := p.fail.Load(m.UUID); ok {
			return fmt.Errorf("test: publish of %s refused", m.UUID)
		}
	}
	return p.Publisher.Publish(topic, msgs...)
}

// TestSagaOpsShowRetryAndAbortInstancesBesideALiveSaga runs the transfer
// saga beside the write side with three transfers that get stuck: the
// debit of tr-stuck is dropped once by the command handlers (sent, never
// answered), the debit of tr-outbox cannot be published by the saga (its
// outbox row stays), and the credit of tr-abort is always dropped. List
// and show find the first two stuck with what they wait for; a retry of
// each re-sends the debit under its own command id and both transfers
// complete. tr-abort is aborted: its credit is cancelled, the source is
// refunded (a refund event on the account) and the transfer is
// compensated, the instance ending aborted. Each action is in
// operator_actions, and a second abort is refused.
func TestSagaOpsShowRetryAndAbortInstancesBesideALiveSaga(t *testing.T) {
	const stuckAfter = time.Second
	debitStuck := sagas.CommandID(transfersaga.Name, "tr-stuck", transfersaga.StepDebit)
	creditAbort := sagas.CommandID(transfersaga.Name, "tr-abort", transfersaga.StepCredit)
	debitOutbox := sagas.CommandID(transfersaga.Name, "tr-outbox", transfersaga.StepDebit)
	var droppedOnce atomic.Bool
	drop := func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			switch {
			case msg.UUID == creditAbort:
				return nil, nil // acked, never handled: no answer
			case msg.UUID == debitStuck && droppedOnce.CompareAndSwap(false, true):
				return nil, nil
			}
			return h(msg)
		}
	}
	cat := rigs.TransferCatalog(2 * time.Minute)
	rig := rigs.NewSagaRig(t, cat, drop)
	rig.Dispatch(bankaccount.OpenAccount, bankaccount.AggregateType, "a", struct{}{})
	rig.Dispatch(bankaccount.RecordTransaction, bankaccount.AggregateType, "a", bankaccount.TransactionAcceptedData{Desc: "deposit", Amount: 1000})
	rig.Dispatch(bankaccount.OpenAccount, bankaccount.AggregateType, "b", struct{}{})

	pub := &failingPublisher{Publisher: rig.Pub}
	pub.fail.Store(debitOutbox, true)
	cons, err := eventpipe.NewConsumers(context.Background(), eventpipe.ConsumersConfig{Process: eventpipe.Process{Catalog: cat, Endpoints: rig.EP}, DB: rig.DB, Publisher: pub,
		Names: []string{eventpipe.SagaConsumer(transfersaga.Name)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cons.Close() })
	rig.Running = append(rig.Running, rigs.GoRun(t, "saga", cons.Run))
	rig.WaitSagaStarted(transfersaga.Name)

	rig.RequestTransfer("tr-stuck", "a", "b", 100)
	rig.RequestTransfer("tr-outbox", "a", "b", 200)
	rig.RequestTransfer("tr-abort", "a", "b", 300)

	ctx := context.Background()
	list := func(status string) map[string]sagas.Overview {
		t.Helper()
		rig.Alive()
		l, err := operator.SagaInstances(ctx, operator.SagaInstancesConfig{Process: eventpipe.Process{Catalog: cat, Endpoints: rig.EP}, DB: rig.DB, Saga: transfersaga.Name,
			Status: status, StuckAfter: stuckAfter})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]sagas.Overview{}
		for _, o := range l {
			out[o.Instance] = o
		}
		return out
	}
	var stuck map[string]sagas.Overview
	rigs.WaitFor(t, "three stuck instances, tr-abort at its credit", func() bool {
		stuck = list(sagas.StatusStuck)
		p := stuck["tr-abort"].Pending
		return len(stuck) == 3 && len(p) == 1 && p[0].Step == transfersaga.StepCredit
	})
	if p := stuck["tr-stuck"].Pending; len(p) != 1 || p[0].CommandID != debitStuck || p[0].Queued || !p[0].Stuck || !p[0].Resendable {
		t.Errorf("tr-stuck pending %+v", p)
	}
	if p := stuck["tr-outbox"].Pending; len(p) != 1 || p[0].CommandID != debitOutbox || !p[0].Queued || !p[0].Stuck {
		t.Errorf("tr-outbox pending %+v", p)
	}
	if p := stuck["tr-abort"].Pending; len(p) != 1 || p[0].Step != transfersaga.StepCredit || p[0].Queued {
		t.Errorf("tr-abort pending %+v", p)
	}
	for id, o := range stuck {
		if o.Status != sagas.StatusStuck || len(o.Timeouts) != 1 || o.Timeouts[0].Name != "deadline" {
			t.Errorf("%s: status %s, timeouts %+v", id, o.Status, o.Timeouts)
		}
	}

	show := func(id string) sagas.Detail {
		t.Helper()
		d, err := operator.SagaInstance(ctx, operator.SagaInstanceConfig{Process: eventpipe.Process{Catalog: cat, Endpoints: rig.EP}, DB: rig.DB, Records: rig.Svc.Store,
			Saga: transfersaga.Name, Instance: id, StuckAfter: stuckAfter})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	d := show("tr-stuck")
	if len(d.Commands) != 1 || d.Commands[0].Answer != nil || d.Commands[0].Answered || len(d.Outbox) != 0 || len(d.Inputs) != 1 {
		t.Errorf("show tr-stuck: commands %+v, outbox %+v, inputs %+v", d.Commands, d.Outbox, d.Inputs)
	}
	if d := show("tr-outbox"); len(d.Outbox) != 1 || d.Outbox[0].CommandID != debitOutbox {
		t.Errorf("show tr-outbox: outbox %+v", d.Outbox)
	}
	d = show("tr-abort")
	if len(d.Commands) != 2 || d.Commands[0].Answer == nil || d.Commands[0].Answer.Status != "accepted" || !d.Commands[0].Answered ||
		d.Commands[1].CommandID != creditAbort || d.Commands[1].Answer != nil {
		t.Errorf("show tr-abort: commands %+v", d.Commands)
	}
	if _, err := operator.SagaInstance(ctx, operator.SagaInstanceConfig{Process: eventpipe.Process{Catalog: cat, Endpoints: rig.EP}, DB: rig.DB, Records: rig.Svc.Store,
		Saga: transfersaga.Name, Instance: "tr-none"}); !errors.Is(err, sagas.ErrNoInstance) {
		t.Errorf("show of no instance: %v", err)
	}

	ops := operator.SagaOpsConfig{Process: eventpipe.Process{Catalog: cat, Endpoints: rig.EP}, DB: rig.DB, Outcomes: rig.Svc.Store, StuckAfter: stuckAfter, Actor: "test-operator"}
	for id, want := range map[string]string{"tr-stuck": sagas.RetryResent, "tr-outbox": sagas.RetryRanOutbox} {
		res, err := operator.SagaRetry(ctx, operator.SagaRetryConfig{SagaOpsConfig: ops, Saga: transfersaga.Name, Instance: id, Reason: "stuck debit"})
		if err != nil {
			t.Fatalf("retry %s: %v", id, err)
		}
		if len(res.Retried) != 1 || res.Retried[0].Action != want || res.Action.Action != operator.ActionSagaRetry {
			t.Errorf("retry %s: %+v", id, res)
		}
	}
	for _, id := range []string{"tr-stuck", "tr-outbox"} {
		rigs.WaitFor(t, id+" to complete", func() bool { return rig.TransferStatus(id) == transfer.StatusCompleted })
	}

	if _, err := operator.SagaAbort(ctx, operator.SagaAbortConfig{SagaOpsConfig: ops, Saga: transfersaga.Name, Instance: "tr-abort"}); !isValidation(err) {
		t.Errorf("abort without a reason: %v", err)
	}
	res, err := operator.SagaAbort(ctx, operator.SagaAbortConfig{SagaOpsConfig: ops, Saga: transfersaga.Name, Instance: "tr-abort", Reason: "customer asked"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Effects) != 1 || res.Effects[0].Kind != "cancel" || res.Effects[0].CommandID != creditAbort || res.Err != nil || !res.Compensated {
		t.Errorf("abort: %+v", res)
	}
	rigs.WaitFor(t, "tr-abort to be compensated", func() bool { return rig.TransferStatus("tr-abort") == transfer.StatusCompensated })
	rigs.WaitFor(t, "tr-abort's instance to end aborted", func() bool {
		in, err := sagas.Get(ctx, rig.DB, transfersaga.Name, "tr-abort")
		return err == nil && in.Outcome == transfersaga.OutcomeAborted
	})
	if refunds := rig.Moves("a")[sagas.CommandID(transfersaga.Name, "tr-abort", transfersaga.StepRefund)]; !slices.Equal(refunds, []int64{300}) {
		t.Errorf("refund of tr-abort on a: %v", refunds)
	}
	if a, _ := rig.Account("a"); a.Balance != 700 {
		t.Errorf("a balance %d, want 700", a.Balance)
	}
	if b, _ := rig.Account("b"); b.Balance != 300 {
		t.Errorf("b balance %d, want 300", b.Balance)
	}
	if _, err := operator.SagaAbort(ctx, operator.SagaAbortConfig{SagaOpsConfig: ops, Saga: transfersaga.Name, Instance: "tr-abort", Reason: "again"}); !errors.Is(err, sagas.ErrFinished) {
		t.Errorf("second abort: %v", err)
	}
	if got := list(transfersaga.OutcomeAborted); len(got) != 1 || got["tr-abort"].Abort == nil || got["tr-abort"].Abort.Actor != "test-operator" {
		t.Errorf("aborted instances %+v", got)
	}
	if got := list(transfersaga.OutcomeCompleted); len(got) != 2 {
		t.Errorf("completed instances %+v", got)
	}
	if got := list(sagas.StatusStuck); len(got) != 0 {
		t.Errorf("stuck after the retries and the abort: %+v", got)
	}

	acts, err := operator.OperatorActions(ctx, operator.OperatorActionsConfig{Process: eventpipe.Process{Endpoints: rig.EP}, DB: rig.DB})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, a := range acts {
		count[a.Action+" "+a.Target]++
	}
	if count[operator.ActionSagaRetry+" transfer tr-stuck"] != 1 || count[operator.ActionSagaRetry+" transfer tr-outbox"] != 1 ||
		count[operator.ActionSagaAbort+" transfer tr-abort"] != 2 { // the abort, and the refused second one
		t.Errorf("operator actions %+v", acts)
	}
}

func isValidation(err error) bool {
	var v *eventstore.ValidationError
	return errors.As(err, &v)
}
