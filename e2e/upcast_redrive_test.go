package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/operator"
	"github.com/eventpipe/eventpipe/sagas"
)

// TestAPoisonedV1EventRedrivenAfterItsUpcasterIsAddedReachesTheSagaAsV2:
// a saga that needs a todo's title gets a TodoCreated of an older schema
// (v1: {"name": …}) and poisons it; the v1→v2 upcaster is added, the
// saga redeployed, and the poisoned message re-driven with `poison
// redrive`: the saga now sees it as v2, with its title.
func TestAPoisonedV1EventRedrivenAfterItsUpcasterIsAddedReachesTheSagaAsV2(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ep, db, pub := sagaTestbed(t)
	topics := bus.Topics{Prefix: ep.TopicPrefix}
	const name = "titles"
	var seen sync.Map
	catalog := func(upcast bool) *eventpipe.Catalog {
		cat := eventpipe.Builtin()
		if upcast {
			cat.Upcasters().MustRegister(todo.TodoCreated, 1, func(p json.RawMessage) (json.RawMessage, error) {
				var v1 struct {
					Name string `json:"name"`
				}
				if err := json.Unmarshal(p, &v1); err != nil {
					return nil, err
				}
				return json.Marshal(todo.TodoData{Title: v1.Name})
			})
		}
		err := cat.AddSaga(sagas.Saga[struct{}]{
			Name: name, Events: []string{todo.AggregateType},
			Route:   func(in sagas.Input) (string, bool) { return in.Event.AggregateID, true },
			Initial: func(string) struct{} { return struct{}{} },
			Handle: func(s struct{}, in sagas.Input, fx *sagas.Effects) (struct{}, error) {
				var d todo.TodoData
				if err := in.Event.DecodePayload(&d); err != nil {
					return s, err
				}
				if d.Title == "" {
					return s, &eventstore.ValidationError{Field: "title", Reason: fmt.Sprintf("is empty in %s v%d", in.Event.EventType, in.Event.SchemaVersion)}
				}
				seen.Store(in.Event.AggregateID, d.Title)
				fx.Finish("seen")
				return s, nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		return cat
	}
	deploy := func(cat *eventpipe.Catalog) (stop func()) {
		t.Helper()
		return deploySaga(t, ep, db, cat, name, topics.Events(todo.AggregateType))
	}

	stop := deploy(catalog(false))
	e := eventstore.Envelope{EventID: ulid.Make().String(), AggregateType: todo.AggregateType, AggregateID: "todo-1", Sequence: 1,
		EventType: todo.TodoCreated, SchemaVersion: 1, OccurredAt: time.Now().UTC(), Payload: []byte(`{"name":"buy milk"}`)}
	msg, err := bus.EventMessage(e)
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(topics.Events(todo.AggregateType), msg); err != nil {
		t.Fatal(err)
	}
	offsets := kafkaOffsets(t)
	poisonTopic := sagas.PoisonTopic(topics, name)
	rigs.WaitFor(t, "the v1 event on "+poisonTopic, func() bool { return topicEnd(t, offsets, poisonTopic) == 1 })
	stop()
	if _, ok := seen.Load("todo-1"); ok {
		t.Fatal("the saga took the v1 event without its upcaster")
	}

	cat := catalog(true)
	stop = deploy(cat)
	defer stop()
	res, err := operator.PoisonRedrive(ctx, operator.PoisonRedriveConfig{Process: eventpipe.Process{Catalog: cat, Endpoints: ep}, Topic: poisonTopic,
		All: true, Actor: "test", Reason: "the v1→v2 upcaster of TodoCreated is deployed"})
	if err != nil || len(res.Results) != 1 {
		t.Fatalf("redrive: %+v, %v", res, err)
	}
	rigs.WaitFor(t, "the saga to take the re-driven event as v2", func() bool { _, ok := seen.Load("todo-1"); return ok })
	if title, _ := seen.Load("todo-1"); title != "buy milk" {
		t.Errorf("the saga saw the title %q, want the v1 name upcast to it", title)
	}
}
