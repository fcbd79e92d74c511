package transfersaga

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/domains/transfer"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/sagas"
)

// step is what one input made the saga do.
type step struct {
	state    State
	sent     []commands.Command
	cancels  []sagas.Cancellation
	timeouts map[string]time.Time
	outcome  string
}

// drive feeds inputs to the saga one after another, as the Runner would
// for one instance, and returns what each did.
func drive(t *testing.T, inputs ...sagas.Input) []step {
	t.Helper()
	saga := New(Config{Timeout: time.Minute})
	if err := saga.Validate(); err != nil {
		t.Fatal(err)
	}
	s := saga.Initial("t1")
	var out []step
	for _, in := range inputs {
		fx := sagas.NewEffects(Name, "t1", "", time.Unix(1000, 0))
		h := saga.Handle
		if in.Kind == sagas.KindAbort {
			h = saga.Abort
		}
		next, err := h(s, in, fx)
		if err != nil {
			t.Fatalf("%s: %v", in.ID, err)
		}
		if err := fx.Err(); err != nil {
			t.Fatalf("%s: %v", in.ID, err)
		}
		s = next
		out = append(out, step{state: s, sent: fx.Commands(), cancels: fx.Cancellations(), timeouts: fx.Timeouts(), outcome: fx.Outcome()})
	}
	return out
}

func requested(t *testing.T) sagas.Input {
	t.Helper()
	e := eventstore.Envelope{EventID: "01J00000000000000000000000", EventType: transfer.TransferRequested, AggregateType: transfer.AggregateType, AggregateID: "t1", Sequence: 1}
	var err error
	if e.Payload, err = json.Marshal(transfer.RequestedData{From: "a", To: "b", Amount: 250}); err != nil {
		t.Fatal(err)
	}
	in := sagas.Input{ID: "event:" + e.EventID, Kind: sagas.KindEvent, Event: e}
	if id, start := route(in); id != "t1" || !start {
		t.Fatalf("route(TransferRequested) = %q, %v", id, start)
	}
	return in
}

func answer(step string, status commands.Status, reason string) sagas.Input {
	id := sagas.CommandID(Name, "t1", step)
	return sagas.Input{ID: "result:" + id, Kind: sagas.KindResult, Step: step, Result: commands.Result{CommandID: id, Status: status, Reason: reason}}
}

func deadlinePassed() sagas.Input {
	return sagas.Input{ID: "timeout:deadline:x", Kind: sagas.KindTimeout, Timeout: deadline}
}

// transaction decodes a RecordTransaction the saga sent.
func transaction(t *testing.T, cmd commands.Command) (account string, d bankaccount.TransactionAcceptedData) {
	t.Helper()
	if cmd.Type != bankaccount.RecordTransaction || cmd.AggregateType != bankaccount.AggregateType {
		t.Fatalf("sent %s to %s, want a RecordTransaction", cmd.Type, cmd.AggregateType)
	}
	if err := cmd.DecodePayload(&d); err != nil {
		t.Fatal(err)
	}
	return cmd.AggregateID, d
}

func only(t *testing.T, s step) commands.Command {
	t.Helper()
	if len(s.sent) != 1 {
		t.Fatalf("sent %d commands, want 1: %+v", len(s.sent), s.sent)
	}
	return s.sent[0]
}

func TestACompletedTransferDebitsThenCreditsThenCompletes(t *testing.T) {
	steps := drive(t, requested(t), answer(StepDebit, commands.StatusAccepted, ""), answer(StepCredit, commands.StatusAccepted, ""))
	debit := only(t, steps[0])
	if acc, d := transaction(t, debit); acc != "a" || d.Amount != -250 || d.Refund {
		t.Errorf("debit %s %+v", acc, d)
	}
	if debit.ID != "transfer.t1.debit" {
		t.Errorf("debit id %q", debit.ID)
	}
	if due, ok := steps[0].timeouts[deadline]; !ok || due != time.Unix(1000, 0).Add(time.Minute) {
		t.Errorf("deadline %v, %v", due, ok)
	}
	if acc, d := transaction(t, only(t, steps[1])); acc != "b" || d.Amount != 250 {
		t.Errorf("credit %s %+v", acc, d)
	}
	done := only(t, steps[2])
	if done.Type != transfer.CompleteTransfer || done.AggregateID != "t1" || steps[2].outcome != OutcomeCompleted {
		t.Errorf("finish %s %s, outcome %q", done.Type, done.AggregateID, steps[2].outcome)
	}
}

