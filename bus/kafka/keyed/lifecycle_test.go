package keyed_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/bus/kafka/keyed"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/dev/testservers"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// drainUntilClosed fails t unless ch is closed within
// integration.HangAfter (messages still arriving are nacked).
func drainUntilClosed(t *testing.T, ch <-chan *message.Message) {
	t.Helper()
	d := integration.HangAfter()
	deadline := time.After(d)
	for {
		select {
		case m, open := <-ch:
			if !open {
				return
			}
			m.Nack()
		case <-deadline:
			t.Fatalf("the channel is still open after %s", d)
		}
	}
}

// waitGroupSize waits until group has n members.
func waitGroupSize(t *testing.T, obs *testenv.GroupObserver, group string, n int) {
	t.Helper()
	integration.Await(t, fmt.Sprintf("group %s with %d members", group, n), func() error {
		snap, err := obs.Describe(group)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Members) != n {
			return fmt.Errorf("group %s", snap)
		}
		return nil
	})
}

// TestSubscriptionStopsWhenItsContextEnds runs two subscriptions of one
// Subscriber in one group and cancels the first one's context: without
// Close, its channel closes, its member leaves the group and the
// Subscriber forgets it, while the second still gets new messages; Close
// then stops the second.
func TestSubscriptionStopsWhenItsContextEnds(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := createTopic(t, brokers, "keyed-subctx", 2)
	group := topic + "-group"
	obs := testenv.NewGroupObserver(t, brokers)
	sub := newSubscriber(t, keyed.Config{Brokers: brokers, ConsumerGroup: group})
	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	first, err := sub.Subscribe(ctx1, topic)
	if err != nil {
		t.Fatal(err)
	}
	second, err := sub.Subscribe(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	waitGroupSize(t, obs, group, 2)
	if n := keyed.SubscriptionCount(sub); n != 2 {
		t.Fatalf("the Subscriber holds %d subscriptions, want 2", n)
	}

	cancel1()
	drainUntilClosed(t, first)
	waitGroupSize(t, obs, group, 1)
	// The Subscriber forgets the stopped subscription once its stop has
	// returned, just after the channel closed.
	integration.Await(t, "the Subscriber to forget the stopped subscription", func() error {
		if n := keyed.SubscriptionCount(sub); n != 1 {
			return fmt.Errorf("the Subscriber holds %d subscriptions, want 1", n)
		}
		return nil
	})

	var ids []string
	for i := range 4 {
		ids = append(ids, msgID(fmt.Sprintf("key-%d", i), 0))
	}
	publish(t, brokers, topic, ids)
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for len(want) > 0 {
		select {
		case m, open := <-second:
			if !open {
				t.Fatal("the second subscription's channel closed")
			}
			delete(want, m.UUID)
			m.Ack()
		case <-time.After(integration.HangAfter()):
			t.Fatalf("the second subscription got no message for %v (%s), still waiting for %v", integration.HangAfter(), integration.EnvHangAfter, want)
		}
	}

	start := time.Now()
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close stopped the second subscription in %s", time.Since(start).Round(time.Millisecond))
	drainUntilClosed(t, second)
	waitGroupSize(t, obs, group, 0)
	if _, err := sub.Subscribe(context.Background(), topic); !errors.Is(err, keyed.ErrClosed) {
		t.Errorf("Subscribe after Close: %v, want ErrClosed", err)
	}
}

// TestSubscribeInitializeCreatesMissingTopicsWithBrokerDefaults runs a
// broker that creates no topic on its own and makes 5 partitions by
// default: SubscribeInitialize creates a missing topic with 5 partitions,
// succeeds again on it, and leaves a topic that exists with 2 as it is.
func TestSubscribeInitializeCreatesMissingTopicsWithBrokerDefaults(t *testing.T) {
	broker := testservers.StartKafkaBrokerWithConfig(t, testservers.KafkaBrokerConfig{
		DataDir: t.TempDir(), Partitions: 5, Args: []string{"--no-auto-create-topics"}})
	brokers := []string{broker.Addr}
	sub := newSubscriber(t, keyed.Config{Brokers: brokers, ConsumerGroup: "g"})
	partitions := func(topic string) int {
		t.Helper()
		cfg := sarama.NewConfig()
		cfg.Version = kafka.KafkaVersion
		admin, err := sarama.NewClusterAdmin(brokers, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close()
		metas, err := admin.DescribeTopics([]string{topic})
		if err != nil || len(metas) != 1 {
			t.Fatalf("describe %s: %v (%d answers)", topic, err, len(metas))
		}
		if errors.Is(metas[0].Err, sarama.ErrUnknownTopicOrPartition) {
			return -1
		}
		return len(metas[0].Partitions)
	}
	topic := testenv.UniqueName(t, "keyed-init")
	if n := partitions(topic); n != -1 {
		t.Fatalf("topic %s exists before SubscribeInitialize with %d partitions", topic, n)
	}
	for i := range 2 {
		if err := sub.SubscribeInitialize(topic); err != nil {
			t.Fatalf("SubscribeInitialize #%d: %v", i+1, err)
		}
		if n := partitions(topic); n != 5 {
			t.Fatalf("after SubscribeInitialize #%d the topic has %d partitions, want the broker's default 5", i+1, n)
		}
	}
	existing := createTopic(t, brokers, "keyed-init-existing", 2)
	if err := sub.SubscribeInitialize(existing); err != nil {
		t.Fatalf("SubscribeInitialize on an existing topic: %v", err)
	}
	if n := partitions(existing); n != 2 {
		t.Fatalf("the existing topic has %d partitions after SubscribeInitialize, want its 2", n)
	}
}
