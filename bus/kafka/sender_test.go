package kafka_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/internal/testenv"
)

// TestSendAndWaitGetsEachCommandsOwnResult sends commands concurrently
// through the stack's Kafka while a responder answers each on the replies
// topic; every sender gets the result for its own command id.
func TestSendAndWaitGetsEachCommandsOwnResult(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	aggType := testenv.UniqueName(t, "agg")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// The responder: echo each command's aggregate id back as the reason.
	sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{Brokers: brokers, ConsumerGroup: aggType + "-handler", Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	in, err := sub.Subscribe(ctx, bus.CommandsTopic(aggType))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for msg := range in {
			cmd, err := commands.FromMessage(msg)
			if err != nil {
				t.Errorf("responder: %v", err)
				msg.Ack()
				continue
			}
			reply, _ := commands.Result{CommandID: cmd.ID, Status: commands.StatusAccepted, Reason: cmd.AggregateID, Version: 1}.ToMessage(cmd.CorrelationID)
			if err := pub.Publish(bus.RepliesTopic, reply); err != nil {
				t.Errorf("responder publish: %v", err)
			}
			msg.Ack()
		}
	}()

	sender, err := kafka.NewSender(kafka.SenderConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("agg-%d", i)
			cmd := commands.New("Ping", aggType, id, json.RawMessage(`{}`))
			res, err := sender.SendAndWait(ctx, cmd)
			if err != nil {
				t.Errorf("send %s: %v", id, err)
				return
			}
			if res.CommandID != cmd.ID || res.Reason != id || res.Status != commands.StatusAccepted {
				t.Errorf("command %s got result %+v", cmd.ID, res)
			}
		}()
	}
	wg.Wait()
}
