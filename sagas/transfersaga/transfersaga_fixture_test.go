package transfersaga_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/domains/transfer"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/sagas/transfersaga"
	"github.com/eventpipe/eventpipe/testkit"
)

// The transfer saga stepped through its pure core by the kit: every
// path from the request to completed, failed, compensated and aborted,
// with no Postgres or Kafka.

func newFixture(t *testing.T) *testkit.SagaFixture {
	return testkit.NewSagaFixture(t, transfersaga.New(transfersaga.Config{Timeout: time.Minute}))
}

var requested = testkit.SagaEvent(transfer.AggregateType, "t1", transfer.TransferRequested, transfer.RequestedData{From: "a", To: "b", Amount: 250})

// transaction is the RecordTransaction the saga sends at step.
func transaction(step, account string, amount int64, refund bool, desc string) testkit.ExpectedCommand {
	return testkit.Sent(step, bankaccount.RecordTransaction, bankaccount.AggregateType, account,
		bankaccount.TransactionAcceptedData{Desc: desc, Amount: amount, Refund: refund})
}

func outcome(step, commandType string, payload any) testkit.ExpectedCommand {
	return testkit.Sent(step, commandType, transfer.AggregateType, "t1", payload)
}

var (
	debit  = transaction(transfersaga.StepDebit, "a", -250, false, "transfer t1 to b")
	credit = transaction(transfersaga.StepCredit, "b", 250, false, "transfer t1 from a")
	refund = transaction(transfersaga.StepRefund, "a", 250, true, "refund of transfer t1")
)

func account(id string) eventstore.Ref {
	return eventstore.Ref{Type: bankaccount.AggregateType, ID: id}
}

func TestFixtureARequestDebitsTheSourceAndSetsTheDeadline(t *testing.T) {
	newFixture(t).
		When(requested).
		ThenCommands(debit).
		ThenScheduled("deadline", time.Minute).
		ThenPending("deadline").
		ThenRunning().
		ThenState(transfersaga.State{From: "a", To: "b", Amount: 250, Step: transfersaga.StepDebit})
}

func TestFixtureAnAcceptedCreditCompletesTheTransfer(t *testing.T) {
	f := newFixture(t).Given(requested)
	f.When(testkit.Accepted(transfersaga.StepDebit)).ThenCommands(credit).ThenRunning()
	f.When(testkit.Accepted(transfersaga.StepCredit)).
		ThenCommands(outcome(transfersaga.StepComplete, transfer.CompleteTransfer, `{}`)).
		ThenFinished(transfersaga.OutcomeCompleted).
		ThenPending()
	// A finished instance takes no more inputs.
	f.When(testkit.Answer(transfersaga.StepCredit, commands.StatusAccepted, "")).ThenSkipped()
}

func TestFixtureARefusedDebitFailsTheTransferAndMovesNothing(t *testing.T) {
	newFixture(t).Given(requested).
		When(testkit.Answer(transfersaga.StepDebit, commands.StatusRejected, "insufficient funds")).
		ThenCommands(outcome(transfersaga.StepFail, transfer.FailTransfer, transfer.ReasonData{Reason: "debit rejected: insufficient funds"})).
		ThenFinished(transfersaga.OutcomeFailed)
}

func TestFixtureARefusedCreditIsCompensatedWithARefund(t *testing.T) {
	f := newFixture(t).Given(requested, testkit.Accepted(transfersaga.StepDebit))
	f.When(testkit.Answer(transfersaga.StepCredit, commands.StatusRejected, "account closed")).
		ThenCommands(refund).
		ThenRunning()
	f.When(testkit.Accepted(transfersaga.StepRefund)).
		ThenCommands(outcome(transfersaga.StepCompensate, transfer.CompensateTransfer, transfer.ReasonData{Reason: "credit rejected: account closed"})).
		ThenFinished(transfersaga.OutcomeCompensated)
}

func TestFixtureARefusedRefundNeedsAnOperator(t *testing.T) {
	newFixture(t).Given(requested, testkit.Accepted(transfersaga.StepDebit), testkit.Answer(transfersaga.StepCredit, commands.StatusNotFound, "no account b")).
		When(testkit.Answer(transfersaga.StepRefund, commands.StatusRejected, "account frozen")).
		ThenNoCommands().
		ThenFinished(transfersaga.OutcomeRefundRefused)
}

func TestFixtureTheDeadlineCancelsTheCreditInFlightAndItsRefusalRefunds(t *testing.T) {
	f := newFixture(t).Given(requested, testkit.Accepted(transfersaga.StepDebit))
	f.When(testkit.Fire("deadline")).
		ThenCancels(testkit.Cancelled(transfersaga.StepCredit, account("b"), "transfer deadline passed")).
		ThenNoCommands().
		ThenPending()
	if got, want := f.Now(), testkit.Epoch().Add(time.Minute); !got.Equal(want) {
		t.Errorf("clock %v after the deadline, want %v", got, want)
	}
	f.When(testkit.Answer(transfersaga.StepCredit, commands.StatusRejected, "transfer deadline passed")).
		ThenCommands(refund)
}

