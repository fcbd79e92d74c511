package eventstore

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
)

// EventDefinition is what every EventDef is, whatever its payload type:
// an event type's name and the Go type of its payload. A schema registry
// reads it (eventpipe.Catalog.EventSchemas).
type EventDefinition interface {
	Name() string
	PayloadType() reflect.Type
}

// EventDef is a typed event definition: an event type and the Go type P
// its payload is, declared once by the domain that records it,
//
//	var TodoCreatedEvent = eventstore.DefineEvent[TodoData]("TodoCreated")
//
// and used everywhere the pair matters, so that a payload of another type
// fails to compile: New builds the event to append, OnEvent (and its
// siblings) registers the rule that applies it, Decode reads it back. The
// wire format is unchanged: the envelope carries the name and P encoded
// as JSON. The zero EventDef has no name. Safe for concurrent use.
type EventDef[P any] struct {
	name string
}

// DefineEvent returns the definition of event type name with payload P.
// The name is checked where the definition is registered (a processor's
// rules, see FacetConfig.Validate), as any event type's is.
func DefineEvent[P any](name string) EventDef[P] { return EventDef[P]{name: name} }

// Name returns the event type.
func (d EventDef[P]) Name() string { return d.name }

// PayloadType returns the reflect.Type of P.
func (d EventDef[P]) PayloadType() reflect.Type { return reflect.TypeFor[P]() }

// String returns the event type and its payload type, as in logs:
// "TodoCreated(todo.TodoData)".
func (d EventDef[P]) String() string { return fmt.Sprintf("%s(%v)", d.name, d.PayloadType()) }

// New returns the event of this type with payload p, encoded as JSON. It
// panics if p cannot be encoded (a payload type that JSON cannot hold is
// a programming error, as for Event).
func (d EventDef[P]) New(p P) NewEvent {
	b, err := json.Marshal(p)
	if err != nil {
		panic(fmt.Sprintf("eventstore: %s.New: %v", d, err))
	}
	return NewEvent{Type: d.name, Payload: b}
}

// Decode returns e's payload as P, decoded leniently (as
// Envelope.DecodePayload). An event of another type is a
// *ValidationError on "event_type"; a payload that does not decode into P
// a *ValidationError on "payload". Both are permanent.
func (d EventDef[P]) Decode(e Envelope) (P, error) {
	var p P
	if e.EventType != d.name {
		return p, &ValidationError{Field: "event_type", Reason: fmt.Sprintf("is %q, want %q", e.EventType, d.name)}
	}
	if err := e.DecodePayload(&p); err != nil {
		return p, &ValidationError{Field: "payload", Reason: err.Error()}
	}
	return p, nil
}

// EventRule is the rule of one defined event type, built from its
// definition by OnEvent, OnEventEnvelope, OnHistoryEvent or OnFoldEvent,
// so that the rule's payload type is the definition's. NewProcessor and
// Processor.With register it.
type EventRule[S any] struct {
	def     EventDefinition
	rule    Rule[S]
	history HistoryRule[S]
	fold    FoldRule[S]
}

// Definition returns the definition the rule was built from.
func (r EventRule[S]) Definition() EventDefinition { return r.def }

// OnEvent is the rule that applies def's events with fn, which receives
// the payload decoded as P (leniently; a payload that does not decode is
// a *ValidationError on "payload").
func OnEvent[S, P any](def EventDef[P], fn func(state S, ev P, out *Outbox) (S, error)) EventRule[S] {
	return EventRule[S]{def: def, rule: On(fn)}
}

// OnEventEnvelope is OnEvent for a rule that also needs the envelope
// (the aggregate's id, the sequence, the time).
func OnEventEnvelope[S, P any](def EventDef[P], fn func(state S, env Envelope, ev P, out *Outbox) (S, error)) EventRule[S] {
	return EventRule[S]{def: def, rule: func(state S, env Envelope, out *Outbox) (S, error) {
		ev, err := def.Decode(env)
		if err != nil {
			return state, err
		}
		return fn(state, env, ev, out)
	}}
}

// OnHistoryEvent is the history rule (see HistoryRule) of def's events.
func OnHistoryEvent[S, P any](def EventDef[P], fn func(state S, ev P, h History, out *Outbox) (S, error)) EventRule[S] {
	return EventRule[S]{def: def, history: OnHistory(fn)}
}

// OnFoldEvent is the fold rule (see FoldRule) of def's events: fn gets
// fold's accumulator after the events before ev.
func OnFoldEvent[S, P, A any](def EventDef[P], fold Fold[A], fn func(state S, ev P, acc A, out *Outbox) (S, error)) EventRule[S] {
	return EventRule[S]{def: def, fold: OnFold(fold, fn)}
}

// NewProcessor returns the processor with initial state initial and the
// rules rs, each under its definition's event type (a later rule of the
// same type replaces an earlier one). Its Events are the rules'
// definitions.
func NewProcessor[S any](initial func() S, rs ...EventRule[S]) Processor[S] {
	return Processor[S]{Initial: initial}.With(rs...)
}

// With returns a copy of p with the rules rs added, each under its
// definition's event type, replacing the rule p had for that type in
// Rules, HistoryRules or FoldRules. p is not modified.
func (p Processor[S]) With(rs ...EventRule[S]) Processor[S] {
	out := Processor[S]{Initial: p.Initial, Rules: maps.Clone(p.Rules), HistoryRules: maps.Clone(p.HistoryRules),
		FoldRules: maps.Clone(p.FoldRules), defs: maps.Clone(p.defs)}
	for _, r := range rs {
		t := r.def.Name()
		delete(out.Rules, t)
		delete(out.HistoryRules, t)
		delete(out.FoldRules, t)
		switch {
		case r.rule != nil:
			out.Rules = setKey(out.Rules, t, r.rule)
		case r.history != nil:
			out.HistoryRules = setKey(out.HistoryRules, t, r.history)
		case r.fold != nil:
			out.FoldRules = setKey(out.FoldRules, t, r.fold)
		}
		out.defs = setKey(out.defs, t, r.def)
	}
	return out
}

// Events returns the definitions of the event types whose rules were
// registered from one (NewProcessor, With), by event type. An event type
// whose rule was put in Rules, HistoryRules or FoldRules by name has
// none.
func (p Processor[S]) Events() map[string]EventDefinition { return maps.Clone(p.defs) }

func setKey[V any](m map[string]V, k string, v V) map[string]V {
	if m == nil {
		m = map[string]V{}
	}
	m[k] = v
	return m
}
