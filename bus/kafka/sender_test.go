package kafka_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestSendAndWaitGetsEachCommandsOwnResult sends commands concurrently
// through the stack's Kafka while a responder answers each on the replies
// topic; every sender gets the result for its own command id.
func TestSendAndWaitGetsEachCommandsOwnResult(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	aggType := testenv.UniqueName(t, "agg")
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()

	// The responder: echo each command's aggregate id back as the reason.
	respond(ctx, t, brokers, bus.Topics{}, aggType, func(cmd commands.Command, asked string, answer answerFunc) {
		answer(cmd.AggregateID, asked)
	})

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

// TestSendersReadOnlyTheirOwnReplyPartition: each sender asks for its
// answers on the one replies partition it reads. A responder that first
// publishes a wrong answer on another partition, then the right one on
// the asked partition, shows the sender never saw the first; and two
// senders pinned to two partitions each get their own answers.
func TestSendersReadOnlyTheirOwnReplyPartition(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topics := bus.Topics{Prefix: testenv.UniqueName(t, "rp") + "."}
	aggType := "agg"
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	respond(ctx, t, brokers, topics, aggType, func(cmd commands.Command, asked string, answer answerFunc) {
		other := "0"
		if asked == "0" {
			other = "1"
		}
		answer("read another sender's partition", other)
		time.Sleep(300 * time.Millisecond) // the wrong answer is read first by a sender that reads it
		answer("partition "+asked, asked)
	})

	for _, p := range []int32{0, 1} {
		sender, err := kafka.NewSender(kafka.SenderConfig{Brokers: brokers, Topics: topics, ReplyPartition: &p, Logger: watermill.NopLogger{}})
		if err != nil {
			t.Fatal(err)
		}
		defer sender.Close()
		if got, err := sender.ReplyPartition(); err != nil || got != p {
			t.Fatalf("ReplyPartition() = %d, %v; want %d", got, err, p)
		}
		for i := range 3 {
			cmd := commands.New("Ping", aggType, fmt.Sprintf("a-%d-%d", p, i), json.RawMessage(`{}`))
			res, err := sender.SendAndWait(ctx, cmd)
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("partition %d", p); res.CommandID != cmd.ID || res.Reason != want {
				t.Fatalf("sender on partition %d got %+v, want the answer %q", p, res, want)
			}
		}
	}

	// A partition the replies topic does not have is refused on first use.
	far := int32(4096)
	sender, err := kafka.NewSender(kafka.SenderConfig{Brokers: brokers, Topics: topics, ReplyPartition: &far, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	if _, err := sender.ReplyPartition(); err == nil || !strings.Contains(err.Error(), "4096") {
		t.Fatalf("ReplyPartition 4096: %v, want an error naming it", err)
	}
}

// answerFunc publishes an accepted answer to the command at hand with
// reason, on the replies partition given ("" for the key's).
type answerFunc func(reason, partition string)

// respond runs a stand-in for the command handlers until ctx ends: it
// reads the commands of aggType in the namespace topics and calls handle
// with each command, the replies partition it asked for, and a function
// that answers it on the replies topic.
func respond(ctx context.Context, t *testing.T, brokers []string, topics bus.Topics, aggType string, handle func(cmd commands.Command, asked string, answer answerFunc)) {
	t.Helper()
	sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{Brokers: brokers, ConsumerGroup: topics.Prefix + aggType + "-handler", Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Close() })
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	in, err := sub.Subscribe(ctx, topics.Commands(aggType))
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
			handle(cmd, msg.Metadata.Get(commands.MetadataReplyPartition), func(reason, partition string) {
				reply, _ := commands.Result{CommandID: cmd.ID, Status: commands.StatusAccepted, Reason: reason, Version: 1}.ToMessage(cmd.CorrelationID)
				reply.Metadata.Set(bus.MetadataPartition, partition)
				if err := pub.Publish(topics.Replies(), reply); err != nil {
					t.Errorf("responder publish: %v", err)
				}
			})
			msg.Ack()
		}
	}()
}

// TestASigningSenderTakesOnlyTheAnswerSignedForItsCommand: a Sender with
// a producer key signs its commands (the stand-in handlers verify each),
// and of three replies with the command's id, an unsigned one, one signed
// for another command and the one signed for its command, in that order,
// SendAndWait returns the last.
func TestASigningSenderTakesOnlyTheAnswerSignedForItsCommand(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topics := bus.Topics{Prefix: testenv.UniqueName(t, "signed") + "."}
	aggType := "agg"
	key := []byte("0123456789abcdef0123456789abcdef-producer")
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()

	sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{Brokers: brokers, ConsumerGroup: topics.Prefix + "handler", Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Close() })
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	in, err := sub.Subscribe(ctx, topics.Commands(aggType))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for msg := range in {
			msg.Ack()
			cmd, err := commands.FromMessage(msg)
			sig := msg.Metadata.Get(commands.MetadataSignature)
			if err != nil || msg.Metadata.Get(commands.MetadataKeyID) != "billing" || !commands.VerifyCommand(key, cmd, "", sig) {
				t.Errorf("the handlers got %+v (%v) signed %q by %q: want it signed with the producer key", cmd, err, sig, msg.Metadata.Get(commands.MetadataKeyID))
				continue
			}
			other := cmd
			other.Payload = []byte(`{"amount":1000000}`)
			for _, r := range []struct {
				reason, signedFor string
			}{{"unsigned", ""}, {"signed for another command", commands.SignCommand(key, other, "")}, {"genuine", sig}} {
				res := commands.Result{CommandID: cmd.ID, Status: commands.StatusAccepted, Reason: r.reason, AggregateType: cmd.AggregateType, AggregateID: cmd.AggregateID, Version: 1}
				if r.signedFor != "" {
					res.Signature = commands.SignResult(key, r.signedFor, res)
				}
				reply, _ := res.ToMessage(cmd.CorrelationID)
				reply.Metadata.Set(bus.MetadataPartition, msg.Metadata.Get(commands.MetadataReplyPartition))
				if err := pub.Publish(topics.Replies(), reply); err != nil {
					t.Errorf("publish: %v", err)
				}
			}
		}
	}()

	sender, err := kafka.NewSender(kafka.SenderConfig{Brokers: brokers, Topics: topics, Signer: commands.Signer{KeyID: "billing", Key: key}, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	cmd := commands.New("Pay", aggType, "a-1", json.RawMessage(`{"amount":5}`))
	cmd.Actor = "alice"
	res, err := sender.SendAndWait(ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	if res.CommandID != cmd.ID || res.Reason != "genuine" {
		t.Fatalf("SendAndWait returned %+v, want the answer signed for its command", res)
	}
}
