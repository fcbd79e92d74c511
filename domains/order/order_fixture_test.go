package order_test

import (
	"testing"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/order"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/testkit"
)

// The order domain's commands through its real handlers on the in-memory
// store, with no service running.

func placed(customer string, total int64) eventstore.NewEvent {
	return eventstore.Event(order.OrderPlaced, order.OrderPlacedData{Customer: customer, Total: total})
}

func paid(amount int64) eventstore.NewEvent {
	return eventstore.Event(order.PaymentProcessed, order.PaymentProcessedData{Amount: amount})
}

func TestFixtureAnOrderGoesFromPlacedToDelivered(t *testing.T) {
	f := testkit.NewDomainFixture(t, order.Domain())
	f.When("o1", order.PlaceOrder, order.OrderPlacedData{Customer: "c1", Total: 4500}).
		ThenEvents(placed("c1", 4500))
	f.When("o1", order.ProcessPayment, order.PaymentProcessedData{Amount: 4500}).
		ThenEvents(paid(4500))
	f.When("o1", order.ShipOrder, order.OrderShippedData{TrackingNumber: "Z1"}).
		ThenEvents(eventstore.Event(order.OrderShipped, order.OrderShippedData{TrackingNumber: "Z1"}))
	f.When("o1", order.DeliverOrder, `{}`).
		ThenEvents(eventstore.Event(order.OrderDelivered, struct{}{})).
		ThenNoOutbound().
		ThenState("o1", order.Order{Status: order.StatusDelivered, Customer: "c1", Total: 4500, Paid: 4500, TrackingNumber: "Z1"})
}

func TestFixtureARefundPublishesOrderRefundedAndIsBoundedByThePayment(t *testing.T) {
	f := testkit.NewDomainFixture(t, order.Domain())
	f.Given("o1", placed("c1", 4500), paid(4500))
	f.When("o1", order.RefundOrder, order.OrderRefundedData{Amount: 1000, Reason: "dented"}).
		ThenEvents(eventstore.Event(order.OrderRefunded, order.OrderRefundedData{Amount: 1000, Reason: "dented"})).
		ThenOutbound(testkit.Outbound(order.OutboundOrderRefunded, `{"amount":1000,"reason":"dented"}`))
	f.When("o1", order.RefundOrder, order.OrderRefundedData{Amount: 3501}).
		ThenRejected("refund of 3501 exceeds the refundable 3500").
		ThenNoOutbound()
	f.When("o1", order.RefundOrder, order.OrderRefundedData{Amount: 3500}).
		ThenAccepted().
		ThenState("o1", order.Order{Status: order.StatusRefunded, Customer: "c1", Total: 4500, Paid: 4500, Refunded: 4500})
}

func TestFixtureOrderCommandsOutOfTurnAreRefused(t *testing.T) {
	f := testkit.NewDomainFixture(t, order.Domain())
	f.When("o9", order.ShipOrder, order.OrderShippedData{TrackingNumber: "Z"}).
		ThenRefused(commands.StatusNotFound, "was never placed")
	f.Given("o1", placed("c1", 4500))
	f.When("o1", order.ProcessPayment, order.PaymentProcessedData{Amount: 4499}).
		ThenRejected("does not match the total 4500")
	f.When("o1", order.ShipOrder, order.OrderShippedData{TrackingNumber: "Z"}).
		ThenRejected("OrderShipped not allowed when the order is placed")
	f.When("o1", order.PlaceOrder, order.OrderPlacedData{Customer: "c2", Total: 1}).
		ThenRejected("OrderPlaced not allowed")
	f.When("o1", order.ProcessPayment, order.PaymentProcessedData{Amount: 0}).
		ThenRefused(commands.StatusInvalid, "amount")
	f.When("o1", order.DeliverOrder, `{"now":true}`).
		ThenRefused(commands.StatusInvalid, "now")
}
