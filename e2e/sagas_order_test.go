package e2e_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/domains/order"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/sagas"
	"github.com/eventpipe/eventpipe/sagas/ordersaga"
)

// TestTheOrderSagaShipsPaidOrdersAndRefundsOneThatCannotShip runs seed
// 000's order flow as a saga: a paid order is shipped by the saga; the
// ShipOrder of a second paid order is dropped on the write side, so its
// shipment never answers, and after the saga's deadline the shipment is
// cancelled and the payment refunded with OrderRefunded. The dropped
// ShipOrder, delivered late, is refused and ships nothing.
func TestTheOrderSagaShipsPaidOrdersAndRefundsOneThatCannotShip(t *testing.T) {
	cat := eventpipe.NewCatalog()
	if err := cat.AddDomain(order.Domain()); err != nil {
		t.Fatal(err)
	}
	if err := cat.AddSaga(ordersaga.New(ordersaga.Config{ShipWithin: 3 * time.Second})); err != nil {
		t.Fatal(err)
	}
	lateShip := sagas.CommandID(ordersaga.Name, "o-late", ordersaga.StepShip)
	var dropped sync.Map
	drop := func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			if msg.UUID == lateShip {
				dropped.Store(lateShip, msg)
				return nil, nil
			}
			return h(msg)
		}
	}
	rig := rigs.NewSagaRig(t, cat, drop)
	// Deployed first: a saga acts only on what happens after its first
	// start (TestASagaFirstDeployedOnHistoryActsOnNoneOfItUnlessStartedAtEarliest).
	rig.RunSaga(ordersaga.Name)
	for _, id := range []string{"o-ok", "o-late"} {
		rig.Dispatch(order.PlaceOrder, order.AggregateType, id, order.OrderPlacedData{Customer: "ada", Total: 4200})
		rig.Dispatch(order.ProcessPayment, order.AggregateType, id, order.PaymentProcessedData{Amount: 4200})
	}

	state := func(id string) order.Order {
		st, err := rig.Svc.Store.State(context.Background(), eventstore.Ref{Type: order.AggregateType, ID: id})
		if err != nil {
			t.Fatal(err)
		}
		var o order.Order
		if err := json.Unmarshal(st.Data, &o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	rigs.WaitFor(t, "o-ok to ship", func() bool { return state("o-ok").Status == order.StatusShipped })
	if o := state("o-ok"); o.TrackingNumber != "TRK-o-ok" {
		t.Errorf("o-ok tracking %q", o.TrackingNumber)
	}
	rigs.WaitFor(t, "o-late to be refunded", func() bool { return state("o-late").Status == order.StatusRefunded })
	if o := state("o-late"); o.Refunded != 4200 || o.TrackingNumber != "" {
		t.Errorf("o-late %+v, want refunded 4200 and never shipped", o)
	}
	for id, want := range map[string]string{"o-ok": ordersaga.OutcomeShipped, "o-late": ordersaga.OutcomeRefunded} {
		rigs.WaitFor(t, id+"'s saga to finish", func() bool {
			in, err := sagas.Get(context.Background(), rig.DB, ordersaga.Name, id)
			return err == nil && in.Outcome == want
		})
	}

	v, ok := dropped.Load(lateShip)
	if !ok {
		t.Fatal("o-late's ShipOrder never reached the write side")
	}
	cmd, err := commands.FromMessage(v.(*message.Message))
	if err != nil {
		t.Fatal(err)
	}
	res, err := rig.Svc.Dispatcher.Dispatch(context.Background(), cmd)
	if err != nil || res.Status != commands.StatusRejected || !res.Duplicate || !strings.Contains(res.Reason, "deadline") {
		t.Errorf("late ShipOrder: %+v, %v", res, err)
	}
	if o := state("o-late"); o.Status != order.StatusRefunded {
		t.Errorf("after the late ShipOrder o-late is %s", o.Status)
	}
}
