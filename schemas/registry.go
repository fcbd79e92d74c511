// Package schemas keeps event schemas as code and checks them: a
// Registry of every event type a catalogue's domains record, each with
// its current schema version (the last upcaster's target, 1 without one)
// and the JSON shape of its payload, derived from the Go type of its
// typed definition (eventstore.DefineEvent). Check compares the registry
// the code gives with a committed snapshot of it and reports what would
// break the events already stored: an event type removed or renamed, a
// field removed or given another JSON kind, in the same schema version.
// A change that bumps the version with an upcaster is allowed (the
// upcaster turns stored events into the new shape); the snapshot then
// only needs writing again. `eventpipe schemas check` and `eventpipe
// schemas write` run them on the built-in catalogue.
package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
)

// Event is the schema of one event type: the aggregate type that records
// it, its current schema version and its payload's shape. Payload is nil
// for an event type registered without a typed definition (its shape is
// not known, and not checked).
type Event struct {
	Type      string `json:"type"`
	Aggregate string `json:"aggregate"`
	Version   int    `json:"version"`
	Payload   *Shape `json:"payload"`
}

// Registry is the schema of every event type, sorted by type: what the
// code says (FromDomains) or what a snapshot holds (Parse).
type Registry struct {
	Events []Event `json:"events"`
}

// FromDomains returns the registry of the event types of domains, with
// the versions upcasters give them (nil: every type at version 1). An
// event type recorded by two domains is a *eventstore.ValidationError
// (the store could not tell their payloads apart), and so is an
// upcaster chain with a gap (Upcasters.Validate).
func FromDomains(domains []commands.Domain, upcasters *eventstore.Upcasters) (Registry, error) {
	if err := upcasters.Validate(); err != nil {
		return Registry{}, fmt.Errorf("schemas: %w", err)
	}
	byType := map[string]Event{}
	for _, d := range domains {
		defs := map[string]eventstore.EventDefinition{}
		for _, def := range d.Events {
			defs[def.Name()] = def
		}
		for _, t := range d.EventTypes.Names() {
			if other, dup := byType[t]; dup {
				return Registry{}, fmt.Errorf("schemas: %w", &eventstore.ValidationError{Field: "event_type",
					Reason: fmt.Sprintf("%s is an event of %s and of %s", t, other.Aggregate, d.AggregateType)})
			}
			e := Event{Type: t, Aggregate: d.AggregateType, Version: upcasters.Current(t)}
			if def, ok := defs[t]; ok {
				s := ShapeOf(def.PayloadType())
				e.Payload = &s
			}
			byType[t] = e
		}
	}
	r := Registry{Events: make([]Event, 0, len(byType))}
	for _, e := range byType {
		r.Events = append(r.Events, e)
	}
	sort.Slice(r.Events, func(i, j int) bool { return r.Events[i].Type < r.Events[j].Type })
	return r, nil
}

// Marshal returns r as the snapshot file holds it: indented JSON, one
// event type after the other, ending in a newline.
func (r Registry) Marshal() ([]byte, error) {
	if r.Events == nil {
		r.Events = []Event{}
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("schemas: encode: %w", err)
	}
	return append(b, '\n'), nil
}

// Parse reads a snapshot written by Marshal. Bytes that are not one, or
// an event type listed twice, are a *eventstore.DecodeError.
func Parse(data []byte) (Registry, error) {
	var r Registry
	if err := eventstore.DecodeStrict("event schemas", data, &r); err != nil {
		return Registry{}, err
	}
	seen := map[string]bool{}
	for i, e := range r.Events {
		if e.Type == "" || e.Version < 1 || seen[e.Type] {
			return Registry{}, &eventstore.DecodeError{What: "event schemas", Field: fmt.Sprintf("events[%d]", i),
				Reason: fmt.Sprintf("type %q, version %d: want a type listed once, at a version ≥ 1", e.Type, e.Version)}
		}
		seen[e.Type] = true
	}
	return r, nil
}

// Equal reports whether r and o hold the same schemas.
func (r Registry) Equal(o Registry) bool {
	a, errA := r.Marshal()
	b, errB := o.Marshal()
	return errA == nil && errB == nil && bytes.Equal(a, b)
}

// event returns r's schema of event type t.
func (r Registry) event(t string) (Event, bool) {
	for _, e := range r.Events {
		if e.Type == t {
			return e, true
		}
	}
	return Event{}, false
}
