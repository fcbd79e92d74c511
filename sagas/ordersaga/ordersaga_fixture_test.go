package ordersaga_test

import (
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/order"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/sagas/ordersaga"
	"github.com/eventpipe/eventpipe/testkit"
)

// The order saga stepped through its pure core by the kit: shipped,
// refunded (in part or not at all), cancelled at the deadline and
// aborted, with no Postgres or Kafka.

func newFixture(t *testing.T) *testkit.SagaFixture {
	return testkit.NewSagaFixture(t, ordersaga.New(ordersaga.Config{ShipWithin: time.Hour}))
}

func event(eventType string, payload any) testkit.SagaInput {
	return testkit.SagaEvent(order.AggregateType, "o1", eventType, payload)
}

var (
	paid = event(order.PaymentProcessed, order.PaymentProcessedData{Amount: 900})
	ship = testkit.Sent(ordersaga.StepShip, order.ShipOrder, order.AggregateType, "o1", order.OrderShippedData{TrackingNumber: "TRK-o1"})
	o1   = eventstore.Ref{Type: order.AggregateType, ID: "o1"}
)

func refund(amount int64, reason string) testkit.ExpectedCommand {
	return testkit.Sent(ordersaga.StepRefund, order.RefundOrder, order.AggregateType, "o1", order.OrderRefundedData{Amount: amount, Reason: reason})
}

func TestFixtureAPaidOrderShips(t *testing.T) {
	f := newFixture(t)
	f.When(paid).ThenCommands(ship).ThenScheduled("deadline", time.Hour).ThenRunning()
	f.When(testkit.Accepted(ordersaga.StepShip)).ThenNoCommands().ThenFinished(ordersaga.OutcomeShipped).ThenPending()
}

func TestFixtureOrderEventsBeforeThePaymentStartNothing(t *testing.T) {
	newFixture(t).When(event(order.OrderRefunded, order.OrderRefundedData{Amount: 100})).ThenSkipped()
	newFixture(t).When(event(order.OrderPlaced, order.OrderPlacedData{Customer: "c", Total: 900})).ThenSkipped()
}

func TestFixtureARefusedShipmentRefundsWhatIsLeft(t *testing.T) {
	f := newFixture(t).Given(paid, event(order.OrderRefunded, order.OrderRefundedData{Amount: 200}))
	f.When(testkit.Answer(ordersaga.StepShip, commands.StatusRejected, "out of stock")).
		ThenCommands(refund(700, "shipment rejected: out of stock")).
		ThenRunning()
	f.When(testkit.Accepted(ordersaga.StepRefund)).ThenFinished(ordersaga.OutcomeRefunded)
}

func TestFixtureAFullyRefundedOrderThatCannotShipFinishesAtOnce(t *testing.T) {
	newFixture(t).Given(paid, event(order.OrderRefunded, order.OrderRefundedData{Amount: 900})).
		When(testkit.Answer(ordersaga.StepShip, commands.StatusRejected, "refunded")).
		ThenNoCommands().
		ThenFinished(ordersaga.OutcomeRefunded)
}

func TestFixtureTheDeadlineCancelsTheShipmentAndARefusedRefundIsReported(t *testing.T) {
	f := newFixture(t).Given(paid)
	f.When(testkit.Fire("deadline")).
		ThenCancels(testkit.Cancelled(ordersaga.StepShip, o1, "shipment deadline passed")).
		ThenPending()
	f.When(testkit.Answer(ordersaga.StepShip, commands.StatusRejected, "shipment deadline passed")).
		ThenCommands(refund(900, "shipment rejected: shipment deadline passed"))
	f.When(testkit.Answer(ordersaga.StepRefund, commands.StatusRejected, "nope")).
		ThenFinished(ordersaga.OutcomeRefundRefused).
		ThenState(ordersaga.State{Paid: 900, Step: ordersaga.StepRefund, Reason: "shipment rejected: shipment deadline passed; refund rejected: nope"})
}

func TestFixtureAnAbortCancelsTheShipmentAndRefunds(t *testing.T) {
	f := newFixture(t).Given(paid)
	f.When(testkit.Abort("ops", "fraud")).
		ThenCancels(testkit.Cancelled(ordersaga.StepShip, o1, "order saga aborted: fraud")).
		ThenPending().
		ThenRunning()
	f.When(testkit.Answer(ordersaga.StepShip, commands.StatusRejected, "order saga aborted: fraud")).
		ThenCommands(refund(900, "shipment rejected: order saga aborted: fraud"))
	f.When(testkit.Accepted(ordersaga.StepRefund)).ThenFinished(ordersaga.OutcomeAborted)

	// Shipped before the abort's cancel: the abort came too late.
	newFixture(t).Given(paid, testkit.Abort("ops", "fraud")).
		When(testkit.Accepted(ordersaga.StepShip)).
		ThenFinished(ordersaga.OutcomeShipped)
}
