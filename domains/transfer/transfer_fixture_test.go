package transfer_test

import (
	"testing"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/transfer"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/testkit"
)

// The transfer domain's commands through its real handlers on the
// in-memory store, with no service running.

var requested = transfer.TransferRequestedEvent.New(transfer.RequestedData{From: "a", To: "b", Amount: 250})

func TestFixtureATransferIsRequestedOnceBetweenTwoAccounts(t *testing.T) {
	f := testkit.NewDomainFixture(t, transfer.Domain())
	f.When("t1", transfer.RequestTransfer, transfer.RequestedData{From: "a", To: "b", Amount: 250}).
		ThenEvents(requested).
		ThenNoOutbound()
	f.When("t1", transfer.RequestTransfer, transfer.RequestedData{From: "a", To: "c", Amount: 1}).
		ThenRefusedWith(commands.StatusConflict, transfer.ErrExists)
	f.When("t2", transfer.RequestTransfer, transfer.RequestedData{From: "a", To: "a", Amount: 1}).
		ThenInvalid("to")
	f.When("t2", transfer.RequestTransfer, transfer.RequestedData{From: "a", To: "b", Amount: -1}).
		ThenInvalid("amount")
}

func TestFixtureEachOutcomePublishesItsOutboundEvent(t *testing.T) {
	for _, tc := range []struct {
		command, event, outbound, reason string
		payload                          any
	}{
		{transfer.CompleteTransfer, transfer.TransferCompleted, transfer.OutboundTransferCompleted, "", transfer.CompletedData{}},
		{transfer.CompensateTransfer, transfer.TransferCompensated, transfer.OutboundTransferCompensated, "credit rejected", transfer.ReasonData{Reason: "credit rejected"}},
		{transfer.FailTransfer, transfer.TransferFailed, transfer.OutboundTransferFailed, "insufficient funds", transfer.ReasonData{Reason: "insufficient funds"}},
	} {
		t.Run(tc.command, func(t *testing.T) {
			testkit.NewDomainFixture(t, transfer.Domain()).
				Given("t1", requested).
				When("t1", tc.command, tc.payload).
				ThenEvents(eventstore.Event(tc.event, tc.payload)).
				ThenOutbound(testkit.Outbound(tc.outbound, transfer.OutcomeData{TransferID: "t1", From: "a", To: "b", Amount: 250, Reason: tc.reason}))
		})
	}
}

func TestFixtureAFinishedOrUnknownTransferTakesNoOutcome(t *testing.T) {
	f := testkit.NewDomainFixture(t, transfer.Domain())
	f.When("t9", transfer.CompleteTransfer, `{}`).
		ThenRefusedWith(commands.StatusNotFound, transfer.ErrNotFound)
	f.Given("t1", requested, transfer.TransferCompletedEvent.New(transfer.CompletedData{}))
	f.When("t1", transfer.FailTransfer, transfer.ReasonData{Reason: "too late"}).
		ThenRefusedWith(commands.StatusConflict, transfer.ErrFinished).
		ThenNoOutbound()
}
