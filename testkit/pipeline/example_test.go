package pipeline_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/testkit/pipeline"
)

// The whole pipeline in one process, with no service running: commands
// answered by the real command handlers, appended to the memory store
// and relayed onto the bus. For tests and local experiments only.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := pipeline.Start(ctx, pipeline.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer p.Close()

	// Every message of a topic, from the first: the bus is persistent.
	events, err := p.Bus.Subscribe(ctx, p.Topics().Events(bankaccount.AggregateType))
	if err != nil {
		panic(err)
	}
	for _, c := range []struct {
		typ     string
		payload any
	}{
		{bankaccount.OpenAccount, struct{}{}},
		{bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: "salary", Amount: 100}},
		{bankaccount.RecordTransaction, bankaccount.TransactionAcceptedData{Desc: "tv", Amount: -5000}},
	} {
		cmd, err := commands.NewJSON(c.typ, bankaccount.AggregateType, "acc-1", c.payload)
		if err != nil {
			panic(err)
		}
		res, err := p.Sender.SendAndWait(ctx, cmd)
		if err != nil {
			panic(err)
		}
		fmt.Println(strings.TrimSpace(fmt.Sprint(c.typ, " → ", res.Status, " ", res.Reason)))
	}

	stored, err := p.Store.Load(ctx, eventstore.Ref{Type: bankaccount.AggregateType, ID: "acc-1"}, 0)
	if err != nil {
		panic(err)
	}
	// In the order they were appended, each acked before the next comes.
	for range stored {
		msg := <-events
		e, err := bus.EventFromMessage(msg)
		if err != nil {
			panic(err)
		}
		msg.Ack()
		fmt.Println("relayed", e.EventType, "sequence", e.Sequence)
	}
	// Output:
	// OpenAccount → accepted
	// RecordTransaction → accepted
	// RecordTransaction → rejected insufficient funds
	// relayed AccountOpened sequence 1
	// relayed TransactionAccepted sequence 2
}
