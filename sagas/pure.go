package sagas

import (
	"encoding/json"
	"time"
)

// Pure is the pure core of a saga definition, as the Runner drives it
// but without Postgres or Kafka: which instance an input concerns, an
// instance's initial state, and one input handled on a state (Handle, or
// Abort for a KindAbort input) with the Effects the Runner gives it.
// States are JSON, as the Runner stores them. Test kits (package
// testkit) step a saga through it; the Runner handles each input with
// the same code.
type Pure struct{ c compiled }

// PureOf validates d and returns its pure core.
func PureOf(d Definition) (Pure, error) {
	c, err := d.compile()
	if err != nil {
		return Pure{}, err
	}
	return Pure{c: c}, nil
}

// Name is the saga's name.
func (p Pure) Name() string { return p.c.name }

// Route names the instance an event or outbound input concerns ("" for
// none: the Runner skips the input) and whether it may start it.
func (p Pure) Route(in Input) (instance string, start bool) { return p.c.route(in) }

// Initial is the JSON state of a new instance.
func (p Pure) Initial(instance string) (json.RawMessage, error) { return p.c.initial(instance) }

// Handle handles in for instance, whose JSON state is state, at now: it
// returns the next state and what the saga recorded in its Effects, or
// the error the Runner fails the input with (the saga's own, or
// fx.Err()'s *InvalidEffectError).
func (p Pure) Handle(instance string, state json.RawMessage, in Input, now time.Time) (json.RawMessage, *Effects, error) {
	return handleInput(p.c, instance, state, in, now)
}

// handleInput is one input handled on an instance's state: what the
// Runner does inside the instance's transaction, between reading the
// state and writing the next one with its timeouts and effects.
func handleInput(c compiled, instance string, state []byte, in Input, now time.Time) ([]byte, *Effects, error) {
	fx := NewEffects(c.name, instance, in.CorrelationID, now)
	next, err := c.handle(state, in, fx)
	if err != nil {
		return nil, fx, err
	}
	if err := fx.Err(); err != nil {
		return nil, fx, err
	}
	return next, fx, nil
}
