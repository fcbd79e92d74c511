package commands

import (
	"fmt"
	"reflect"

	"github.com/eventpipe/eventpipe/eventstore"
)

// CommandDefinition is what every CommandDef is, whatever its payload
// type: a command type's name and the Go type of its payload.
type CommandDefinition interface {
	Name() string
	PayloadType() reflect.Type
}

// CommandDef is a typed command definition: a command type and the Go
// type P its payload is, declared once by the domain that handles it,
//
//	var CreateTodoCommand = commands.DefineCommand[TodoData]("CreateTodo")
//
// so that a decision registered for it (OnCommand) receives a P, and a
// sender that builds one (New) gives a P: a payload of another type fails
// to compile. The command envelope and its JSON are unchanged, so clients
// in any language send the same messages. Safe for concurrent use.
type CommandDef[P any] struct {
	name string
}

// DefineCommand returns the definition of command type name with payload
// P. The name is checked where the definition is registered
// (Domain.Validate).
func DefineCommand[P any](name string) CommandDef[P] { return CommandDef[P]{name: name} }

// Name returns the command type.
func (d CommandDef[P]) Name() string { return d.name }

// PayloadType returns the reflect.Type of P.
func (d CommandDef[P]) PayloadType() reflect.Type { return reflect.TypeFor[P]() }

// String returns the command type and its payload type:
// "CreateTodo(todo.TodoData)".
func (d CommandDef[P]) String() string { return fmt.Sprintf("%s(%v)", d.name, d.PayloadType()) }

// New returns a command of this type to aggregate aggregateType/
// aggregateID with payload p (NewJSON: a fresh id, now, the correlation
// id the command's own). A payload JSON cannot encode is a
// *eventstore.ValidationError on "payload".
func (d CommandDef[P]) New(aggregateType, aggregateID string, p P) (Command, error) {
	return NewJSON(d.name, aggregateType, aggregateID, p)
}

// Decode returns cmd's payload as P, decoded strictly (Command.DecodePayload:
// an unknown field is refused). A command of another type, or a payload
// that does not decode, is a *eventstore.ValidationError: the command is
// invalid.
func (d CommandDef[P]) Decode(cmd Command) (P, error) {
	var p P
	if cmd.Type != d.name {
		return p, &eventstore.ValidationError{Field: "type", Reason: fmt.Sprintf("is %q, want %q", cmd.Type, d.name)}
	}
	err := cmd.DecodePayload(&p)
	return p, err
}

// Decider is the decision of one defined command type, built by
// OnCommand from the definition, so that the decision's payload type is
// the definition's. FacetDomain registers it.
type Decider[S any] struct {
	def    CommandDefinition
	decide Decide[S]
}

// Definition returns the definition the decider was built from.
func (d Decider[S]) Definition() CommandDefinition { return d.def }

// Decide runs the decision on cmd against cur, without a store: the
// payload decoded, then the decision (a test of a domain's decisions
// calls it directly).
func (d Decider[S]) Decide(cur eventstore.State[S], cmd Command) ([]eventstore.NewEvent, error) {
	return d.decide(cur, cmd)
}

// OnCommand is the decision of def's commands: fn gets the aggregate's
// current state, the command, and its payload decoded strictly as P (a
// payload that does not decode, or has an unknown field, answers the
// command invalid before fn runs). Everything said of Decide holds: fn
// must be pure.
func OnCommand[S, P any](def CommandDef[P], fn func(cur eventstore.State[S], cmd Command, p P) ([]eventstore.NewEvent, error)) Decider[S] {
	return Decider[S]{def: def, decide: func(cur eventstore.State[S], cmd Command) ([]eventstore.NewEvent, error) {
		p, err := def.Decode(cmd)
		if err != nil {
			return nil, err
		}
		return fn(cur, cmd, p)
	}}
}
