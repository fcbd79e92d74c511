// Package todo is an example todo domain: a todo is created, updated and
// deleted, each change an event (TodoCreated, TodoUpdated, TodoDeleted);
// a delete is an event too, so the log keeps everything.
package todo

import "github.com/eventpipe/eventpipe/eventstore"

// AggregateType of todos.
const AggregateType = "todo"

// Event types.
const (
	TodoCreated = "TodoCreated" // payload TodoData
	TodoUpdated = "TodoUpdated" // payload TodoData
	TodoDeleted = "TodoDeleted" // payload {}
)

// Event definitions: each event type with the Go type of its payload.
var (
	TodoCreatedEvent = eventstore.DefineEvent[TodoData](TodoCreated)
	TodoUpdatedEvent = eventstore.DefineEvent[TodoData](TodoUpdated)
	TodoDeletedEvent = eventstore.DefineEvent[struct{}](TodoDeleted)
)

// Refusal codes (see eventstore.Code): the kinds of refusal of todo
// commands and rules, matched with errors.Is.
const (
	ErrExists   eventstore.Code = "todo.exists"    // the todo exists, or existed and was deleted (ids are not reused)
	ErrNotFound eventstore.Code = "todo.not_found" // no todo, or a deleted one
)

// Bounds of a todo's text fields, in bytes.
const (
	MaxTitleLength   = 1000
	MaxMessageLength = 10000
)

// Todo is the state of one todo.
type Todo struct {
	Title     string `json:"title"`
	Message   string `json:"message"`
	Completed bool   `json:"completed"`
	Exists    bool   `json:"exists"`  // created and not deleted
	Deleted   bool   `json:"deleted"` // deleted (ids are not reused)
}

// TodoData is the payload of TodoCreated and TodoUpdated, and of the
// CreateTodo and UpdateTodo commands: a todo's fields.
type TodoData struct {
	Title     string `json:"title"`
	Message   string `json:"message"`
	Completed bool   `json:"completed"`
}
