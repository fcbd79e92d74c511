// Package todo is an example todo domain: a todo is created, updated
// and deleted, each change an event (Todo.Created, Todo.Updated,
// Todo.Deleted); a delete is an event too, so the log keeps everything.
package todo

import (
	"encoding/json"
	"strings"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
)

// AggregateType of todos.
const AggregateType = "todo"

// Event types.
const (
	Created = "Todo.Created"
	Updated = "Todo.Updated"
	Deleted = "Todo.Deleted"
)

// Command types.
const (
	Create = "CreateTodo"
	Update = "UpdateTodo"
	Delete = "DeleteTodo"
)

// MaxTitleLength bounds a title, in bytes.
const MaxTitleLength = 1000

// Todo is the state of one todo.
type Todo struct {
	Title     string `json:"title"`
	Completed bool   `json:"completed"`
	Exists    bool   `json:"exists"`  // created and not deleted
	Deleted   bool   `json:"deleted"` // deleted (ids are not reused)
}

// Fields is the payload of Todo.Created and Todo.Updated, and of the
// create and update commands.
type Fields struct {
	Title     string `json:"title"`
	Completed bool   `json:"completed"`
}

// Processor holds the todo rules.
var Processor = eventstore.Processor[Todo]{
	Initial: func() Todo { return Todo{} },
	Rules: map[string]eventstore.Rule[Todo]{
		Created: eventstore.On(func(s Todo, f Fields, _ *eventstore.Outbox) (Todo, error) {
			if s.Exists || s.Deleted {
				return s, eventstore.Reject("todo already exists")
			}
			s.Title, s.Completed, s.Exists = f.Title, f.Completed, true
			return s, nil
		}),
		Updated: eventstore.On(func(s Todo, f Fields, _ *eventstore.Outbox) (Todo, error) {
			if !s.Exists {
				return s, eventstore.Reject("todo does not exist")
			}
			s.Title, s.Completed = f.Title, f.Completed
			return s, nil
		}),
		Deleted: eventstore.On(func(s Todo, _ struct{}, _ *eventstore.Outbox) (Todo, error) {
			if !s.Exists {
				return s, eventstore.Reject("todo does not exist")
			}
			s.Exists, s.Deleted = false, true
			return s, nil
		}),
	},
}

func decodeFields(cmd commands.Command) (Fields, error) {
	var f Fields
	dec := json.NewDecoder(strings.NewReader(string(cmd.Payload)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return f, &eventstore.ValidationError{Field: "payload", Reason: err.Error()}
	}
	if strings.TrimSpace(f.Title) == "" {
		return f, &eventstore.ValidationError{Field: "title", Reason: "is empty"}
	}
	if len(f.Title) > MaxTitleLength {
		return f, &eventstore.ValidationError{Field: "title", Reason: "is too long"}
	}
	return f, nil
}

// Decisions of the todo commands.
var (
	DecideCreate commands.Decide[Todo] = func(cur eventstore.State[Todo], cmd commands.Command) ([]eventstore.NewEvent, error) {
		f, err := decodeFields(cmd)
		if err != nil {
			return nil, err
		}
		if cur.Item.Exists || cur.Item.Deleted {
			return nil, commands.Conflict("todo %s already exists", cmd.AggregateID)
		}
		return []eventstore.NewEvent{eventstore.Event(Created, f)}, nil
	}
	DecideUpdate commands.Decide[Todo] = func(cur eventstore.State[Todo], cmd commands.Command) ([]eventstore.NewEvent, error) {
		f, err := decodeFields(cmd)
		if err != nil {
			return nil, err
		}
		if !cur.Item.Exists {
			return nil, commands.NotFound("todo %s does not exist", cmd.AggregateID)
		}
		return []eventstore.NewEvent{eventstore.Event(Updated, f)}, nil
	}
	DecideDelete commands.Decide[Todo] = func(cur eventstore.State[Todo], cmd commands.Command) ([]eventstore.NewEvent, error) {
		if !cur.Item.Exists {
			return nil, commands.NotFound("todo %s does not exist", cmd.AggregateID)
		}
		return []eventstore.NewEvent{eventstore.Event(Deleted, struct{}{})}, nil
	}
)

// Domain describes the todo write model: its events and its commands
// (Create, Update, Delete), each deciding against the facet's STATE.
func Domain() commands.Domain {
	return commands.FacetDomain(AggregateType, Processor, map[string]commands.Decide[Todo]{
		Create: DecideCreate, Update: DecideUpdate, Delete: DecideDelete,
	})
}

// NewFacet returns the todo facet on store (reads of a todo's STATE, as
// the HTTP API does). upcasters may be nil.
func NewFacet(store eventstore.Store, upcasters *eventstore.Upcasters) (*eventstore.Facet[Todo], error) {
	return eventstore.NewFacet(eventstore.FacetConfig[Todo]{Store: store, AggregateType: AggregateType, Processor: Processor, Upcasters: upcasters})
}
