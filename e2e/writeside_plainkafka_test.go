package e2e_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestCommandFromAPlainKafkaProducerIsHandledAndAnswered publishes
// commands the way docs/commands.md tells a non-Go (or non-Watermill)
// client to: a JSON record on commands.<aggregate type>, keyed by the
// aggregate id, with no headers at all, from franz-go's plain client. The
// command handlers apply the valid one and refuse the invalid one, and
// both answers arrive on the replies topic keyed by command id, as
// documented.
func TestCommandFromAPlainKafkaProducerIsHandledAndAnswered(t *testing.T) {
	ep := rigs.Endpoints(t)
	svc := rigs.NewService(t, ep, testenv.UniqueName(t, "g"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.RunCommandHandlers(ctx) }()
	defer func() { cancel(); <-done }()

	topics := bus.Topics{Prefix: ep.TopicPrefix}
	cl, err := kgo.NewClient(kgo.SeedBrokers(ep.KafkaBrokers...), kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics(topics.Replies()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	todoID := testenv.UniqueName(t, "todo")
	good, bad := ulid.Make().String(), ulid.Make().String()
	records := map[string]string{
		good: `{"id":"` + good + `","type":"CreateTodo","aggregate_type":"todo","aggregate_id":"` + todoID + `",` +
			`"payload":{"title":"from a plain producer","message":"no headers"}}`,
		bad: `{"id":"` + bad + `","type":"UpdateTodo","aggregate_type":"todo","aggregate_id":"` + todoID + `",` +
			`"payload":{"title":"x","priority":"high"}}`,
	}
	for _, id := range []string{good, bad} { // in this order: one key, one partition
		rec := &kgo.Record{Topic: topics.Commands(todo.AggregateType), Key: []byte(todoID), Value: []byte(records[id])}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}

	type reply struct {
		CommandID string `json:"command_id"`
		Status    string `json:"status"`
		Reason    string `json:"reason"`
		Version   int64  `json:"version"`
	}
	replies := map[string]reply{}
	integration.AwaitProgress(t, "replies to the two commands", func() int64 {
		pollCtx, pollCancel := context.WithTimeout(ctx, 2*time.Second)
		fetches := cl.PollFetches(pollCtx)
		pollCancel()
		fetches.EachRecord(func(r *kgo.Record) {
			var rep reply
			if err := json.Unmarshal(r.Value, &rep); err != nil {
				t.Errorf("reply %s is not JSON: %v", r.Value, err)
				return
			}
			if string(r.Key) != rep.CommandID {
				t.Errorf("reply keyed %q for command %s", r.Key, rep.CommandID)
			}
			replies[rep.CommandID] = rep
		})
		return int64(len(replies))
	}, 2)
	if r := replies[good]; r.Status != "accepted" || r.Version != 1 {
		t.Errorf("valid command: reply %+v, want accepted at version 1", r)
	}
	if r := replies[bad]; r.Status != "invalid" || r.Reason == "" {
		t.Errorf("command with an unknown payload field: reply %+v, want invalid with a reason", r)
	}
	evs := rigs.Events(t, svc, todo.AggregateType, todoID)
	if len(evs) != 1 || evs[0].Metadata.CausationID != good {
		t.Fatalf("events %+v, want the one TodoCreated caused by %s", evs, good)
	}
}
