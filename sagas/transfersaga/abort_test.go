package transfersaga

import (
	"testing"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/transfer"
	"github.com/eventpipe/eventpipe/sagas"
)

func aborted() sagas.Input {
	return sagas.Input{ID: "abort:t1", Kind: sagas.KindAbort, Actor: "ops", Reason: "customer cancelled"}
}

// TestAbortCancelsTheCreditInFlightAndRefundsTheSource aborts a transfer
// waiting for its credit: the credit is cancelled, its refusal refunds the
// source, and the transfer ends compensated, the instance aborted.
func TestAbortCancelsTheCreditInFlightAndRefundsTheSource(t *testing.T) {
	steps := drive(t, requested(t), answer(StepDebit, commands.StatusAccepted, ""), aborted(),
		answer(StepCredit, commands.StatusRejected, "transfer aborted: customer cancelled"), answer(StepRefund, commands.StatusAccepted, ""))
	ab := steps[2]
	if len(ab.cancels) != 1 || ab.cancels[0].CommandID != sagas.CommandID(Name, "t1", StepCredit) || ab.cancels[0].AggregateID != "b" || ab.outcome != "" || len(ab.sent) != 0 {
		t.Fatalf("abort: %+v", ab)
	}
	if ab.state.Aborted != "customer cancelled" {
		t.Errorf("abort state %+v", ab.state)
	}
	ref := steps[3]
	if len(ref.sent) != 1 {
		t.Fatalf("after the cancelled credit: %+v", ref)
	}
	if acc, d := transaction(t, ref.sent[0]); acc != "a" || d.Amount != 250 || !d.Refund {
		t.Errorf("refund %s %+v", acc, d)
	}
	last := steps[4]
	if last.outcome != OutcomeAborted || len(last.sent) != 1 || last.sent[0].Type != transfer.CompensateTransfer {
		t.Errorf("end: %+v", last)
	}
}

// TestAbortBeforeTheDebitAnswersFailsOrRefundsAsTheDebitsAnswerSays
// aborts a transfer whose debit is in flight: a debit refused by the
// cancel fails the transfer, one accepted before it is refunded; both
// end aborted.
func TestAbortBeforeTheDebitAnswersFailsOrRefundsAsTheDebitsAnswerSays(t *testing.T) {
	steps := drive(t, requested(t), aborted(), answer(StepDebit, commands.StatusRejected, "transfer aborted"))
	if c := steps[1].cancels; len(c) != 1 || c[0].AggregateID != "a" {
		t.Fatalf("abort cancels %+v", c)
	}
	if s := steps[2]; s.outcome != OutcomeAborted || len(s.sent) != 1 || s.sent[0].Type != transfer.FailTransfer {
		t.Errorf("debit refused after the abort: %+v", s)
	}
	steps = drive(t, requested(t), aborted(), answer(StepDebit, commands.StatusAccepted, ""), answer(StepRefund, commands.StatusAccepted, ""))
	if s := steps[2]; len(s.sent) != 1 || s.state.Step != StepRefund {
		t.Errorf("debit accepted before the abort's cancel: %+v", s)
	}
	if s := steps[3]; s.outcome != OutcomeAborted {
		t.Errorf("end: %+v", s)
	}
}

// TestAbortAfterTheCreditWasAcceptedCompletesTheTransfer: the abort came
// too late, the money has moved, and the transfer completes.
func TestAbortAfterTheCreditWasAcceptedCompletesTheTransfer(t *testing.T) {
	steps := drive(t, requested(t), answer(StepDebit, commands.StatusAccepted, ""), aborted(), answer(StepCredit, commands.StatusAccepted, ""))
	if s := steps[3]; s.outcome != OutcomeCompleted || len(s.sent) != 1 || s.sent[0].Type != transfer.CompleteTransfer {
		t.Errorf("credit accepted before the abort's cancel: %+v", s)
	}
}
