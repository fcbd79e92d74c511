package e2e_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/bus/kafka/keyed"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
)

// BenchmarkCommandsThroughBus measures commands/s end to end through the
// bus: 64 senders each SendAndWait a transaction command for their own
// account; the command travels over Kafka to the running handlers, which
// append to DynamoDB Local and publish the result that the sender waits
// for. The baseline, in the same run on the same accounts, is the same
// commands given to the Dispatcher directly (load, decide, append,
// publish the result) with the same concurrency: the ratio is what the
// commands topic and its consumer group cost. A third side sends the same
// commands through a second write side, in a namespace of its own, whose
// handlers opt in to the key-ordered subscriber (bus/kafka/keyed): the
// default subscriber handles one command per partition at a time (64
// accounts share 12 partitions), the keyed one one per account. b.N is
// the number of commands on each side. Nothing about time is asserted.
func BenchmarkCommandsThroughBus(b *testing.B) {
	const senders = 64
	ep := rigs.Endpoints(b)
	svc, err := eventpipe.NewWriteSide(context.Background(), eventpipe.WriteSideConfig{Process: eventpipe.Process{Endpoints: ep, Logger: slog.New(slog.DiscardHandler)}, ConsumerGroup: testenv.UniqueName(b, "g")})
	if err != nil {
		b.Fatal(err)
	}
	defer svc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- svc.RunCommandHandlers(ctx) }()
	defer func() { cancel(); <-done }()
	sender, err := kafka.NewSender(kafka.SenderConfig{Brokers: ep.KafkaBrokers, Topics: bus.Topics{Prefix: ep.TopicPrefix}, Logger: watermill.NopLogger{}})
	if err != nil {
		b.Fatal(err)
	}
	defer sender.Close()
	// The keyed side: its own topics, group and handlers.
	kep := ep
	kep.TopicPrefix = testenv.UniqueName(b, "keyed") + "."
	keyedSvc, err := eventpipe.NewWriteSide(context.Background(), eventpipe.WriteSideConfig{Process: eventpipe.Process{Endpoints: kep, Logger: slog.New(slog.DiscardHandler)}, ConsumerGroup: testenv.UniqueName(b, "g"),
		NewSubscriber: keyed.Subscribers(keyed.Config{Brokers: kep.KafkaBrokers, Logger: watermill.NopLogger{}}),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer keyedSvc.Close()
	keyedDone := make(chan error, 1)
	go func() { keyedDone <- keyedSvc.RunCommandHandlers(ctx) }()
	defer func() { cancel(); <-keyedDone }()
	keyedSender, err := kafka.NewSender(kafka.SenderConfig{Brokers: kep.KafkaBrokers, Topics: bus.Topics{Prefix: kep.TopicPrefix}, Logger: watermill.NopLogger{}})
	if err != nil {
		b.Fatal(err)
	}
	defer keyedSender.Close()

	account := func(side string, g int) string { return fmt.Sprintf("%s-%d", side, g) }
	transact := func(side string, g, n int) commands.Command {
		cmd, err := commands.NewJSON(bankaccount.RecordTransaction, bankaccount.AggregateType, account(side, g), bankaccount.TransactionAcceptedData{Desc: fmt.Sprint(n), Amount: 1})
		if err != nil {
			b.Fatal(err)
		}
		return cmd
	}
	wait, waitCancel := context.WithTimeout(ctx, 10*time.Minute)
	defer waitCancel()
	for g := range senders {
		for _, side := range []string{"bus", "direct", "keyed"} {
			cmd, _ := commands.NewJSON(bankaccount.OpenAccount, bankaccount.AggregateType, account(side, g), struct{}{})
			if res, err := svc.Dispatcher.Dispatch(wait, cmd); err != nil || res.Status != commands.StatusAccepted {
				b.Fatalf("open %s: %+v %v", account(side, g), res, err)
			}
		}
	}
	// Warm the group up: the first command waits for partition assignment.
	if _, err := sender.SendAndWait(wait, transact("bus", 0, -1)); err != nil {
		b.Fatal(err)
	}
	if _, err := keyedSender.SendAndWait(wait, transact("keyed", 0, -1)); err != nil {
		b.Fatal(err)
	}

	run := func(send func(g, n int) (commands.Result, error)) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for g := range senders {
			wg.Go(func() {
				for n := g; n < b.N; n += senders {
					res, err := send(g, n)
					if err != nil || res.Status != commands.StatusAccepted {
						b.Errorf("command %d: %+v %v", n, res, err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	b.ResetTimer()
	direct := run(func(g, n int) (commands.Result, error) {
		return svc.Dispatcher.Dispatch(wait, transact("direct", g, n))
	})
	viaBus := run(func(g, n int) (commands.Result, error) { return sender.SendAndWait(wait, transact("bus", g, n)) })
	viaKeyed := run(func(g, n int) (commands.Result, error) { return keyedSender.SendAndWait(wait, transact("keyed", g, n)) })
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(b.N)/viaBus.Seconds(), "commands/s")
	b.ReportMetric(float64(b.N)/direct.Seconds(), "direct_commands/s")
	b.ReportMetric(direct.Seconds()/viaBus.Seconds(), "ratio")
	b.ReportMetric(float64(b.N)/viaKeyed.Seconds(), "keyed_commands/s")
	b.ReportMetric(direct.Seconds()/viaKeyed.Seconds(), "keyed_ratio")
}
