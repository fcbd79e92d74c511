package operator_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/operator"
	"github.com/eventpipe/eventpipe/poison"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// fragileHandler is a todo command handler with a bug while broken is
// set: it panics on a todo titled "fragile", which poisons the command.
type fragileHandler struct {
	commands.Handler
	broken *atomic.Bool
	calls  *atomic.Int64
}

func (h fragileHandler) Handle(ctx context.Context, cmd commands.Command) (commands.Result, error) {
	if strings.Contains(string(cmd.Payload), `"fragile"`) {
		h.calls.Add(1)
		if h.broken.Load() {
			panic("fragile todo")
		}
	}
	return h.Handler.Handle(ctx, cmd)
}

// fragileTodoCatalog is the todo domain with fragileHandler around every
// handler.
func fragileTodoCatalog(t *testing.T, broken *atomic.Bool, calls *atomic.Int64) *eventpipe.Catalog {
	t.Helper()
	d := todo.Domain()
	newHandlers := d.NewHandlers
	d.NewHandlers = func(store eventstore.Store, up *eventstore.Upcasters) ([]commands.Handler, error) {
		hs, err := newHandlers(store, up)
		for i := range hs {
			hs[i] = fragileHandler{Handler: hs[i], broken: broken, calls: calls}
		}
		return hs, err
	}
	c := eventpipe.NewCatalog()
	if err := c.AddDomain(d); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestPoisonRedriveOfAFixedCommandTakesEffectOnceAndASecondRedriveDoesNothing
// runs the command handlers with a bug that poisons a CreateTodo titled
// "fragile". PoisonList and PoisonShow show it on the handlers' poison
// topic with its origin, reason and id; once the bug is fixed,
// PoisonRedrive publishes it back to its commands topic, where the
// running handlers create the todo; a second PoisonRedrive publishes
// nothing and reports it already redriven. The todo has one event, the
// commands topic holds the command twice (the original and the one copy)
// and both redrives are in OperatorActions.
func TestPoisonRedriveOfAFixedCommandTakesEffectOnceAndASecondRedriveDoesNothing(t *testing.T) {
	ctx := context.Background()
	ep := rigs.Endpoints(t)
	ep.Postgres = rigs.MigratedPostgres(t)
	group := testenv.UniqueName(t, "g")
	var broken atomic.Bool
	var calls atomic.Int64
	broken.Store(true)
	catalog := fragileTodoCatalog(t, &broken, &calls)
	svc, err := eventpipe.NewWriteSide(ctx, eventpipe.WriteSideConfig{Process: eventpipe.Process{Endpoints: ep, Catalog: catalog, Logger: slog.New(slog.DiscardHandler)}, ConsumerGroup: group, NoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.RunCommandHandlers(runCtx) }()
	defer func() { cancel(); <-done }()

	_, sender, topics := rigs.BusClients(t, ep)

	id := testenv.UniqueName(t, "todo")
	create := rigs.TodoCmd(t, todo.CreateTodo, id, todo.TodoData{Title: "fragile"}, nil)
	if err := sender.Send(ctx, create); err != nil {
		t.Fatal(err)
	}
	listCfg := operator.PoisonListConfig{Process: eventpipe.Process{Catalog: catalog, Endpoints: ep}, CommandGroup: group}
	var msgs []operator.PoisonMessage
	rigs.WaitUntil(t, "the command poisoned", func() (bool, string) {
		msgs, err = operator.PoisonList(ctx, listCfg)
		return err == nil && len(msgs) == 1, fmt.Sprintf("poison list: %d messages, %v", len(msgs), err)
	})
	m := msgs[0]
	if m.Topic != topics.Poison(group) || m.Owner != "command handlers" || m.UUID != create.ID || m.Origin().Topic != topics.Commands(todo.AggregateType) ||
		!strings.Contains(m.Reason(), "fragile todo") || m.Redrive != nil || m.Age(time.Now()) < 0 {
		t.Fatalf("poison message %+v (origin %+v, reason %q)", m, m.Origin(), m.Reason())
	}
	listCfg.Topic = strings.TrimPrefix(m.Topic, ep.TopicPrefix) // the name without the prefix does too
	shown, err := operator.PoisonShow(ctx, listCfg, operator.PoisonPosition{Partition: operator.AnyPartition, Offset: m.Offset})
	if err != nil || shown.UUID != create.ID || string(shown.Payload) != string(m.Payload) {
		t.Fatalf("PoisonShow = %+v, %v", shown, err)
	}
	if _, err := operator.PoisonShow(ctx, listCfg, operator.PoisonPosition{Partition: operator.AnyPartition, Offset: m.Offset + 100}); !errors.Is(err, operator.ErrPoisonNotFound) {
		t.Fatalf("PoisonShow of a missing offset: %v, want ErrPoisonNotFound", err)
	}
	if evs := rigs.Events(t, svc, todo.AggregateType, id); len(evs) != 0 {
		t.Fatalf("the poisoned command appended %v", evs)
	}

	broken.Store(false) // the fix is deployed
	redrive := operator.PoisonRedriveConfig{Process: eventpipe.Process{Catalog: catalog, Endpoints: ep, Logger: slog.New(slog.DiscardHandler)}, CommandGroup: group, Topic: m.Topic,
		Positions: []operator.PoisonPosition{{Partition: m.Partition, Offset: m.Offset}}, Actor: "alice", Reason: "fragile todos fixed",
	}
	res, err := operator.PoisonRedrive(ctx, redrive)
	if err != nil || res.Count(poison.Redriven) != 1 || len(res.Results) != 1 || res.Results[0].Target != topics.Commands(todo.AggregateType) {
		t.Fatalf("first redrive: %+v, %v", res, err)
	}
	rigs.WaitUntil(t, "the redriven command applied", func() (bool, string) {
		evs := rigs.Events(t, svc, todo.AggregateType, id)
		return len(evs) == 1, fmt.Sprintf("events %v", evs)
	})

	again, err := operator.PoisonRedrive(ctx, redrive)
	if err != nil || again.Count(poison.AlreadyRedriven) != 1 || again.Results[0].By != "alice" {
		t.Fatalf("second redrive: %+v, %v; want already redriven by alice", again, err)
	}
	// A later command of the same todo, answered: everything before it on
	// the partition was handled.
	waitCtx, waitCancel := context.WithTimeout(ctx, integration.HangAfter())
	defer waitCancel()
	if r, err := sender.SendAndWait(waitCtx, rigs.TodoCmd(t, todo.UpdateTodo, id, todo.TodoData{Title: "after"}, rigs.Ver(1))); err != nil || r.Status != commands.StatusAccepted || r.Version != 2 {
		t.Fatalf("update after the redrives: %+v, %v", r, err)
	}
	if evs := rigs.Events(t, svc, todo.AggregateType, id); len(evs) != 2 || evs[0].EventType != todo.TodoCreated {
		t.Fatalf("events %v, want the create once and the update", evs)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("the fragile command reached its handler %d times, want 2 (poisoned, then redriven once)", n)
	}
	onTopic, err := poison.Read(ctx, poison.ReadConfig{Brokers: ep.KafkaBrokers, Topic: topics.Commands(todo.AggregateType),
		Match: func(c poison.Message) bool { return c.UUID == create.ID }})
	if err != nil || len(onTopic) != 2 || onTopic[1].Metadata.Get(poison.KeyRedrivenFrom) != m.Ref.String() || onTopic[1].Key != id {
		t.Fatalf("commands topic holds %+v, %v; want the command and one copy from %s", onTopic, err, m.Ref)
	}

	msgs, err = operator.PoisonList(ctx, operator.PoisonListConfig{Process: eventpipe.Process{Catalog: catalog, Endpoints: ep}, CommandGroup: group})
	if err != nil || len(msgs) != 1 || msgs[0].Redrive == nil || msgs[0].Redrive.State != "done" || msgs[0].Redrive.Actor != "alice" {
		t.Fatalf("poison list after the redrive: %+v, %v", msgs, err)
	}
	actions, err := operator.OperatorActions(ctx, operator.OperatorActionsConfig{Process: eventpipe.Process{Endpoints: ep}, Action: operator.ActionPoisonRedrive})
	if err != nil || len(actions) != 2 {
		t.Fatalf("operator actions %+v, %v; want both redrives", actions, err)
	}
	if a := actions[1]; a.Actor != "alice" || a.Reason != "fragile todos fixed" || !strings.Contains(a.Target, m.Topic) || a.Result != "1 redriven" {
		t.Fatalf("first redrive recorded as %+v", a)
	}
	if a := actions[0]; a.Result != "1 already redriven" || a.ID <= actions[1].ID {
		t.Fatalf("second redrive recorded as %+v", a)
	}
}

// TestPoisonRedriveRefusesBadRequestsBeforeActing: no topic, both or
// neither of offsets and all, a name that is no poison topic.
func TestPoisonRedriveRefusesBadRequestsBeforeActing(t *testing.T) {
	ep := testenv.Endpoints()
	for name, cfg := range map[string]operator.PoisonRedriveConfig{
		"no topic": {Process: eventpipe.Process{Endpoints: ep}, All: true},
		"neither":  {Process: eventpipe.Process{Endpoints: ep}, Topic: "poison.eventpipe-commands"},
		"both":     {Process: eventpipe.Process{Endpoints: ep}, Topic: "poison.eventpipe-commands", All: true, Positions: []operator.PoisonPosition{{Offset: 1}}},
	} {
		_, err := operator.PoisonRedrive(context.Background(), cfg)
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s: %v, want a ValidationError", name, err)
		}
	}
	_, err := operator.PoisonList(context.Background(), operator.PoisonListConfig{Process: eventpipe.Process{Endpoints: ep}, Topic: "events.todo"})
	var ve *eventstore.ValidationError
	if !errors.As(err, &ve) {
		t.Errorf("PoisonList of events.todo: %v, want a ValidationError", err)
	}
}
