package todo

import (
	"strings"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
)

// Command types.
const (
	CreateTodo = "CreateTodo" // payload TodoData
	UpdateTodo = "UpdateTodo" // payload TodoData
	DeleteTodo = "DeleteTodo" // payload {}
)

// Domain describes the todo write model: its events and its commands,
// each deciding against the facet's STATE.
func Domain() commands.Domain {
	return commands.FacetDomain(AggregateType, Processor(), map[string]commands.Decide[Todo]{
		CreateTodo: decideCreate, UpdateTodo: decideUpdate, DeleteTodo: decideDelete,
	})
}

// NewFacet returns the todo facet on store (reads of a todo's STATE, as
// the HTTP API does). upcasters may be nil.
func NewFacet(store eventstore.Store, upcasters *eventstore.Upcasters) (*eventstore.Facet[Todo], error) {
	return eventstore.NewFacet(eventstore.FacetConfig[Todo]{Store: store, AggregateType: AggregateType, Processor: Processor(), Upcasters: upcasters})
}

func decodeData(cmd commands.Command) (TodoData, error) {
	var d TodoData
	if err := cmd.DecodePayload(&d); err != nil {
		return d, err
	}
	if strings.TrimSpace(d.Title) == "" {
		return d, &eventstore.ValidationError{Field: "title", Reason: "is empty"}
	}
	if len(d.Title) > MaxTitleLength {
		return d, &eventstore.ValidationError{Field: "title", Reason: "is too long"}
	}
	if len(d.Message) > MaxMessageLength {
		return d, &eventstore.ValidationError{Field: "message", Reason: "is too long"}
	}
	return d, nil
}

func decideCreate(cur eventstore.State[Todo], cmd commands.Command) ([]eventstore.NewEvent, error) {
	d, err := decodeData(cmd)
	if err != nil {
		return nil, err
	}
	if cur.Item.Exists || cur.Item.Deleted {
		return nil, commands.Conflict("todo %s already exists", cmd.AggregateID)
	}
	return []eventstore.NewEvent{eventstore.Event(TodoCreated, d)}, nil
}

func decideUpdate(cur eventstore.State[Todo], cmd commands.Command) ([]eventstore.NewEvent, error) {
	d, err := decodeData(cmd)
	if err != nil {
		return nil, err
	}
	if !cur.Item.Exists {
		return nil, commands.NotFound("todo %s does not exist", cmd.AggregateID)
	}
	return []eventstore.NewEvent{eventstore.Event(TodoUpdated, d)}, nil
}

func decideDelete(cur eventstore.State[Todo], cmd commands.Command) ([]eventstore.NewEvent, error) {
	if err := cmd.DecodePayload(&struct{}{}); err != nil {
		return nil, err
	}
	if !cur.Item.Exists {
		return nil, commands.NotFound("todo %s does not exist", cmd.AggregateID)
	}
	return []eventstore.NewEvent{eventstore.Event(TodoDeleted, struct{}{})}, nil
}
