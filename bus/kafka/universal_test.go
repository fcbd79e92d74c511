package kafka_test

import (
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"

	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/internal/testenv"
)

// universalFeatures is what bus/kafka's Publisher with either of the
// project's subscribers promises, as Watermill's universal suite reads it:
//
//   - ConsumerGroups: each subscriber is a member of a consumer group, and
//     two groups each get every message.
//   - Persistent: records stay on the topic; a later subscriber of the
//     group resumes from its committed offsets.
//   - no ExactlyOnceDelivery: delivery is at least once.
//   - no GuaranteedOrder (nor GuaranteedOrderWithSingleSubscriber): order
//     holds per partition key, and the suite publishes unkeyed messages,
//     which the Publisher spreads over the topic's partitions.
//   - no NewSubscriberReceivesOldMessages: the suite's constructor makes
//     members of one group per test (as Kafka consumers are used), and a
//     new member of a group shares its partitions instead of reading the
//     topic again; a new group does read old records (InitialOffset is the
//     oldest), which TestConsumerGroups checks.
//   - no ContextPreserved: a publisher's context does not travel through
//     Kafka.
//   - ForceShort: the suite's smaller message and subscriber counts, to
//     keep the run short; no RestartServiceCommand, so TestReconnect is
//     skipped (the stack's broker is shared by every test).
var universalFeatures = tests.Features{
	ConsumerGroups: true,
	Persistent:     true,
	ForceShort:     true,
}

// universalConstructors returns the suite's constructors for the
// Publisher and the subscribers newSub builds. Every subscriber the
// plain constructor makes for one test (one *testing.T) is in the same,
// unique group; the consumer-group constructor uses the group it is
// given.
func universalConstructors(brokers []string, newSub func(group string) (message.Subscriber, error)) (tests.PubSubConstructor, tests.ConsumerGroupPubSubConstructor) {
	withGroup := func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
		pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
		if err != nil {
			t.Fatalf("publisher: %v", err)
		}
		sub, err := newSub(group)
		if err != nil {
			_ = pub.Close()
			t.Fatalf("subscriber in group %s: %v", group, err)
		}
		return pub, sub
	}
	var mu sync.Mutex
	groups := map[*testing.T]string{}
	plain := func(t *testing.T) (message.Publisher, message.Subscriber) {
		mu.Lock()
		group, ok := groups[t]
		if !ok {
			group = testenv.UniqueName(t, "wm")
			groups[t] = group
		}
		mu.Unlock()
		return withGroup(t, group)
	}
	return plain, withGroup
}

// TestUniversalPubSubWithSubscriber runs Watermill's universal Pub/Sub
// suite on the stack's broker against Publisher and Subscriber.
func TestUniversalPubSubWithSubscriber(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	plain, withGroup := universalConstructors(brokers, kafka.Subscribers(kafka.SubscriberConfig{
		Brokers: brokers, Logger: watermill.NopLogger{},
	}))
	tests.TestPubSub(t, universalFeatures, plain, withGroup)
}
