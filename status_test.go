package eventpipe_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/internal/testenv"
)

// TestStatusShowsEachGroupsPositionLagAndPoison sends three todo
// commands, one of them invalid, through the command handlers and reads
// Status: the todo commands group has consumed all three (committed =
// newest, lag 0), its poison topic holds the invalid one, and the read
// models' groups, which never ran, lag by nothing because nothing was
// relayed in this namespace.
func TestStatusShowsEachGroupsPositionLagAndPoison(t *testing.T) {
	ep := testEndpoints(t)
	group := testenv.UniqueName(t, "g")
	svc := newService(t, ep, group)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.RunCommandHandlers(ctx) }()
	defer func() { cancel(); <-done }()
	sender, err := kafka.NewSender(kafka.SenderConfig{Brokers: ep.KafkaBrokers, Topics: bus.Topics{Prefix: ep.TopicPrefix}, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	id := testenv.UniqueName(t, "todo")
	for _, c := range []commands.Command{
		commands.New(todo.CreateTodo, todo.AggregateType, id, json.RawMessage(`{"title":"a"}`)),
		commands.New(todo.UpdateTodo, todo.AggregateType, id, json.RawMessage(`{"title":"b"}`)),
		commands.New(todo.UpdateTodo, todo.AggregateType, id, json.RawMessage(`{"title":"c","bogus":1}`)),
	} {
		waitCtx, waitCancel := context.WithTimeout(ctx, 30*time.Second)
		if _, err := sender.SendAndWait(waitCtx, c); err != nil {
			t.Fatal(err)
		}
		waitCancel()
	}

	var todoGroup eventpipe.GroupStatus
	for deadline := time.Now().Add(30 * time.Second); ; {
		r := eventpipe.Status(ctx, eventpipe.StatusConfig{Endpoints: ep, CommandGroup: group})
		for _, g := range r.Groups {
			if g.Group == group+"."+ep.TopicPrefix+"commands.todo" {
				todoGroup = g
			}
			if g.Group == ep.TopicPrefix+"projection.todos" && (g.Newest != 0 || g.Lag != 0 || g.Poisoned != 0) {
				t.Fatalf("read model group without events: %+v", g)
			}
		}
		if todoGroup.Lag == 0 && todoGroup.Committed == 3 && todoGroup.Poisoned == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("todo commands group %+v (errors %v), want committed 3 of 3 and 1 poisoned", todoGroup, r.Errors)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if todoGroup.Newest != 3 || todoGroup.PoisonTopic != ep.TopicPrefix+"poison."+group {
		t.Fatalf("todo commands group %+v", todoGroup)
	}
}
