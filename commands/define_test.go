package commands_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/eventstore/memstore"
)

// The typed registration of a tiny wallet: one event, two commands, and
// refusal codes in the decision and the rule.

type wallet struct {
	Balance int64 `json:"balance"`
	Open    bool  `json:"open"`
}

type amount struct {
	Amount int64 `json:"amount"`
}

const (
	errNoWallet eventstore.Code = "wallet.not_found"
	errTooPoor  eventstore.Code = "wallet.too_poor"
)

var (
	movedEvent  = eventstore.DefineEvent[amount]("Moved")
	openCommand = commands.DefineCommand[struct{}]("OpenWallet")
	moveCommand = commands.DefineCommand[amount]("Move")
)

func walletDomain() commands.Domain {
	p := eventstore.NewProcessor(func() wallet { return wallet{} },
		eventstore.OnEvent(movedEvent, func(w wallet, a amount, _ *eventstore.Outbox) (wallet, error) {
			if w.Balance+a.Amount < 0 {
				return w, eventstore.RejectWith(errTooPoor, "balance %d, move %d", w.Balance, a.Amount)
			}
			w.Balance += a.Amount
			w.Open = true
			return w, nil
		}))
	return commands.FacetDomain("wallet", p,
		commands.OnCommand(openCommand, func(_ eventstore.State[wallet], _ commands.Command, _ struct{}) ([]eventstore.NewEvent, error) {
			return []eventstore.NewEvent{movedEvent.New(amount{})}, nil
		}),
		commands.OnCommand(moveCommand, func(cur eventstore.State[wallet], cmd commands.Command, a amount) ([]eventstore.NewEvent, error) {
			if !cur.Item.Open {
				return nil, commands.NotFoundWith(errNoWallet, "no wallet %s", cmd.AggregateID)
			}
			return []eventstore.NewEvent{movedEvent.New(a)}, nil
		}),
	)
}

func walletDispatcher(t *testing.T) *commands.Dispatcher {
	t.Helper()
	d := walletDomain()
	store, err := memstore.New(memstore.Config{Schema: eventstore.Schema{Types: d.EventTypes}})
	if err != nil {
		t.Fatal(err)
	}
	hs, err := d.NewHandlers(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := &commands.Registry{}
	if err := reg.Register(hs...); err != nil {
		t.Fatal(err)
	}
	disp, err := commands.NewDispatcher(commands.DispatcherConfig{Registry: reg, Outcomes: store, Replies: discardReplies{}})
	if err != nil {
		t.Fatal(err)
	}
	return disp
}

type discardReplies struct{}

func (discardReplies) Publish(string, ...*message.Message) error { return nil }
func (discardReplies) Close() error                              { return nil }

// TestFacetDomainListsItsDefinitions: the domain built from definitions
// names their types and exposes them, in name order.
func TestFacetDomainListsItsDefinitions(t *testing.T) {
	d := walletDomain()
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d.CommandTypes, []string{"Move", "OpenWallet"}) || len(d.Commands) != 2 ||
		d.Commands[0].Name() != "Move" || d.Commands[0].PayloadType() != reflect.TypeFor[amount]() {
		t.Fatalf("commands %v, %v", d.CommandTypes, d.Commands)
	}
	if len(d.Events) != 1 || d.Events[0].Name() != "Moved" || d.Events[0].PayloadType() != reflect.TypeFor[amount]() {
		t.Fatalf("events %v", d.Events)
	}
	d.Commands = append(d.Commands, commands.DefineCommand[amount]("Steal"))
	var ve *eventstore.ValidationError
	if err := d.Validate(); !errors.As(err, &ve) || ve.Field != "Commands" {
		t.Fatalf("a definition of no command type: %v, want a ValidationError on Commands", err)
	}
}

// TestARefusalIsMatchedWithErrorsAsAndIs dispatches refused commands: the
// answer's Err is a *commands.RefusalError (errors.As) carrying the
// domain's code (errors.Is), for a decision's refusal and a rule's; the
// redelivered command gets the recorded refusal, still matching; and so
// does the answer after its trip through a replies message.
func TestARefusalIsMatchedWithErrorsAsAndIs(t *testing.T) {
	ctx := context.Background()
	disp := walletDispatcher(t)
	newCmd := func(p amount) commands.Command {
		cmd, err := moveCommand.New("wallet", "w1", p)
		if err != nil {
			t.Fatal(err)
		}
		return cmd
	}

	first := newCmd(amount{Amount: 5})
	res, err := disp.Dispatch(ctx, first)
	var refusal *commands.RefusalError
	if err != nil || !errors.As(res.Err(), &refusal) || refusal.Status != commands.StatusNotFound || refusal.Code != errNoWallet || !errors.Is(res.Err(), errNoWallet) {
		t.Fatalf("a move before opening: %+v, %v; want not_found matching %s", res, err, errNoWallet)
	}
	if errors.Is(res.Err(), errTooPoor) {
		t.Fatalf("%v matches %s too", res.Err(), errTooPoor)
	}
	again, err := disp.Dispatch(ctx, first)
	if err != nil || !again.Duplicate || !errors.Is(again.Err(), errNoWallet) {
		t.Fatalf("the same command again: %+v, %v; want the recorded refusal, matching %s", again, err, errNoWallet)
	}

	open, _ := openCommand.New("wallet", "w1", struct{}{})
	if res, err := disp.Dispatch(ctx, open); err != nil || res.Err() != nil {
		t.Fatalf("open: %+v, %v", res, err)
	}
	res, err = disp.Dispatch(ctx, newCmd(amount{Amount: -1}))
	if err != nil || res.Status != commands.StatusRejected || !errors.Is(res.Err(), errTooPoor) {
		t.Fatalf("a move past the balance: %+v, %v; want rejected matching %s", res, err, errTooPoor)
	}
	msg, err := res.ToMessage("")
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(msg.Payload) || !errors.Is(mustResult(t, msg).Err(), errTooPoor) {
		t.Fatalf("the answer as sent: %s; want it to match %s once decoded", msg.Payload, errTooPoor)
	}
}

// TestOnCommandDecodesStrictlyBeforeDeciding: a payload with an unknown
// field, or of the wrong JSON type, is invalid (payload) and the decision
// never runs; a command of another type is refused by Decode.
func TestOnCommandDecodesStrictlyBeforeDeciding(t *testing.T) {
	ran := false
	dc := commands.OnCommand(moveCommand, func(eventstore.State[wallet], commands.Command, amount) ([]eventstore.NewEvent, error) {
		ran = true
		return nil, nil
	})
	for _, payload := range []string{`{"amount":1,"fee":2}`, `{"amount":"1"}`} {
		_, err := dc.Decide(eventstore.State[wallet]{}, commands.New("Move", "wallet", "w1", json.RawMessage(payload)))
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || ve.Field != "payload" || ran {
			t.Errorf("%s: %v (decision ran: %v), want a ValidationError on payload", payload, err, ran)
		}
	}
	var ve *eventstore.ValidationError
	if _, err := moveCommand.Decode(commands.New("OpenWallet", "wallet", "w1", json.RawMessage(`{}`))); !errors.As(err, &ve) || ve.Field != "type" {
		t.Errorf("Decode of another command type: %v, want a ValidationError on type", err)
	}
}

func mustResult(t *testing.T, msg *message.Message) commands.Result {
	t.Helper()
	res, err := commands.ResultFromMessage(msg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
