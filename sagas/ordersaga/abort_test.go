package ordersaga

import (
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/order"
	"github.com/eventpipe/eventpipe/sagas"
)

// TestAbortCancelsTheShipmentAndRefundsThePayment aborts a paid order's
// saga waiting for its shipment: the shipment is cancelled, the refusal
// refunds what was paid, and the instance ends aborted; a shipment
// accepted before the cancel ends shipped.
func TestAbortCancelsTheShipmentAndRefundsThePayment(t *testing.T) {
	abort := sagas.Input{ID: "abort:o1", Kind: sagas.KindAbort, Actor: "ops", Reason: "fraud"}
	fx := sagas.NewEffects(Name, "o1", "", time.Unix(0, 0))
	if _, err := New(Config{}).Abort(State{Paid: 900, Step: StepShip}, abort, fx); err != nil {
		t.Fatal(err)
	}
	if c := fx.Cancellations(); len(c) != 1 || c[0].CommandID != "order.o1.ship" || fx.Outcome() != "" {
		t.Fatalf("abort: cancels %+v, outcome %q", c, fx.Outcome())
	}

	sent, outcomes := run(t, event(t, order.PaymentProcessed, order.PaymentProcessedData{Amount: 900}), abort,
		answer(StepShip, commands.StatusRejected, "order saga aborted: fraud"), answer(StepRefund, commands.StatusAccepted, ""))
	var refund order.OrderRefundedData
	if len(sent[2]) != 1 || sent[2][0].Type != order.RefundOrder || sent[2][0].DecodePayload(&refund) != nil || refund.Amount != 900 || outcomes[3] != OutcomeAborted {
		t.Fatalf("aborted: %+v %+v %v", sent, refund, outcomes)
	}

	_, outcomes = run(t, event(t, order.PaymentProcessed, order.PaymentProcessedData{Amount: 900}), abort, answer(StepShip, commands.StatusAccepted, ""))
	if outcomes[2] != OutcomeShipped {
		t.Fatalf("shipped before the abort's cancel: %v", outcomes)
	}
}
