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
	return todo.TodoCreatedEvent.New(todo.TodoCreatedData{TodoData: todo.TodoData{Title: title}})
}

func TestFixtureATodoIsCreatedUpdatedAndDeleted(t *testing.T) {
	f := testkit.NewDomainFixture(t, todo.Domain())
	f.When("t1", todo.CreateTodo, todo.TodoData{Title: "buy milk", Message: "oat"}).
		ThenEvents(todo.TodoCreatedEvent.New(todo.TodoCreatedData{TodoData: todo.TodoData{Title: "buy milk", Message: "oat"}})).
		ThenNoOutbound()
	f.When("t1", todo.UpdateTodo, todo.TodoData{Title: "buy milk", Message: "oat", Completed: true}).
		ThenEvents(eventstore.NewEvent{Type: todo.TodoUpdated, Payload: json.RawMessage(`{"completed":true,"title":"buy milk","message":"oat"}`)})
	f.When("t1", todo.DeleteTodo, `{}`).
		ThenEvents(todo.TodoDeletedEvent.New(struct{}{})).
		ThenState("t1", todo.Todo{Title: "buy milk", Message: "oat", Completed: true, Deleted: true})
}

func TestFixtureADeletedTodoIsGoneForGood(t *testing.T) {
	f := testkit.NewDomainFixture(t, todo.Domain())
	f.Given("t1", created("buy milk"), todo.TodoDeletedEvent.New(struct{}{}))
	f.When("t1", todo.UpdateTodo, todo.TodoData{Title: "again"}).
		ThenRefusedWith(commands.StatusNotFound, todo.ErrNotFound)
	f.When("t1", todo.DeleteTodo, `{}`).
		ThenRefusedWith(commands.StatusNotFound, todo.ErrNotFound)
	f.When("t1", todo.CreateTodo, todo.TodoData{Title: "reuse the id"}).
		ThenRefusedWith(commands.StatusConflict, todo.ErrExists)
}

func TestFixtureTodoInputIsValidated(t *testing.T) {
	f := testkit.NewDomainFixture(t, todo.Domain())
	f.When("t1", todo.CreateTodo, todo.TodoData{Title: "  "}).
		ThenInvalid("title").
		ThenNoEvents()
	f.When("t1", todo.CreateTodo, todo.TodoData{Title: strings.Repeat("x", todo.MaxTitleLength+1)}).
		ThenInvalid("title")
	f.When("t1", todo.CreateTodo, `{"title":"a","priority":1}`).
		ThenInvalid("payload")
	f.When("t1", "ArchiveTodo", `{}`).
		ThenRefusedWith(commands.StatusInvalid, commands.ErrUnknownCommand)
}

// TestFixtureATodoIsOwnedByItsVerifiedCreator: a CreateTodo whose actor
// was verified (an HTTP token's subject, a signed command) records it as
// the todo's owner; a claimed actor makes no owner, and an update keeps
// the owner whoever sends it.
func TestFixtureATodoIsOwnedByItsVerifiedCreator(t *testing.T) {
	f := testkit.NewDomainFixture(t, todo.Domain())
	cmd := func(id, typ, actor, source string, d todo.TodoData) commands.Command {
		c, err := commands.NewJSON(typ, todo.AggregateType, id, d)
		if err != nil {
			t.Fatal(err)
		}
		c.Actor, c.ActorSource = actor, source
		return c
	}
	f.WhenCommand(cmd("t1", todo.CreateTodo, "alice", eventstore.ActorHTTP, todo.TodoData{Title: "hers"})).
		ThenEvents(todo.TodoCreatedEvent.New(todo.TodoCreatedData{TodoData: todo.TodoData{Title: "hers"}, Owner: "alice"})).
		ThenState("t1", todo.Todo{Title: "hers", Exists: true, Owner: "alice"})
	f.WhenCommand(cmd("t2", todo.CreateTodo, "svc", eventstore.ActorSigned, todo.TodoData{Title: "signed"})).
		ThenState("t2", todo.Todo{Title: "signed", Exists: true, Owner: "svc"})
	f.WhenCommand(cmd("t3", todo.CreateTodo, "alice", eventstore.ActorClaimed, todo.TodoData{Title: "claimed"})).
		ThenEvents(todo.TodoCreatedEvent.New(todo.TodoCreatedData{TodoData: todo.TodoData{Title: "claimed"}})).
		ThenState("t3", todo.Todo{Title: "claimed", Exists: true})
	f.WhenCommand(cmd("t1", todo.UpdateTodo, "root", eventstore.ActorHTTP, todo.TodoData{Title: "fixed"})).
		ThenState("t1", todo.Todo{Title: "fixed", Exists: true, Owner: "alice"})
}
