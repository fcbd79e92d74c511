package searchmodels_test

import (
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/domains/order"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/projections/searchmodels"
	"github.com/eventpipe/eventpipe/testkit"
)

// The search models' documents folded by the kit through their own
// Apply, without Elasticsearch.

// at is the time the fold fixture stamps its n-th event with.
func at(n int) time.Time { return testkit.Epoch().Add(time.Duration(n) * time.Second) }

func ptr(t time.Time) *time.Time { return &t }

func TestFixtureTodoSearchFoldsATodosLifeIntoOneDocument(t *testing.T) {
	f := testkit.NewFoldFixture(t, searchmodels.TodoSearch{})
	f.Given("t1", eventstore.Event(todo.TodoCreated, todo.TodoData{Title: "buy milk", Message: "oat"})).
		ThenDocument("t1", searchmodels.TodoDoc{ID: "t1", Title: "buy milk", Message: "oat", Sequence: 1, CreatedAt: at(0), UpdatedAt: at(0)})
	f.Given("t1", eventstore.Event(todo.TodoUpdated, todo.TodoData{Title: "buy milk", Message: "oat", Completed: true}),
		eventstore.Event(todo.TodoDeleted, struct{}{})).
		Given("t2", eventstore.Event(todo.TodoCreated, todo.TodoData{Title: "call mum"})).
		ThenDocuments(map[string]any{
			// A deleted todo keeps its document, marked deleted.
			"t1": searchmodels.TodoDoc{ID: "t1", Title: "buy milk", Message: "oat", Completed: true, Deleted: true, Sequence: 3, CreatedAt: at(0), UpdatedAt: at(2)},
			"t2": `{"id":"t2","title":"call mum","message":"","completed":false,"deleted":false,"sequence":1,
				"created_at":"2025-01-01T00:00:03Z","updated_at":"2025-01-01T00:00:03Z"}`,
		})
}

func TestFixtureTodoSearchRefusesWhatItCannotApply(t *testing.T) {
	// An event type it does not apply: permanent, the event is parked.
	testkit.NewFoldFixture(t, searchmodels.TodoSearch{}).
		Given("t1", eventstore.Event(todo.TodoCreated, todo.TodoData{Title: "a"}), eventstore.Event("TodoArchived", struct{}{})).
		ThenFails(`"TodoArchived" is not applied by this read model`, true)
	// A change of a todo never created: a defect gap repair rules out,
	// left to retries.
	testkit.NewFoldFixture(t, searchmodels.TodoSearch{}).
		Given("t1", eventstore.Event(todo.TodoDeleted, struct{}{})).
		ThenFails("no document (its creating event was never applied)", false)
}

func TestFixtureTodoSearchSkipsDuplicatesAndOtherAggregates(t *testing.T) {
	// The events a command appends, through the real todo handlers,
	// folded as delivered: one of them twice, beside an order's event.
	d := testkit.NewDomainFixture(t, todo.Domain())
	d.When("t1", todo.CreateTodo, todo.TodoData{Title: "buy milk"}).ThenAccepted()
	d.When("t1", todo.UpdateTodo, todo.TodoData{Title: "buy oat milk"}).ThenAccepted()
	log := d.Log("t1")
	other := eventstore.Envelope{EventID: eventstore.NewEventID(time.Now()), AggregateType: order.AggregateType, AggregateID: "o1",
		Sequence: 1, EventType: order.OrderPlaced, SchemaVersion: 1, OccurredAt: time.Now(), Payload: []byte(`{"customer":"c","total":1}`)}

	f := testkit.NewFoldFixture(t, searchmodels.TodoSearch{}).GivenEnvelopes(log[0], other, log[0], log[1])
	f.ThenDocument("t1", searchmodels.TodoDoc{ID: "t1", Title: "buy oat milk", Sequence: 2,
		CreatedAt: log[0].OccurredAt, UpdatedAt: log[1].OccurredAt}).
		ThenNoDocument("o1")
	if f.Skipped() != 2 {
		t.Errorf("skipped %d events, want 2 (a duplicate and an order's)", f.Skipped())
	}
}

func TestFixtureOrderSearchFollowsTheOrderAndItsPartialRefund(t *testing.T) {
	testkit.NewFoldFixture(t, searchmodels.OrderSearch{}).
		Given("o1",
			eventstore.Event(order.OrderPlaced, order.OrderPlacedData{Customer: "c1", Total: 4500}),
			eventstore.Event(order.PaymentProcessed, order.PaymentProcessedData{Amount: 4500}),
			eventstore.Event(order.OrderShipped, order.OrderShippedData{TrackingNumber: "Z1"}),
			eventstore.Event(order.OrderRefunded, order.OrderRefundedData{Amount: 1000, Reason: "dented"})).
		ThenDocument("o1", searchmodels.OrderDoc{ID: "o1", Customer: "c1", Status: order.StatusShipped, Total: 4500, Paid: 4500, Refunded: 1000,
			TrackingNumber: "Z1", PlacedAt: at(0), PaidAt: ptr(at(1)), ShippedAt: ptr(at(2)), RefundedAt: ptr(at(3)), UpdatedAt: at(3), Sequence: 4})
}
