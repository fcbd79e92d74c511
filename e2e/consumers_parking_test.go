package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/operator"
	"github.com/eventpipe/eventpipe/parking"
)

// TestConsumersParkAPermanentlyFailingAggregateAndStatusCountsIt runs,
// through eventpipe.NewConsumers with its defaults, a todos read model
// that refuses an update titled "poison": todo A is refused at sequence
// 3 and parked there with 4 and 5 behind it, todo C at 2, while todo B is
// applied to its end. ParkedList shows the four parked events with their
// reasons, nothing went to the poison topic, and Status counts 4 parked
// events of 2 aggregates for the todos read model.
func TestConsumersParkAPermanentlyFailingAggregateAndStatusCountsIt(t *testing.T) {
	p := rigs.NewParkingPipeline(t)
	p.Todo(t, "a", "a2", "poison", "a4", "a5")
	p.Todo(t, "b", "b2", "b3")
	p.Todo(t, "c", "poison")
	p.Consume(t, false)

	list := func() []parking.Event {
		t.Helper()
		evs, err := operator.ParkedList(context.Background(), operator.ParkedListConfig{Process: eventpipe.Process{Catalog: p.Catalog, Endpoints: p.EP}, Projection: "todos"})
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	var parked []string
	rigs.WaitUntil(t, "b applied to its end, a and c parked", func() (bool, string) {
		parked = parked[:0]
		for _, ev := range list() {
			parked = append(parked, fmt.Sprintf("%s#%d", ev.Envelope.AggregateID, ev.Envelope.Sequence))
		}
		rows := p.Rows(t)
		return rows["b"] == "b3@3" && len(parked) == 4, fmt.Sprintf("rows %v, parked %v", rows, parked)
	})
	if want := []string{"a#3", "a#4", "a#5", "c#2"}; !slices.Equal(parked, want) {
		t.Fatalf("parked %v, want %v", parked, want)
	}
	evs := list()
	for i, want := range []string{"poison", parking.BehindReason(3), parking.BehindReason(3), "poison"} {
		if !strings.Contains(evs[i].Reason, want) || evs[i].Consumer != "todos" {
			t.Errorf("parked event %d: consumer %s, reason %q, want todos and %q", i, evs[i].Consumer, evs[i].Reason, want)
		}
	}
	if rows := p.Rows(t); rows["a"] != "a2@2" || rows["c"] != "c-created@1" {
		t.Fatalf("rows %v, want a at a2@2 and c at c-created@1 (nothing applied past a parked event)", rows)
	}

	g, r := p.TodosGroup(t)
	if want := (parking.Counts{Events: 4, Aggregates: 2}); g.Parked != want || g.Poisoned != 0 || r.ParkedErr != nil {
		t.Fatalf("todos group %+v (parked error %v), want %+v parked and nothing poisoned", g, r.ParkedErr, want)
	}
	if len(r.Errors) != 0 {
		t.Fatalf("status errors %v", r.Errors)
	}
	for _, other := range r.Groups {
		if other.Projection == "" && other.Parked != (parking.Counts{}) {
			t.Fatalf("group %+v of no projection has parked events", other)
		}
	}
}

// TestConsumersWithNoParkingPoisonInsteadOfParking runs the same
// refusing read model with ConsumersConfig.NoParking: todo A's refused
// update goes to the poison topic, and so does its later update (its gap
// repair reads the refused event back and fails again), while todo B is
// applied; nothing is parked, and Status says so.
func TestConsumersWithNoParkingPoisonInsteadOfParking(t *testing.T) {
	p := rigs.NewParkingPipeline(t)
	p.Todo(t, "a", "a2", "poison", "a4")
	p.Todo(t, "b", "b2")
	p.Consume(t, true)

	rigs.WaitUntil(t, "b applied, a's refused event and the one after it poisoned", func() (bool, string) {
		g, _ := p.TodosGroup(t)
		rows := p.Rows(t)
		return rows["b"] == "b2@2" && g.Poisoned == 2, fmt.Sprintf("rows %v, group %+v", rows, g)
	})
	if rows := p.Rows(t); rows["a"] != "a2@2" {
		t.Fatalf("rows %v, want a at a2@2", rows)
	}
	g, r := p.TodosGroup(t)
	if evs, err := operator.ParkedList(context.Background(), operator.ParkedListConfig{Process: eventpipe.Process{Catalog: p.Catalog, Endpoints: p.EP}}); err != nil || len(evs) != 0 {
		t.Fatalf("ParkedList = %+v, %v; want nothing parked", evs, err)
	}
	if g.Parked != (parking.Counts{}) || r.ParkedErr != nil {
		t.Fatalf("todos group %+v (parked error %v), want nothing parked", g, r.ParkedErr)
	}
}
