// Command quickstart is the README's library example, as it stands
// there: a program of its own registers a consumer (a plain Watermill
// handler) on the built-in catalogue, sends a command onto the bus and
// prints its answer, then runs the consumer, which prints the todo
// events the relay publishes, until Ctrl-C.
//
// Run it beside a running pipeline (`make demo` stays up until Ctrl-C;
// or `bin/eventpipe serve --no-auth`, `bin/eventpipe relay`):
//
//	go run ./examples/quickstart
//
// Addresses come from the environment, as for the eventpipe binary.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/domains/todo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := quickstart(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
}

// quickstart is the README's snippet (keep the two the same).
func quickstart(ctx context.Context) error {
	// The example domains and read models; addresses from the environment.
	catalog, ep := eventpipe.Builtin(), eventpipe.EndpointsFromEnv()
	// A consumer of your own: its group, poison topic, metrics, status row.
	audit, err := eventpipe.Handler(eventpipe.HandlerConfig{
		Name: "todo-audit", Topics: []string{bus.EventsTopic(todo.AggregateType)}, Start: bus.StartEarliest,
		Handler: func(msg *message.Message) error {
			e, err := bus.EventFromMessage(msg) // an error here is permanent: poisoned
			if err == nil {
				fmt.Printf("event %s %s #%d\n", e.EventType, e.AggregateID, e.Sequence)
			}
			return err
		},
	})
	if err != nil {
		return err
	}
	if err := catalog.AddConsumer(audit); err != nil {
		return err
	}
	// A command onto the bus; `eventpipe serve` handles it once and answers.
	sender, err := eventpipe.NewSender(eventpipe.SenderConfig{Process: eventpipe.Process{Endpoints: ep, Catalog: catalog}})
	if err != nil {
		return err
	}
	defer sender.Close()
	id := fmt.Sprintf("quickstart-%d", time.Now().Unix())
	cmd, err := todo.CreateTodoCommand.New(todo.AggregateType, id, todo.TodoData{Title: "buy milk"}) // typed: a payload of another type does not compile
	if err != nil {
		return err
	}
	res, err := sender.SendAndWait(ctx, cmd)
	if err != nil {
		return err
	}
	fmt.Println("answer:", res.Status, "version", res.Version)
	// Run the consumer until Ctrl-C: it prints the todo events, this one too.
	consumers, err := eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{Process: eventpipe.Process{Catalog: catalog, Endpoints: ep}, Names: []string{"todo-audit"}})
	if err != nil {
		return err
	}
	defer consumers.Close()
	return consumers.Run(ctx)
}