func TestFixtureADebitAcceptedAfterTheDeadlineIsRefundedAtOnce(t *testing.T) {
	f := newFixture(t).Given(requested)
	f.When(testkit.Fire("deadline")).
		ThenCancels(testkit.Cancelled(transfersaga.StepDebit, account("a"), "transfer deadline passed"))
	f.When(testkit.Accepted(transfersaga.StepDebit)).ThenCommands(refund)
	f.When(testkit.Accepted(transfersaga.StepRefund)).
		ThenCommands(outcome(transfersaga.StepCompensate, transfer.CompensateTransfer, transfer.ReasonData{Reason: "deadline passed after the debit"})).
		ThenFinished(transfersaga.OutcomeCompensated)
}

func TestFixtureAnAbortCancelsTheCreditAndRefundsTheSource(t *testing.T) {
	f := newFixture(t).Given(requested, testkit.Accepted(transfersaga.StepDebit))
	f.When(testkit.Abort("ops", "customer cancelled")).
		ThenCancels(testkit.Cancelled(transfersaga.StepCredit, account("b"), "transfer aborted: customer cancelled")).
		ThenNoCommands().
		ThenPending().
		ThenRunning()
	f.When(testkit.Answer(transfersaga.StepCredit, commands.StatusRejected, "transfer aborted: customer cancelled")).ThenCommands(refund)
	f.When(testkit.Accepted(transfersaga.StepRefund)).
		ThenCommands(outcome(transfersaga.StepCompensate, transfer.CompensateTransfer,
			transfer.ReasonData{Reason: "credit rejected: transfer aborted: customer cancelled"})).
		ThenFinished(transfersaga.OutcomeAborted)
}

// An abort while the debit is in flight cancels the debit: refused by
// the cancel, the transfer fails; accepted before the cancel, the source
// is refunded. Both end aborted.
func TestFixtureAnAbortBeforeTheDebitAnswersFailsOrRefundsAsTheDebitsAnswerSays(t *testing.T) {
	f := newFixture(t).Given(requested)
	f.When(testkit.Abort("ops", "customer cancelled")).
		ThenCancels(testkit.Cancelled(transfersaga.StepDebit, account("a"), "transfer aborted: customer cancelled")).
		ThenNoCommands()
	f.When(testkit.Answer(transfersaga.StepDebit, commands.StatusRejected, "transfer aborted: customer cancelled")).
		ThenCommands(outcome(transfersaga.StepFail, transfer.FailTransfer, transfer.ReasonData{Reason: "debit rejected: transfer aborted: customer cancelled"})).
		ThenFinished(transfersaga.OutcomeAborted)

	g := newFixture(t).Given(requested, testkit.Abort("ops", "customer cancelled"))
	g.When(testkit.Accepted(transfersaga.StepDebit)).ThenCommands(refund).ThenRunning()
	g.When(testkit.Accepted(transfersaga.StepRefund)).ThenFinished(transfersaga.OutcomeAborted)
}

func TestFixtureAnAbortTooLateCompletesTheTransfer(t *testing.T) {
	newFixture(t).Given(requested, testkit.Accepted(transfersaga.StepDebit), testkit.Abort("ops", "oops")).
		When(testkit.Accepted(transfersaga.StepCredit)).
		ThenCommands(outcome(transfersaga.StepComplete, transfer.CompleteTransfer, `{}`)).
		ThenFinished(transfersaga.OutcomeCompleted)
}

func TestFixtureTheTransfersOtherEventsStartNoInstance(t *testing.T) {
	newFixture(t).
		When(testkit.SagaEvent(transfer.AggregateType, "t2", transfer.TransferCompleted, `{}`)).
		ThenSkipped()
}

func TestFixtureEachTransferIsAnInstanceOfItsOwn(t *testing.T) {
	f := newFixture(t)
	for i := range 3 {
		id := fmt.Sprintf("t%d", i)
		f.Given(testkit.SagaEvent(transfer.AggregateType, id, transfer.TransferRequested, transfer.RequestedData{From: "a", To: "b", Amount: 1}))
	}
	f.When(testkit.Accepted(transfersaga.StepDebit).On("t1")).
		ThenCommands(transaction(transfersaga.StepCredit, "b", 1, false, "transfer t1 from a"))
	if got := f.Instances(); len(got) != 3 {
		t.Errorf("instances %v, want 3", got)
	}
}
