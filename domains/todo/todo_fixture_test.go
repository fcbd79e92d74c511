package todo_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/testkit"
)

// The todo domain's commands through its real handlers on the in-memory
// store, with no service running.

func created(title string) eventstore.NewEvent {
	return eventstore.Event(todo.TodoCreated, todo.TodoData{Title: title})
}

func TestFixtureATodoIsCreatedUpdatedAndDeleted(t *testing.T) {
	f := testkit.NewDomainFixture(t, todo.Domain())
	f.When("t1", todo.CreateTodo, todo.TodoData{Title: "buy milk", Message: "oat"}).
		ThenEvents(eventstore.Event(todo.TodoCreated, todo.TodoData{Title: "buy milk", Message: "oat"})).
		ThenNoOutbound()
	f.When("t1", todo.UpdateTodo, todo.TodoData{Title: "buy milk", Message: "oat", Completed: true}).
		ThenEvents(eventstore.NewEvent{Type: todo.TodoUpdated, Payload: json.RawMessage(`{"completed":true,"title":"buy milk","message":"oat"}`)})
	f.When("t1", todo.DeleteTodo, `{}`).
		ThenEvents(eventstore.Event(todo.TodoDeleted, struct{}{})).
		ThenState("t1", todo.Todo{Title: "buy milk", Message: "oat", Completed: true, Deleted: true})
}

func TestFixtureADeletedTodoIsGoneForGood(t *testing.T) {
	f := testkit.NewDomainFixture(t, todo.Domain())
	f.Given("t1", created("buy milk"), eventstore.Event(todo.TodoDeleted, struct{}{}))
	f.When("t1", todo.UpdateTodo, todo.TodoData{Title: "again"}).
		ThenRefused(commands.StatusNotFound, "does not exist")
	f.When("t1", todo.DeleteTodo, `{}`).
		ThenRefused(commands.StatusNotFound, "does not exist")
	f.When("t1", todo.CreateTodo, todo.TodoData{Title: "reuse the id"}).
		ThenRefused(commands.StatusConflict, "already exists")
}

func TestFixtureTodoInputIsValidated(t *testing.T) {
	f := testkit.NewDomainFixture(t, todo.Domain())
	f.When("t1", todo.CreateTodo, todo.TodoData{Title: "  "}).
		ThenRefused(commands.StatusInvalid, "title").
		ThenNoEvents()
	f.When("t1", todo.CreateTodo, todo.TodoData{Title: strings.Repeat("x", todo.MaxTitleLength+1)}).
		ThenRefused(commands.StatusInvalid, "too long")
	f.When("t1", todo.CreateTodo, `{"title":"a","priority":1}`).
		ThenRefused(commands.StatusInvalid, "priority")
	f.When("t1", "ArchiveTodo", `{}`).
		ThenRefused(commands.StatusInvalid, "unknown command type")
}
