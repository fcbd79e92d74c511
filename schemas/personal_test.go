package schemas_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/privacy"
	"github.com/eventpipe/eventpipe/schemas"
)

// TestCheckPersonalHoldsTheBuiltInDeclarations: the built-in domains
// declare personal data, and every pointer reaches a string field.
func TestCheckPersonalHoldsTheBuiltInDeclarations(t *testing.T) {
	for _, d := range []commands.Domain{todo.Domain(), bankaccount.Domain(), bankaccount.UniqueDescriptionsDomain()} {
		if len(d.Personal) == 0 {
			t.Errorf("domain %s declares no personal data", d.AggregateType)
		}
		if err := schemas.CheckPersonal(d); err != nil {
			t.Errorf("domain %s: %v", d.AggregateType, err)
		}
	}
}

// TestCheckPersonalRefusesPointersThatMissTheirStrings: a pointer to no
// field, to a boolean, through a string, or on an event type without a
// typed definition is a ValidationError naming the pointer.
func TestCheckPersonalRefusesPointersThatMissTheirStrings(t *testing.T) {
	for name, tc := range map[string]struct {
		event string
		p     privacy.Personal
		want  string
	}{
		"no such field":      {todo.TodoCreated, privacy.Personal{Subject: "/owner", Fields: []string{"/titel"}}, "/titel"},
		"a boolean":          {todo.TodoUpdated, privacy.Personal{Fields: []string{"/completed"}}, "/completed"},
		"through a string":   {todo.TodoCreated, privacy.Personal{Subject: "/owner", Fields: []string{"/title/x"}}, "/title/x"},
		"subject not string": {todo.TodoUpdated, privacy.Personal{Subject: "/completed", Fields: []string{"/title"}}, "/completed"},
		"no typed payload":   {todo.TodoDeleted + "Later", privacy.Personal{SubjectIsAggregate: true, Fields: []string{"/x"}}, "typed definition"},
	} {
		t.Run(name, func(t *testing.T) {
			d := todo.Domain()
			if _, ok := d.EventTypes[tc.event]; !ok {
				d.EventTypes = eventstore.EventTypes{tc.event: {}}
				for k, v := range todo.Domain().EventTypes {
					d.EventTypes[k] = v
				}
			}
			d.Personal = map[string]privacy.Personal{tc.event: tc.p}
			err := schemas.CheckPersonal(d)
			var ve *eventstore.ValidationError
			if !errors.As(err, &ve) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckPersonal = %v, want a ValidationError naming %s", err, tc.want)
			}
		})
	}
	d := todo.Domain()
	d.Personal = map[string]privacy.Personal{"NotAnEvent": {SubjectIsAggregate: true, Fields: []string{"/x"}}}
	if err := d.Validate(); err == nil || !strings.Contains(err.Error(), "NotAnEvent") {
		t.Fatalf("Domain.Validate with an unknown event type = %v", err)
	}
}
