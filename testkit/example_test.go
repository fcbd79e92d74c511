package testkit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/domains/order"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/projections/searchmodels"
	"github.com/eventpipe/eventpipe/sagas/ordersaga"
	"github.com/eventpipe/eventpipe/testkit"
)

// printT stands in for a test's *testing.T in the examples: it prints
// what a check reports instead of failing.
type printT struct{ testing.TB }

func (printT) Helper()                           {}
func (printT) Context() context.Context          { return context.Background() }
func (printT) Errorf(format string, args ...any) { fmt.Printf("FAIL: "+format+"\n", args...) }
func (printT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (printT) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }

// Given an account's history, when a command, then the events its real
// handlers append and the outbound events the rules publish, or the
// refusal. In a test, pass the test's t; no service needs to run.
func ExampleDomainFixture() {
	t := printT{} // in a test: func TestRent(t *testing.T)
	f := testkit.NewDomainFixture(t, bankaccount.Domain())
	f.Given("acc-1", bankaccount.Opened("acc-1"), bankaccount.Transacted("salary", 100)).
		When("acc-1", bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: "rent", Amount: -150}).
		ThenEvents(bankaccount.Transacted("rent", -150)).
		ThenOutbound(testkit.Outbound(bankaccount.OutboundAccountOverdrawn, bankaccount.AccountOverdrawnData{AccountID: "acc-1"}))
	f.When("acc-1", bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: "tv", Amount: -951}).
		ThenRefusedWith(commands.StatusRejected, bankaccount.ErrInsufficientFunds)
	fmt.Println("as expected so far")

	// A check that does not hold says what was expected and what
	// happened.
	f.ThenRefusedWith(commands.StatusRejected, bankaccount.ErrClosed)
	// Output:
	// as expected so far
	// FAIL: when RecordTransaction on bankaccount/acc-1 with {"desc":"tv","amount":-951}
	// answered rejected: insufficient funds
	// want rejected matching "bankaccount.closed" (errors.Is), got rejected (bankaccount.insufficient_funds): insufficient funds
}

// Given a paid order, when its shipment is refused, then the saga
// refunds the payment; the deadline it set is gone once it finishes.
func ExampleSagaFixture() {
	t := printT{}
	f := testkit.NewSagaFixture(t, ordersaga.New(ordersaga.Config{ShipWithin: time.Hour}))
	f.Given(testkit.SagaEvent(order.AggregateType, "o1", order.PaymentProcessed, order.PaymentProcessedData{Amount: 900})).
		When(testkit.Answer(ordersaga.StepShip, commands.StatusRejected, "out of stock")).
		ThenCommands(testkit.Sent(ordersaga.StepRefund, order.RefundOrder, order.AggregateType, "o1",
			order.OrderRefundedData{Amount: 900, Reason: "shipment rejected: out of stock"})).
		ThenPending("deadline").
		ThenRunning()
	f.When(testkit.Accepted(ordersaga.StepRefund)).
		ThenFinished(ordersaga.OutcomeRefunded).
		ThenPending()
	fmt.Println("instances:", f.Instances())
	// Output: instances: [o1]
}

// Given a todo's events, then the search model's document, folded by its
// own Apply without Elasticsearch. The fixture stamps its events Epoch,
// Epoch + 1s, and so on.
func ExampleFoldFixture() {
	t := printT{}
	f := testkit.NewFoldFixture(t, searchmodels.TodoSearch{})
	f.Given("t1", todo.TodoCreatedEvent.New(todo.TodoCreatedData{TodoData: todo.TodoData{Title: "buy milk"}}),
		todo.TodoUpdatedEvent.New(todo.TodoData{Title: "buy milk", Completed: true})).
		ThenDocument("t1", searchmodels.TodoDoc{ID: "t1", Title: "buy milk", Completed: true, Sequence: 2,
			CreatedAt: testkit.Epoch(), UpdatedAt: testkit.Epoch().Add(time.Second)})
	fmt.Printf("%s\n", f.Document("t1"))
	// Output: {"id":"t1","title":"buy milk","message":"","completed":true,"deleted":false,"sequence":2,"created_at":"2025-01-01T00:00:00Z","updated_at":"2025-01-01T00:00:01Z"}
}