func TestARefusedCreditIsCompensatedWithARefund(t *testing.T) {
	steps := drive(t, requested(t), answer(StepDebit, commands.StatusAccepted, ""),
		answer(StepCredit, commands.StatusRejected, "account closed"), answer(StepRefund, commands.StatusAccepted, ""))
	if acc, d := transaction(t, only(t, steps[2])); acc != "a" || d.Amount != 250 || !d.Refund {
		t.Errorf("refund %s %+v", acc, d)
	}
	comp := only(t, steps[3])
	var why transfer.ReasonData
	if err := comp.DecodePayload(&why); err != nil {
		t.Fatal(err)
	}
	if comp.Type != transfer.CompensateTransfer || why.Reason != "credit rejected: account closed" || steps[3].outcome != OutcomeCompensated {
		t.Errorf("compensate %s %+v, outcome %q", comp.Type, why, steps[3].outcome)
	}
}

func TestARefusedDebitFailsTheTransferAndMovesNothing(t *testing.T) {
	steps := drive(t, requested(t), answer(StepDebit, commands.StatusRejected, "insufficient funds"))
	fail := only(t, steps[1])
	if fail.Type != transfer.FailTransfer || steps[1].outcome != OutcomeFailed {
		t.Errorf("%s, outcome %q", fail.Type, steps[1].outcome)
	}
}

func TestTheDeadlineCancelsTheStepInFlight(t *testing.T) {
	// During the credit: the credit is cancelled; the cancel's answer
	// (rejected) refunds.
	steps := drive(t, requested(t), answer(StepDebit, commands.StatusAccepted, ""), deadlinePassed(),
		answer(StepCredit, commands.StatusRejected, "transfer deadline passed"), answer(StepRefund, commands.StatusAccepted, ""))
	if c := steps[2].cancels; len(c) != 1 || c[0].CommandID != "transfer.t1.credit" || c[0].AggregateID != "b" || len(steps[2].sent) != 0 {
		t.Fatalf("cancels %+v, sent %+v", c, steps[2].sent)
	}
	if acc, d := transaction(t, only(t, steps[3])); acc != "a" || !d.Refund {
		t.Errorf("refund %s %+v", acc, d)
	}
	if steps[4].outcome != OutcomeCompensated {
		t.Errorf("outcome %q", steps[4].outcome)
	}

	// During the debit, when the debit had landed: refunded at once, the
	// credit never sent.
	steps = drive(t, requested(t), deadlinePassed(), answer(StepDebit, commands.StatusAccepted, ""), answer(StepRefund, commands.StatusAccepted, ""))
	if c := steps[1].cancels; len(c) != 1 || c[0].CommandID != "transfer.t1.debit" || c[0].AggregateID != "a" {
		t.Fatalf("cancels %+v", c)
	}
	if acc, d := transaction(t, only(t, steps[2])); acc != "a" || d.Amount != 250 || !d.Refund {
		t.Errorf("after a late debit: %s %+v, want the refund", acc, d)
	}
	if steps[3].outcome != OutcomeCompensated {
		t.Errorf("outcome %q", steps[3].outcome)
	}

	// A second deadline, or an answer to a step already decided, does
	// nothing.
	steps = drive(t, requested(t), deadlinePassed(), deadlinePassed(), answer(StepCredit, commands.StatusAccepted, ""))
	if len(steps[2].cancels)+len(steps[2].sent)+len(steps[3].sent) != 0 || steps[3].state.Step != StepDebit {
		t.Errorf("repeated deadline or stray answer acted: %+v %+v", steps[2], steps[3])
	}
}
