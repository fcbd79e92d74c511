package kafka_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

func TestConfigsRejectMissingFields(t *testing.T) {
	if _, err := kafka.NewPublisher(kafka.PublisherConfig{}); err == nil {
		t.Error("publisher without brokers was accepted")
	}
	if _, err := kafka.NewSubscriber(kafka.SubscriberConfig{Brokers: []string{"127.0.0.1:9092"}}); err == nil {
		t.Error("subscriber without a consumer group was accepted")
	}
}

// TestPublishAndConsumeInAGroupKeepsPerKeyOrder produces through
// watermill-kafka onto the stack's broker and consumes with two members of
// one consumer group: every message arrives, and the messages of one
// partition key arrive in publish order (a rebalance may repeat some, never
// skip or reorder them).
func TestPublishAndConsumeInAGroupKeepsPerKeyOrder(t *testing.T) {
	const keys, perKey = 10, 30
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.UniqueName(t, "bus")
	group := topic + "-group"

	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	for i := range perKey {
		for k := range keys {
			msg := message.NewMessage(watermill.NewULID(), []byte(strconv.Itoa(i)))
			msg.Metadata.Set(bus.MetadataPartitionKey, fmt.Sprintf("key-%d", k))
			if err := pub.Publish(topic, msg); err != nil {
				t.Fatalf("publish: %v", err)
			}
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	next := map[string]int{}
	total := 0
	for member := range 2 {
		sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{Brokers: brokers, ConsumerGroup: group, Logger: watermill.NopLogger{}})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		msgs, err := sub.Subscribe(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for m := range msgs {
				key := m.Metadata.Get(bus.MetadataPartitionKey)
				n, _ := strconv.Atoi(string(m.Payload))
				mu.Lock()
				switch {
				case n > next[key]:
					t.Errorf("member %d: key %s got #%d before #%d", member, key, n, next[key])
				case n == next[key]:
					next[key] = n + 1
					total++
				default:
					// A redelivery after a rebalance: at least once, allowed.
				}
				mu.Unlock()
				m.Ack()
			}
		}()
	}
	integration.AwaitProgress(t, "messages consumed in key order", func() int64 {
		mu.Lock()
		defer mu.Unlock()
		return int64(total)
	}, keys*perKey)
}
