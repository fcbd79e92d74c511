// Package todo is an example todo domain: a todo is created, updated and
// deleted, each change an event (TodoCreated, TodoUpdated, TodoDeleted);
// a delete is an event too, so the log keeps everything.
package todo

import "github.com/eventpipe/eventpipe/eventstore"

// AggregateType of todos.
const AggregateType = "todo"

// Event types.
const (
	TodoCreated = "TodoCreated" // payload TodoCreatedData
	TodoUpdated = "TodoUpdated" // payload TodoData
	TodoDeleted = "TodoDeleted" // payload {}
)

// Event definitions: each event type with the Go type of its payload.
var (
	TodoCreatedEvent = eventstore.DefineEvent[TodoCreatedData](TodoCreated)
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
	// Owner is the verified subject that created the todo (see
	// TodoCreatedData.Owner); it never changes.
	Owner string `json:"owner,omitempty"`
}

// TodoData is the payload of TodoCreated and TodoUpdated, and of the
// CreateTodo and UpdateTodo commands: a todo's fields.
type TodoData struct {
	Title     string `json:"title"`
	Message   string `json:"message"`
	Completed bool   `json:"completed"`
}

// TodoCreatedData is the payload of TodoCreated: the todo's fields and
// its owner.
type TodoCreatedData struct {
	TodoData
	// Owner is the actor of the command that created the todo when that
	// actor was verified (a subject of the HTTP API's token, or a signed
	// command's actor: eventstore.Metadata.ActorVerified); empty when it
	// was only claimed. An authorization policy's "own" grants cover the
	// todos a subject owns. The owner never changes.
	Owner string `json:"owner,omitempty"`
}
