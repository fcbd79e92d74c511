package eventpipe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
)

// A program of its own sends a command onto the bus and waits for its
// answer. `eventpipe serve` (or a WriteSide in the same program) handles
// it.
func ExampleNewSender() {
	ctx := context.Background()
	catalog := eventpipe.Builtin()
	// With the catalogue, the personal data of the payload travels sealed.
	sender, err := eventpipe.NewSender(eventpipe.SenderConfig{Process: eventpipe.Process{Endpoints: eventpipe.EndpointsFromEnv(), Catalog: catalog}})
	if err != nil {
		log.Fatal(err)
	}
	defer sender.Close()
	cmd, err := catalog.NewCommand("CreateTodo", "t1", json.RawMessage(`{"title":"buy milk","message":"oat"}`))
	if err != nil {
		log.Fatal(err) // an unknown command type, or an id eventpipe cannot store
	}
	res, err := sender.SendAndWait(ctx, cmd)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, res.Version)
}

// todoTitles is a search model: one document per todo with its title.
type todoTitles struct{}

func (todoTitles) Name() string             { return "todo-titles" }
func (todoTitles) AggregateTypes() []string { return []string{todo.AggregateType} }
func (todoTitles) EventTypes() []string     { return todo.Domain().EventTypes.Names() }
func (todoTitles) IndexBody() map[string]any {
	return map[string]any{"mappings": map[string]any{"properties": map[string]any{
		"id": map[string]any{"type": "keyword"}, "title": map[string]any{"type": "text"}}}}
}

func (todoTitles) Apply(doc json.RawMessage, e eventstore.Envelope) (json.RawMessage, error) {
	var d struct {
		ID    string `json:"id"`
		Title string `json:"title"`
	}
	if doc != nil {
		if err := json.Unmarshal(doc, &d); err != nil {
			return nil, err
		}
	}
	var data todo.TodoData
	if err := e.DecodePayload(&data); err != nil {
		return nil, err
	}
	d.ID = e.AggregateID
	if e.EventType != todo.TodoDeleted {
		d.Title = data.Title
	}
	return json.Marshal(d)
}

// A search model of your own, kept in Elasticsearch by the same
// consumers as the built-in ones: registered, its index created, run
// until ctx ends.
func ExampleCatalog_AddSearchModel() {
	ctx := context.Background()
	catalog := eventpipe.Builtin()
	if err := catalog.AddSearchModel(todoTitles{}); err != nil {
		log.Fatal(err)
	}
	if _, err := eventpipe.Migrate(ctx, eventpipe.MigrateConfig{Process: eventpipe.Process{Catalog: catalog}}); err != nil {
		log.Fatal(err)
	}
	consumers, err := eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{Process: eventpipe.Process{Catalog: catalog}, Names: []string{"todo-titles"}})
	if err != nil {
		log.Fatal(err)
	}
	defer consumers.Close()
	if err := consumers.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// A plain Watermill handler of your own, run as a consumer like the
// built-in ones: its own group (handler.todo-audit), its poison topic,
// retries, tracing, metrics and a status row. It starts with what is
// published after its first deployment (bus.StartLatest, its default).
func ExampleHandler() {
	ctx := context.Background()
	audit, err := eventpipe.Handler(eventpipe.HandlerConfig{
		Name:   "todo-audit",
		Topics: []string{bus.EventsTopic(todo.AggregateType)},
		Handler: func(msg *message.Message) error {
			e, err := bus.EventFromMessage(msg)
			if err != nil {
				return err // permanent: the message goes to poison.handler.todo-audit
			}
			log.Printf("%s %s/%s #%d by %q", e.EventType, e.AggregateType, e.AggregateID, e.Sequence, e.Metadata.Actor)
			return nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	catalog := eventpipe.Builtin()
	if err := catalog.AddConsumer(audit); err != nil {
		log.Fatal(err) // a name another consumer holds: *eventpipe.NameTakenError
	}
	consumers, err := eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{Process: eventpipe.Process{Catalog: catalog}, Names: []string{"todo-audit"}})
	if err != nil {
		log.Fatal(err)
	}
	defer consumers.Close()
	if err := consumers.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
