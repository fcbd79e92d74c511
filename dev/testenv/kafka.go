package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// Consume reads n messages from topic as a member of group through the
// project's Watermill subscriber, acking each, then waits until the
// group's committed offsets cover them (closing right after the last Ack
// can drop the final offset marks). It fails tb if no message arrives
// for integration.HangAfter while it waits for the n.
func Consume(tb testing.TB, brokers []string, group, topic string, n int) []*message.Message {
	tb.Helper()
	start := sumOffsets(CommittedOffsets(tb, brokers, group, topic))
	sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{Brokers: brokers, ConsumerGroup: group, Logger: watermill.NopLogger{}})
	if err != nil {
		tb.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := sub.Subscribe(ctx, topic)
	if err != nil {
		tb.Fatal(err)
	}
	hang := integration.HangAfter()
	var got []*message.Message
	for len(got) < n {
		select {
		case m := <-ch:
			got = append(got, m)
			m.Ack()
		case <-time.After(hang):
			tb.Fatalf("group %s got %d of %d messages from %s, then none for %v (%s)", group, len(got), n, topic, hang, integration.EnvHangAfter)
		}
	}
	WaitCommitted(tb, brokers, group, topic, start+int64(n))
	return got
}

// CommittedOffsets returns group's committed offset per partition of topic
// (empty when the group has committed nothing, or the topic does not
// exist), read with kafka.ConsumerLag over plain text.
func CommittedOffsets(tb testing.TB, brokers []string, group, topic string) map[int32]int64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	rows, err := kafka.ConsumerLag(ctx, kafka.Cluster{Brokers: brokers}, group, []string{topic})
	if err != nil {
		tb.Fatalf("committed offsets of %s on %s: %v", group, topic, err)
	}
	out := map[int32]int64{}
	for _, r := range rows {
		if r.Committed >= 0 {
			out[r.Partition] = r.Committed
		}
	}
	return out
}

// WaitCommitted waits until group's committed offsets on topic add up to
// at least min, and returns them. It fails tb when they stop growing for
// integration.HangAfter.
func WaitCommitted(tb testing.TB, brokers []string, group, topic string, min int64) map[int32]int64 {
	tb.Helper()
	var offs map[int32]int64
	integration.AwaitProgress(tb, fmt.Sprintf("offsets committed by group %s on %s", group, topic), func() int64 {
		offs = CommittedOffsets(tb, brokers, group, topic)
		return sumOffsets(offs)
	}, min)
	return offs
}

func sumOffsets(offs map[int32]int64) int64 {
	var sum int64
	for _, o := range offs {
		sum += o
	}
	return sum
}
