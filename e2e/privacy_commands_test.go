package e2e_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/bus/kafka/kafkatest"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/operator"
	"github.com/eventpipe/eventpipe/privacy"
	"github.com/eventpipe/eventpipe/privacy/subjects"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestCommandsTravelSealed sends commands with personal data through
// eventpipe.NewSender (signed, and unsigned) to the write side's command
// handlers on Kafka: every record of the test's topics holds none of it
// in clear, while the handlers decide on it opened; a signed todo's key
// is its verified creator's, an unsigned one's the todo's own; a sealed
// payload moved to another command is invalid; once the subject is
// forgotten the sender refuses to seal for it, and a command sealed
// before the forget is rejected with privacy.forgotten.
func TestCommandsTravelSealed(t *testing.T) {
	ctx := context.Background()
	ep := integration.Isolate(t)
	quiet := slog.New(slog.DiscardHandler)
	if _, err := eventpipe.Migrate(ctx, eventpipe.MigrateConfig{Process: eventpipe.Process{Endpoints: ep, Logger: quiet}}); err != nil {
		t.Fatal(err)
	}
	key := []byte(strings.Repeat("k", commands.MinKeyLength))
	svc, err := eventpipe.NewWriteSide(ctx, eventpipe.WriteSideConfig{Process: eventpipe.Process{Endpoints: ep, Logger: quiet},
		ConsumerGroup: integration.UniqueName(t, "g"), NoAuth: true, ProducerKeys: commands.Keys{"producer-1": key}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	handlers := rigs.GoRun(t, "command handlers", svc.RunCommandHandlers)
	newSender := func(signer commands.Signer) *kafka.Sender {
		s, err := eventpipe.NewSender(eventpipe.SenderConfig{Process: eventpipe.Process{Endpoints: ep, Catalog: eventpipe.Builtin()}, Signer: signer})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	signed := newSender(commands.Signer{KeyID: "producer-1", Key: key})
	unsigned := newSender(commands.Signer{})
	send := func(s *kafka.Sender, cmd commands.Command) (commands.Result, error) {
		t.Helper()
		handlers.Check(t)
		return s.SendAndWait(ctx, cmd)
	}
	accepted := func(s *kafka.Sender, typ, aggType, id, actor string, payload any) {
		t.Helper()
		cmd := mustCmd(t, typ, aggType, id, payload)
		cmd.Actor = actor
		if res, err := send(s, cmd); err != nil || res.Status != commands.StatusAccepted {
			t.Fatalf("%s %s/%s: %+v, %v", typ, aggType, id, res, err)
		}
	}
	values := []string{"Ann's secret garden", "the gate code is 4711", "rent for Ann's flat", "Bob's untold wish"}
	accepted(signed, todo.CreateTodo, todo.AggregateType, "t-ann", "ann", todo.TodoData{Title: values[0], Message: values[1]})
	accepted(signed, bankaccount.OpenAccount, bankaccount.AggregateType, "acc-ann", "ops", struct{}{})
	accepted(signed, bankaccount.RecordTransaction, bankaccount.AggregateType, "acc-ann", "ops", bankaccount.TransactionAcceptedData{Desc: values[2], Amount: 900})
	accepted(unsigned, todo.CreateTodo, todo.AggregateType, "t-bob", "bob", todo.TodoData{Title: values[3]})

	// The handlers decided on the opened payloads.
	events := rigs.Events(t, svc, todo.AggregateType, "t-ann")
	if len(events) != 1 || !strings.Contains(string(events[0].Payload), values[0]) || !strings.Contains(string(events[0].Payload), `"owner":"ann"`) {
		t.Fatalf("t-ann's events: %v", events)
	}
	keys := subjects.KeysOf(svc.Store)
	for subject, want := range map[string]string{"ann": "todo/t-ann", "t-bob": "todo/t-bob", "acc-ann": bankaccount.AggregateType + "/acc-ann"} {
		scopes, err := keys.Scopes(ctx, subject)
		if err != nil || !slices.Contains(scopes, want) {
			t.Errorf("scopes of %s: %v, %v; want %s", subject, scopes, err, want)
		}
	}
	dump := kafkatest.TopicsDump(t, ep.KafkaBrokers, ep.TopicPrefix)
	if !strings.Contains(dump, ".commands.todo") || !strings.Contains(dump, privacy.SealedPrefix) {
		t.Fatalf("the topics hold no sealed todo command:\n%s", dump)
	}
	for _, v := range values {
		if strings.Contains(dump, v) {
			t.Errorf("a Kafka topic holds %q in clear", v)
		}
	}

	// A sealed payload moved to another command does not open.
	sealer, err := eventpipe.OpenSealer(ctx, ep, eventpipe.Builtin(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	first := mustCmd(t, todo.UpdateTodo, todo.AggregateType, "t-ann", todo.TodoData{Title: "moved"})
	first, err = commands.Seal(ctx, sealer, first, true)
	if err != nil {
		t.Fatal(err)
	}
	moved := mustCmd(t, todo.UpdateTodo, todo.AggregateType, "t-ann", todo.TodoData{})
	moved.Payload = first.Payload
	var invalid *commands.InvalidError
	if res, err := svc.Dispatcher.Dispatch(ctx, moved); !errors.As(err, &invalid) || res.Status != commands.StatusInvalid {
		t.Fatalf("a payload moved to another command: %+v, %v; want invalid", res, err)
	}

	if _, err := operator.Forget(ctx, operator.ForgetConfig{Process: eventpipe.Process{Endpoints: ep, Logger: quiet}, Subject: "ann", Actor: "dpo"}); err != nil {
		t.Fatal(err)
	}
	again := mustCmd(t, todo.UpdateTodo, todo.AggregateType, "t-ann", todo.TodoData{Title: "after the forget"})
	again.Actor = "ann"
	if res, err := send(newSender(commands.Signer{KeyID: "producer-1", Key: key}), again); !errors.Is(err, privacy.ErrForgotten) {
		t.Fatalf("sending for a forgotten subject: %+v, %v; want privacy.ErrForgotten", res, err)
	}
	if res, err := svc.Dispatcher.Dispatch(ctx, first); err != nil || res.Status != commands.StatusRejected || res.Code != privacy.CodeForgotten {
		t.Fatalf("a command sealed before the forget: %+v, %v; want rejected with %s", res, err, privacy.CodeForgotten)
	}
	if dump := kafkatest.TopicsDump(t, ep.KafkaBrokers, ep.TopicPrefix); strings.Contains(dump, "after the forget") {
		t.Error("the refused command reached a topic")
	}
}
