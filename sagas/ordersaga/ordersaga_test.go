package ordersaga

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/order"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/sagas"
)

func event(t *testing.T, typ string, payload any) sagas.Input {
	t.Helper()
	b, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	e := eventstore.Envelope{EventID: typ, EventType: typ, AggregateType: order.AggregateType, AggregateID: "o1", Payload: b}
	return sagas.Input{ID: "event:" + typ, Kind: sagas.KindEvent, Event: e}
}

func answer(step string, status commands.Status, reason string) sagas.Input {
	id := sagas.CommandID(Name, "o1", step)
	return sagas.Input{ID: "result:" + id, Kind: sagas.KindResult, Step: step, Result: commands.Result{CommandID: id, Status: status, Reason: reason}}
}

// run feeds inputs to the saga for order o1 and returns the commands and
// the outcome of each.
func run(t *testing.T, inputs ...sagas.Input) ([][]commands.Command, []string) {
	t.Helper()
	saga := New(Config{ShipWithin: time.Hour})
	if err := saga.Validate(); err != nil {
		t.Fatal(err)
	}
	s := saga.Initial("o1")
	var sent [][]commands.Command
	var outcomes []string
	for _, in := range inputs {
		if id, start := saga.Route(in); in.Kind == sagas.KindEvent && id != "o1" {
			t.Fatalf("route(%s) = %q, %v", in.Event.EventType, id, start)
		}
		fx := sagas.NewEffects(Name, "o1", "", time.Unix(0, 0))
		h := saga.Handle
		if in.Kind == sagas.KindAbort {
			h = saga.Abort
		}
		next, err := h(s, in, fx)
		if err != nil || fx.Err() != nil {
			t.Fatalf("%s: %v %v", in.ID, err, fx.Err())
		}
		s = next
		sent, outcomes = append(sent, fx.Commands()), append(outcomes, fx.Outcome())
	}
	return sent, outcomes
}

func TestAPaidOrderShipsAndAnUnshippableOneIsRefundedWhatIsLeft(t *testing.T) {
	sent, outcomes := run(t, event(t, order.PaymentProcessed, order.PaymentProcessedData{Amount: 900}), answer(StepShip, commands.StatusAccepted, ""))
	var ship order.OrderShippedData
	if len(sent[0]) != 1 || sent[0][0].Type != order.ShipOrder || sent[0][0].DecodePayload(&ship) != nil || ship.TrackingNumber != "TRK-o1" || outcomes[1] != OutcomeShipped {
		t.Fatalf("shipped path: %+v %v", sent, outcomes)
	}

	// Part refunded meanwhile, then the shipment refused: the rest is
	// refunded.
	sent, outcomes = run(t, event(t, order.PaymentProcessed, order.PaymentProcessedData{Amount: 900}),
		event(t, order.OrderRefunded, order.OrderRefundedData{Amount: 200}),
		answer(StepShip, commands.StatusRejected, "out of stock"), answer(StepRefund, commands.StatusAccepted, ""))
	var refund order.OrderRefundedData
	if len(sent[2]) != 1 || sent[2][0].Type != order.RefundOrder || sent[2][0].DecodePayload(&refund) != nil || refund.Amount != 700 ||
		refund.Reason != "shipment rejected: out of stock" || outcomes[3] != OutcomeRefunded {
		t.Fatalf("refund path: %+v %+v %v", sent, refund, outcomes)
	}

	// Refunded in full before the refusal: nothing left to refund.
	sent, outcomes = run(t, event(t, order.PaymentProcessed, order.PaymentProcessedData{Amount: 900}),
		event(t, order.OrderRefunded, order.OrderRefundedData{Amount: 900}), answer(StepShip, commands.StatusRejected, "refunded"))
	if len(sent[2]) != 0 || outcomes[2] != OutcomeRefunded {
		t.Fatalf("nothing left: %+v %v", sent, outcomes)
	}

	// The deadline cancels the shipment.
	fx := sagas.NewEffects(Name, "o1", "", time.Unix(0, 0))
	saga := New(Config{})
	if _, err := saga.Handle(State{Paid: 900, Step: StepShip}, sagas.Input{Kind: sagas.KindTimeout, Timeout: deadline}, fx); err != nil {
		t.Fatal(err)
	}
	if c := fx.Cancellations(); len(c) != 1 || c[0].CommandID != "order.o1.ship" {
		t.Fatalf("cancels %+v", c)
	}
}
