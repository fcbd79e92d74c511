package readmodels_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/eventpipe/eventpipe/domains/order"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/readmodels"
)

func (w *world) appendEvents(t *testing.T, ref eventstore.Ref, events ...eventstore.NewEvent) []eventstore.Envelope {
	t.Helper()
	req, err := eventstore.Prepare(ref, 0, eventstore.Change{Events: events}, eventstore.Schema{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.store.Append(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res.Events
}

func (w *world) apply(t *testing.T, p projections.Projection, events []eventstore.Envelope) {
	t.Helper()
	a, err := projections.NewApplier(projections.ApplierConfig{DB: w.db, Store: w.store, Projection: p})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Apply(context.Background(), events); err != nil {
		t.Fatal(err)
	}
}

// TestOrderSummaryFollowsTheLifecycleIncludingARefund projects an order
// placed, paid, shipped, delivered and partly refunded (the compensating
// event): like the order itself it stays delivered until all that was paid
// is paid back, then it is refunded.
func TestOrderSummaryFollowsTheLifecycleIncludingARefund(t *testing.T) {
	w := newWorld(t)
	evs := w.appendEvents(t, eventstore.Ref{Type: order.AggregateType, ID: "o-1"},
		eventstore.Event(order.OrderPlaced, order.OrderPlacedData{Customer: "ada", Total: 120}),
		eventstore.Event(order.PaymentProcessed, order.PaymentProcessedData{Amount: 120}),
		eventstore.Event(order.OrderShipped, order.OrderShippedData{TrackingNumber: "TRK-9"}),
		eventstore.Event(order.OrderDelivered, struct{}{}),
		eventstore.Event(order.OrderRefunded, order.OrderRefundedData{Amount: 20, Reason: "dented"}),
	)
	w.apply(t, readmodels.Orders{}, append(evs, evs...))
	var status, tracking string
	var total, paid, refunded, version, applied int64
	var deliveredSet bool
	err := w.db.QueryRow(context.Background(), `SELECT status, tracking_number, total, paid, refunded, version, apply_count, delivered_at IS NOT NULL
		FROM orders WHERE order_id = 'o-1'`).Scan(&status, &tracking, &total, &paid, &refunded, &version, &applied, &deliveredSet)
	if err != nil {
		t.Fatal(err)
	}
	if status != "delivered" || tracking != "TRK-9" || total != 120 || paid != 120 || refunded != 20 || version != 5 || applied != 5 || !deliveredSet {
		t.Fatalf("order row: %s %s total=%d paid=%d refunded=%d v%d applied=%d delivered=%v", status, tracking, total, paid, refunded, version, applied, deliveredSet)
	}
	req, err := eventstore.Prepare(eventstore.Ref{Type: order.AggregateType, ID: "o-1"}, 5, eventstore.Change{Events: []eventstore.NewEvent{
		eventstore.Event(order.OrderRefunded, order.OrderRefundedData{Amount: 100, Reason: "lost"})}}, eventstore.Schema{})
	if err != nil {
		t.Fatal(err)
	}
	rest, err := w.store.Append(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	w.apply(t, readmodels.Orders{}, rest.Events)
	if err := w.db.QueryRow(context.Background(), `SELECT status, refunded FROM orders WHERE order_id = 'o-1'`).Scan(&status, &refunded); err != nil {
		t.Fatal(err)
	}
	if status != "refunded" || refunded != 120 {
		t.Fatalf("after refunding the rest: %s refunded=%d, want refunded 120", status, refunded)
	}
}

// TestTodosListPagesLiveTodosInIDOrder projects 25 todos, updates one and
// deletes two, then pages through ListTodos 10 at a time, and through one
// owner's 5 at a time.
func TestTodosListPagesLiveTodosInIDOrder(t *testing.T) {
	w := newWorld(t)
	var all []eventstore.Envelope
	for i := range 25 {
		ref := eventstore.Ref{Type: todo.AggregateType, ID: fmt.Sprintf("t-%02d", i)}
		owner := []string{"alice", "bob"}[i%2]
		evs := []eventstore.NewEvent{todo.TodoCreatedEvent.New(todo.TodoCreatedData{TodoData: todo.TodoData{Title: fmt.Sprint("task ", i)}, Owner: owner})}
		switch i {
		case 3:
			evs = append(evs, eventstore.Event(todo.TodoUpdated, todo.TodoData{Title: "done", Completed: true}))
		case 4, 17:
			evs = append(evs, eventstore.Event(todo.TodoDeleted, struct{}{}))
		}
		all = append(all, w.appendEvents(t, ref, evs...)...)
	}
	w.apply(t, readmodels.Todos{}, all)
	var got []readmodels.Todo
	after := ""
	for pages := 0; ; pages++ {
		page, err := readmodels.ListTodos(context.Background(), w.db, readmodels.TodoList{After: after, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page...)
		if len(page) < 10 {
			break
		}
		after = page[len(page)-1].ID
	}
	if len(got) != 23 {
		t.Fatalf("listed %d todos, want 23 live ones", len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i].ID <= got[i-1].ID || got[i].ID == "t-04" || got[i].ID == "t-17" {
			t.Fatalf("listing %v is out of order or holds a deleted todo", got)
		}
	}
	if got[3].ID != "t-03" || got[3].Title != "done" || !got[3].Completed || got[3].Version != 2 {
		t.Fatalf("updated todo listed as %+v", got[3])
	}
	if _, err := readmodels.ListTodos(context.Background(), w.db, readmodels.TodoList{}); err == nil {
		t.Fatal("limit 0 was accepted")
	}
	var hers []string
	after = ""
	for {
		page, err := readmodels.ListTodos(context.Background(), w.db, readmodels.TodoList{After: after, Limit: 5, Owner: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		for _, td := range page {
			if td.Owner != "alice" {
				t.Fatalf("alice's listing holds %+v", td)
			}
			hers = append(hers, td.ID)
		}
		if len(page) < 5 {
			break
		}
		after = page[len(page)-1].ID
	}
	if len(hers) != 12 || hers[0] != "t-00" || hers[2] != "t-06" { // the even ones but the deleted t-04
		t.Fatalf("alice's todos: %v; want the 12 live even ones", hers)
	}
}
