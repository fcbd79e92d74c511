package testenv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus/kafka"
)

// Consume reads n messages from topic as a member of group through the
// project's Watermill subscriber, acking each, then waits until the
// group's committed offsets cover them (closing right after the last Ack
// can drop the final offset marks). It fails tb if n messages do not
// arrive within 30 s.
func Consume(tb testing.TB, brokers []string, group, topic string, n int) []*message.Message {
	tb.Helper()
	start := sumOffsets(CommittedOffsets(tb, brokers, group, topic))
	sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{Brokers: brokers, ConsumerGroup: group, Logger: watermill.NopLogger{}})
	if err != nil {
		tb.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch, err := sub.Subscribe(ctx, topic)
	if err != nil {
		tb.Fatal(err)
	}
	var got []*message.Message
	for len(got) < n {
		select {
		case m := <-ch:
			got = append(got, m)
			m.Ack()
		case <-ctx.Done():
			tb.Fatalf("group %s got %d of %d messages from %s", group, len(got), n, topic)
		}
	}
	WaitCommitted(tb, brokers, group, topic, start+int64(n))
	return got
}

// CommittedOffsets returns group's committed offset per partition of topic
// (empty when the group has committed nothing).
func CommittedOffsets(tb testing.TB, brokers []string, group, topic string) map[int32]int64 {
	tb.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = kafka.KafkaVersion
	client, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		tb.Fatalf("kafka client: %v", err)
	}
	defer client.Close()
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		tb.Fatalf("cluster admin: %v", err)
	}
	parts, err := client.Partitions(topic)
	if err != nil {
		tb.Fatalf("partitions of %s: %v", topic, err)
	}
	resp, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: parts})
	if errors.Is(err, sarama.ErrGroupIDNotFound) {
		return map[int32]int64{}
	}
	if err != nil {
		tb.Fatalf("committed offsets of %s: %v", group, err)
	}
	out := map[int32]int64{}
	for p, block := range resp.Blocks[topic] {
		if block.Offset >= 0 {
			out[p] = block.Offset
		}
	}
	return out
}

// WaitCommitted waits up to 15 s until group's committed offsets on topic
// add up to at least min, and returns them.
func WaitCommitted(tb testing.TB, brokers []string, group, topic string, min int64) map[int32]int64 {
	tb.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		offs := CommittedOffsets(tb, brokers, group, topic)
		if sumOffsets(offs) >= min {
			return offs
		}
		if time.Now().After(deadline) {
			tb.Fatalf("group %s committed %d offsets on %s, want %d", group, sumOffsets(offs), topic, min)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func sumOffsets(offs map[int32]int64) int64 {
	var sum int64
	for _, o := range offs {
		sum += o
	}
	return sum
}
