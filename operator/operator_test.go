package operator_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/operator"
	"github.com/eventpipe/eventpipe/parking"
)

// TestParkedSkipReleasesTheAggregateWhichResumesWithItsNextEventAndIsRecorded
// parks todo A at its update titled "poison" (sequence 3, with 4 and 5
// behind it) and todo C at 2 (nothing behind), beside the live todos
// consumer. ParkedSkip of A skips sequence 3, applies 4 and 5 and
// unparks A; ParkedSkip of C skips 2 and unparks it; each then resumes
// with its next event, applied by the live consumer. The skipped events
// are kept with who and why, both skips are in OperatorActions and
// Status, and a skip of an aggregate with nothing parked is
// parking.ErrNotParked.
func TestParkedSkipReleasesTheAggregateWhichResumesWithItsNextEventAndIsRecorded(t *testing.T) {
	ctx := context.Background()
	p := rigs.NewParkingPipeline(t)
	p.Todo(t, "a", "a2", "poison", "a4", "a5")
	p.Todo(t, "c", "poison")
	p.Consume(t, false)
	rigs.WaitUntil(t, "a and c parked", func() (bool, string) {
		evs, err := operator.ParkedList(ctx, operator.ParkedListConfig{Process: eventpipe.Process{Catalog: p.Catalog, Endpoints: p.EP}, Projection: "todos"})
		return err == nil && len(evs) == 4, fmt.Sprintf("%d parked, %v", len(evs), err)
	})

	a := eventstore.Ref{Type: todo.AggregateType, ID: "a"}
	res, err := operator.ParkedSkip(ctx, operator.ParkedSkipConfig{Process: eventpipe.Process{Catalog: p.Catalog, Endpoints: p.EP}, Projection: "todos",
		Aggregate: a, Actor: "bob", Reason: "a poison title never applies"})
	if err != nil {
		t.Fatal(err)
	}
	if e := res.Skipped.Envelope; e.Sequence != 3 || e.AggregateID != "a" || res.Skipped.Actor != "bob" || !strings.Contains(res.Skipped.Event.Reason, "poison") {
		t.Fatalf("skipped %+v", res.Skipped)
	}
	if !res.Reapply.Unparked || res.Reapply.Reapplied != 2 || res.Reapply.Applied != 2 {
		t.Fatalf("after the skip: %+v, want unparked with 4 and 5 applied", res.Reapply)
	}
	if rows := p.Rows(t); rows["a"] != "a5@5" {
		t.Fatalf("rows %v, want a at a5@5", rows)
	}
	c := eventstore.Ref{Type: todo.AggregateType, ID: "c"}
	resC, err := operator.ParkedSkip(ctx, operator.ParkedSkipConfig{Process: eventpipe.Process{Catalog: p.Catalog, Endpoints: p.EP}, Projection: "todos",
		Aggregate: c, Actor: "bob", Reason: "same"})
	if err != nil || resC.Skipped.Envelope.Sequence != 2 || !resC.Reapply.Unparked || resC.Reapply.Reapplied != 0 {
		t.Fatalf("skip of c: %+v, %v", resC, err)
	}

	p.Update(t, "a", 5, "a6")
	p.Update(t, "c", 2, "c3")
	rigs.WaitUntil(t, "a and c resume with their next events", func() (bool, string) {
		rows := p.Rows(t)
		return rows["a"] == "a6@6" && rows["c"] == "c3@3", fmt.Sprintf("rows %v", rows)
	})
	if evs, err := operator.ParkedList(ctx, operator.ParkedListConfig{Process: eventpipe.Process{Catalog: p.Catalog, Endpoints: p.EP}}); err != nil || len(evs) != 0 {
		t.Fatalf("still parked: %+v, %v", evs, err)
	}

	var skipped []string
	rows, err := p.DB.Query(ctx, `SELECT aggregate_id || '#' || seq || ' ' || actor || ': ' || reason FROM skipped_events ORDER BY aggregate_id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		skipped = append(skipped, s)
	}
	if want := []string{"a#3 bob: a poison title never applies", "c#2 bob: same"}; strings.Join(skipped, "|") != strings.Join(want, "|") {
		t.Fatalf("skipped_events %v, want %v", skipped, want)
	}

	_, err = operator.ParkedSkip(ctx, operator.ParkedSkipConfig{Process: eventpipe.Process{Catalog: p.Catalog, Endpoints: p.EP}, Projection: "todos",
		Aggregate: a, Actor: "bob", Reason: "again"})
	if !errors.Is(err, parking.ErrNotParked) {
		t.Fatalf("skip of an unparked aggregate: %v, want ErrNotParked", err)
	}

	// The refused skip is recorded too: it was started before it was
	// refused (an action is recorded before it acts).
	actions, err := operator.OperatorActions(ctx, operator.OperatorActionsConfig{Process: eventpipe.Process{Endpoints: p.EP}})
	if err != nil || len(actions) != 3 {
		t.Fatalf("operator actions %+v, %v; want the two skips and the refused one", actions, err)
	}
	if x := actions[0]; x.State != operator.StateDone || !strings.HasPrefix(x.Result, "refused: ") || !strings.Contains(x.Result, "no parked event") {
		t.Errorf("the refused skip recorded as %+v", x)
	}
	actions = actions[1:]
	if x := actions[1]; x.Action != operator.ActionParkedSkip || x.Actor != "bob" || x.Target != "todos todo/a" || x.Reason != "a poison title never applies" ||
		!strings.Contains(x.Result, "skipped todo/a #3") || !strings.Contains(x.Result, "unparked, 2 later events re-applied, 2 applied") {
		t.Fatalf("skip of a recorded as %+v", x)
	}
	_, r := p.TodosGroup(t)
	if r.OperatorActionsErr != nil || len(r.OperatorActions) != 3 || r.OperatorActions[1].ID != actions[0].ID {
		t.Fatalf("status operator actions %+v (%v), want %+v", r.OperatorActions, r.OperatorActionsErr, actions)
	}
}

// TestParkedReapplyIsRecordedAsAnOperatorAction: a parked re-apply
// (with nothing parked) is recorded with its actor and result, as
// "parked reapply"; a row recorded before under its old name, "parked
// replay", reads and is selected as ActionParkedReapply too.
func TestParkedReapplyIsRecordedAsAnOperatorAction(t *testing.T) {
	ctx := context.Background()
	p := rigs.NewParkingPipeline(t)
	if _, err := p.DB.Exec(ctx, `INSERT INTO operator_actions (actor, action, target, reason, result)
		VALUES ('dave', 'parked replay', 'todos', 'before the rename', 'nothing parked')`); err != nil {
		t.Fatal(err)
	}
	if _, err := operator.ParkedReapply(ctx, operator.ParkedReapplyConfig{Process: eventpipe.Process{Catalog: p.Catalog, Endpoints: p.EP}, Projection: "todos", Actor: "carol", Reason: "deployed 1.2"}); err != nil {
		t.Fatal(err)
	}
	var stored string
	if err := p.DB.QueryRow(ctx, `SELECT action FROM operator_actions WHERE actor = 'carol'`).Scan(&stored); err != nil || stored != "parked reapply" {
		t.Fatalf("stored action %q, %v; want \"parked reapply\"", stored, err)
	}
	for _, filter := range []string{"", operator.ActionParkedReapply} {
		actions, err := operator.OperatorActions(ctx, operator.OperatorActionsConfig{Process: eventpipe.Process{Endpoints: p.EP}, Action: filter})
		if err != nil || len(actions) != 2 {
			t.Fatalf("operator actions (action %q) %+v, %v; want 2", filter, actions, err)
		}
		if x := actions[0]; x.Action != operator.ActionParkedReapply || x.Actor != "carol" || x.Target != "todos" || x.Reason != "deployed 1.2" || x.Result != "nothing parked" {
			t.Fatalf("re-apply recorded as %+v", x)
		}
		if x := actions[1]; x.Action != operator.ActionParkedReapply || x.Actor != "dave" {
			t.Fatalf("the row recorded as \"parked replay\" read as %+v", x)
		}
	}
}

// TestParkedSkipRefusesBadRequests: a search model or unknown name, no
// aggregate id, no reason, each an *eventstore.ValidationError.
func TestParkedSkipRefusesBadRequests(t *testing.T) {
	a := eventstore.Ref{Type: todo.AggregateType, ID: "a"}
	for name, cfg := range map[string]operator.ParkedSkipConfig{
		"search model": {Projection: "todos-search", Aggregate: a, Reason: "r"},
		"unknown":      {Projection: "nope", Aggregate: a, Reason: "r"},
		"no id":        {Projection: "todos", Aggregate: eventstore.Ref{Type: todo.AggregateType}, Reason: "r"},
		"no reason":    {Projection: "todos", Aggregate: a, Reason: " "},
	} {
		_, err := operator.ParkedSkip(context.Background(), cfg)
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s: %v, want a ValidationError", name, err)
		}
	}
}

// TestToolConfigsRefuseABadFieldNamingIt: each tool's Config validates
// with its defaults filled (eventpipe.Process) and names the bad field in
// an *eventstore.ValidationError, which the tool returns before it
// connects to anything.
func TestToolConfigsRefuseABadFieldNamingIt(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name, field string
		err         error
	}{
		{"RecalculateConfig", "ID", operator.RecalculateConfig{Type: todo.AggregateType, ID: "a", All: true}.Validate()},
		{"Recalculate", "Type", func() error {
			_, err := operator.Recalculate(ctx, operator.RecalculateConfig{Type: "nope", All: true})
			return err
		}()},
		{"ParkedSkipConfig", "Reason", operator.ParkedSkipConfig{Projection: "todos", Aggregate: eventstore.Ref{Type: todo.AggregateType, ID: "a"}}.Validate()},
		{"ParkedListConfig", "Aggregate", operator.ParkedListConfig{Aggregate: eventstore.Ref{ID: "a"}}.Validate()},
		{"OperatorActions", "Limit", func() error {
			_, err := operator.OperatorActions(ctx, operator.OperatorActionsConfig{Limit: -1})
			return err
		}()},
		{"SagaInstancesConfig", "Saga", operator.SagaInstancesConfig{Saga: "nope"}.Validate()},
		{"SagaAbortConfig", "Reason", operator.SagaAbortConfig{Saga: "transfer", Instance: "t1"}.Validate()},
		{"PoisonRedriveConfig", "Positions", operator.PoisonRedriveConfig{Topic: "poison.eventpipe-commands"}.Validate()},
		{"ReplayConfig", "ReadModel", operator.ReplayConfig{}.Validate()},
		{"StatusConfig", "CommandGroup", operator.StatusConfig{CommandGroup: strings.Repeat("g", 250)}.Validate()},
	} {
		var ve *eventstore.ValidationError
		if !errors.As(c.err, &ve) || ve.Field != c.field {
			t.Errorf("%s: %v, want a ValidationError of field %s", c.name, c.err, c.field)
		}
	}
}
