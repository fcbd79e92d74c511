package pipeline_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/testkit/integration"
	"github.com/eventpipe/eventpipe/testkit/pipeline"
)

// TestSettleReturnsOnceEveryConsumerAppliedEverything runs two handler
// consumers of the accounts' events: a slow one that counts them, and
// one that sends, for each transaction on account src, the same
// transaction to account dst, whose events the counter counts too.
// Right after Settle, dst holds every mirrored transaction and the
// counter counted every event stored, with no polling.
func TestSettleReturnsOnceEveryConsumerAppliedEverything(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	var p atomic.Pointer[pipeline.Pipeline]
	var counted atomic.Int64
	cat := eventpipe.Builtin()
	events := []string{bus.EventsTopic(bankaccount.AggregateType)}
	counter, err := eventpipe.Handler(eventpipe.HandlerConfig{Name: "count", Topics: events, Handler: func(*message.Message) error {
		time.Sleep(2 * time.Millisecond)
		counted.Add(1)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	mirror, err := eventpipe.Handler(eventpipe.HandlerConfig{Name: "mirror", Topics: events, Handler: func(m *message.Message) error {
		e, err := bus.EventFromMessage(m)
		if err != nil || e.AggregateID != "src" || e.EventType != bankaccount.TransactionAccepted {
			return err
		}
		cmd := commands.New(bankaccount.RecordTransaction, bankaccount.AggregateType, "dst", e.Payload)
		cmd.ID = "mirror-" + e.EventID // a redelivery sends the same command
		return p.Load().Sender.Send(m.Context(), cmd)
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []eventpipe.Consumer{counter, mirror} {
		if err := cat.AddConsumer(c); err != nil {
			t.Fatal(err)
		}
	}
	pl, err := pipeline.Start(ctx, pipeline.Config{Catalog: cat, Consumers: []string{"count", "mirror"}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	p.Store(pl)
	defer pl.Close()

	const transactions = 20
	for _, acc := range []string{"dst", "src"} {
		if res, err := pl.Sender.SendAndWait(ctx, command(t, bankaccount.OpenAccount, bankaccount.AggregateType, acc, struct{}{})); err != nil || res.Status != commands.StatusAccepted {
			t.Fatalf("open %s: %+v, %v", acc, res, err)
		}
	}
	for range transactions {
		c := command(t, bankaccount.RecordTransaction, bankaccount.AggregateType, "src", bankaccount.TransactionAcceptedData{Desc: "pay", Amount: 5})
		if res, err := pl.Sender.SendAndWait(ctx, c); err != nil || res.Status != commands.StatusAccepted {
			t.Fatalf("transaction on src: %+v, %v", res, err)
		}
	}
	if err := pl.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	n := counted.Load()
	stored := 0
	for _, acc := range []string{"src", "dst"} {
		evs, err := pl.Store.Load(ctx, eventstore.Ref{Type: bankaccount.AggregateType, ID: acc}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 1+transactions {
			t.Fatalf("right after Settle %s has %d events, want %d", acc, len(evs), 1+transactions)
		}
		stored += len(evs)
	}
	if n != int64(stored) {
		t.Fatalf("right after Settle the counter counted %d events, want the %d stored", n, stored)
	}
	// Settled stays settled: nothing was left to do.
	if err := pl.Settle(ctx); err != nil || counted.Load() != n {
		t.Fatalf("Settle again: %v, counted %d; want nil and still %d", err, counted.Load(), n)
	}
	if err := pl.Err(); err != nil {
		t.Fatalf("the pipeline stopped: %v", err)
	}
}

// TestSettleEndsWithItsCtxOrThePipeline: Settle returns its ctx's
// error, saying what is pending, when its ctx is cancelled or times out
// while a subscription holds a message without acking it; it returns
// nil once that subscription ends; and an error after Close.
func TestSettleEndsWithItsCtxOrThePipeline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	p, err := pipeline.Start(ctx, pipeline.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cancelled, cancelNow := context.WithCancel(ctx)
	cancelNow()
	if err := p.Settle(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Settle on a cancelled ctx: %v, want context.Canceled", err)
	}

	// A subscription that never acks.
	subCtx, unsubscribe := context.WithCancel(ctx)
	defer unsubscribe()
	topic := p.Topics().Events(bankaccount.AggregateType)
	held, err := p.Bus.Subscribe(subCtx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := p.Sender.SendAndWait(ctx, command(t, bankaccount.OpenAccount, bankaccount.AggregateType, "acc-1", struct{}{})); err != nil || res.Status != commands.StatusAccepted {
		t.Fatalf("open: %+v, %v", res, err)
	}
	<-held // delivered, never acked
	short, stop := context.WithTimeout(ctx, 100*time.Millisecond)
	defer stop()
	err = p.Settle(short)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "1 messages of "+topic+" not acked") {
		t.Fatalf("Settle while a message is held: %v, want context.DeadlineExceeded naming the topic", err)
	}
	t.Log(err)
	unsubscribe()
	if err := p.Settle(ctx); err != nil {
		t.Fatalf("Settle once the holder is gone: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Settle(ctx); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Fatalf("Settle after Close: %v, want an error", err)
	}
}
