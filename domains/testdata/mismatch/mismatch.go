// Package mismatch pairs events and commands with payloads of another
// type, three ways. It must not compile: TestMismatchedPayloadsDoNotCompile
// builds it and checks that the compiler refuses each pair. (It lives
// under testdata so that `go build ./...` skips it.)
package mismatch

import (
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/domains/order"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
)

// A rule for TodoCreated that expects an order's payload.
var rule = eventstore.OnEvent(todo.TodoCreatedEvent, func(s todo.Todo, p order.OrderPlacedData, _ *eventstore.Outbox) (todo.Todo, error) {
	return s, nil
})

// A decision for CreateTodo that expects a bank transaction's payload.
var decider = commands.OnCommand(todo.CreateTodoCommand, func(cur eventstore.State[todo.Todo], cmd commands.Command, p bankaccount.TransactionAcceptedData) ([]eventstore.NewEvent, error) {
	return nil, nil
})

// A TodoCreated event made with an order's payload.
var event = todo.TodoCreatedEvent.New(order.OrderPlacedData{Customer: "c1", Total: 1})
