package schemas

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/privacy"
)

// CheckPersonal checks d's declarations of personal data (d.Personal,
// d.PersonalCommands) against its event and command types' payloads:
// each declared type has a typed definition, and every pointer of its
// declaration (the subject's and the personal fields') reaches a string
// field of the payload's JSON shape. The error is a
// *eventstore.ValidationError naming the domain, the type and the
// pointer.
func CheckPersonal(d commands.Domain) error {
	events := map[string]reflect.Type{}
	for _, e := range d.Events {
		events[e.Name()] = e.PayloadType()
	}
	if err := checkDeclared(d.AggregateType, "event", d.Personal, events); err != nil {
		return err
	}
	cmds := map[string]reflect.Type{}
	for _, c := range d.Commands {
		cmds[c.Name()] = c.PayloadType()
	}
	return checkDeclared(d.AggregateType, "command", d.PersonalCommands, cmds)
}

// checkDeclared checks the declarations of a domain's event or command
// types (kind) against their payload types.
func checkDeclared(aggregateType, kind string, declared map[string]privacy.Personal, payloads map[string]reflect.Type) error {
	for _, t := range slices.Sorted(maps.Keys(declared)) {
		p := declared[t]
		bad := func(field, reason string) error {
			return fmt.Errorf("schemas: domain %s: personal data of %s: %w", aggregateType, t,
				&eventstore.ValidationError{Field: field, Reason: reason})
		}
		typ, ok := payloads[t]
		if !ok {
			return bad("Personal", "the "+kind+" type has no typed definition, so its payload's fields cannot be checked")
		}
		shape := ShapeOf(typ)
		ptrs := slices.Clone(p.Fields)
		if p.Subject != "" {
			ptrs = append(ptrs, p.Subject)
		}
		for _, ptr := range ptrs {
			kind, err := kindAt(shape, ptr)
			if err != nil {
				return bad(ptr, err.Error())
			}
			if kind != KindString {
				return bad(ptr, fmt.Sprintf("is a %s field of %v, want a string", kind, typ))
			}
		}
	}
	return nil
}

// kindAt is the kind of the field a JSON pointer reaches through the
// objects of s.
func kindAt(s Shape, ptr string) (Kind, error) {
	if !strings.HasPrefix(ptr, "/") {
		return "", fmt.Errorf("%q is not a JSON pointer", ptr)
	}
	cur := s
	for _, part := range strings.Split(ptr[1:], "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		if cur.Kind != KindObject {
			return "", fmt.Errorf("reaches a %s before %q", cur.Kind, part)
		}
		f, ok := cur.field(part)
		if !ok {
			return "", fmt.Errorf("names no field of the payload (%q is not among %v)", part, fieldNames(cur))
		}
		cur = f.Shape
	}
	return cur.Kind, nil
}

func fieldNames(s Shape) []string {
	names := make([]string, len(s.Fields))
	for i, f := range s.Fields {
		names[i] = f.Name
	}
	return names
}
