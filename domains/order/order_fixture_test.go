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
	return order.OrderPlacedEvent.New(order.OrderPlacedData{Customer: customer, Total: total})
}

func paid(amount int64) eventstore.NewEvent {
	return order.PaymentProcessedEvent.New(order.PaymentProcessedData{Amount: amount})
}

func TestFixtureAnOrderGoesFromPlacedToDelivered(t *testing.T) {
	f := testkit.NewDomainFixture(t, order.Domain())
	f.When("o1", order.PlaceOrder, order.OrderPlacedData{Customer: "c1", Total: 4500}).
		ThenEvents(placed("c1", 4500))
	f.When("o1", order.ProcessPayment, order.PaymentProcessedData{Amount: 4500}).
		ThenEvents(paid(4500))
	f.When("o1", order.ShipOrder, order.OrderShippedData{TrackingNumber: "Z1"}).
		ThenEvents(order.OrderShippedEvent.New(order.OrderShippedData{TrackingNumber: "Z1"}))
	f.When("o1", order.DeliverOrder, `{}`).
		ThenEvents(order.OrderDeliveredEvent.New(struct{}{})).
		ThenNoOutbound().
		ThenState("o1", order.Order{Status: order.StatusDelivered, Customer: "c1", Total: 4500, Paid: 4500, TrackingNumber: "Z1"})
}

func TestFixtureARefundPublishesOrderRefundedAndIsBoundedByThePayment(t *testing.T) {
	f := testkit.NewDomainFixture(t, order.Domain())
	f.Given("o1", placed("c1", 4500), paid(4500))
	f.When("o1", order.RefundOrder, order.OrderRefundedData{Amount: 1000, Reason: "dented"}).
		ThenEvents(order.OrderRefundedEvent.New(order.OrderRefundedData{Amount: 1000, Reason: "dented"})).
		ThenOutbound(testkit.Outbound(order.OutboundOrderRefunded, `{"amount":1000,"reason":"dented"}`))
	f.When("o1", order.RefundOrder, order.OrderRefundedData{Amount: 3501}).
		ThenRefusedWith(commands.StatusRejected, order.ErrRefundTooLarge).
		ThenNoOutbound()
	f.When("o1", order.RefundOrder, order.OrderRefundedData{Amount: 3500}).
		ThenAccepted().
		ThenState("o1", order.Order{Status: order.StatusRefunded, Customer: "c1", Total: 4500, Paid: 4500, Refunded: 4500})
}

func TestFixtureOrderCommandsOutOfTurnAreRefused(t *testing.T) {
	f := testkit.NewDomainFixture(t, order.Domain())
	f.When("o9", order.ShipOrder, order.OrderShippedData{TrackingNumber: "Z"}).
		ThenRefusedWith(commands.StatusNotFound, order.ErrNotPlaced)
	f.Given("o1", placed("c1", 4500))
	f.When("o1", order.ProcessPayment, order.PaymentProcessedData{Amount: 4499}).
		ThenRefusedWith(commands.StatusRejected, order.ErrPaymentMismatch)
	f.When("o1", order.ShipOrder, order.OrderShippedData{TrackingNumber: "Z"}).
		ThenRefusedWith(commands.StatusRejected, order.ErrOutOfTurn)
	f.When("o1", order.PlaceOrder, order.OrderPlacedData{Customer: "c2", Total: 1}).
		ThenRefusedWith(commands.StatusRejected, order.ErrOutOfTurn)
	f.When("o1", order.ProcessPayment, order.PaymentProcessedData{Amount: 0}).
		ThenInvalid("amount")
	f.When("o1", order.DeliverOrder, `{"now":true}`).
		ThenInvalid("payload")
}
