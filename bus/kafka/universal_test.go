package kafka_test

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"

	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
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

// TestUniversalPubSubWithSubscriber runs Watermill's universal Pub/Sub
// suite on the stack's broker against Publisher and Subscriber.
func TestUniversalPubSubWithSubscriber(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	plain, withGroup := testenv.UniversalPubSub(brokers, "wm", kafka.Subscribers(kafka.SubscriberConfig{
		Brokers: brokers, Logger: watermill.NopLogger{},
	}))
	tests.TestPubSub(t, universalFeatures, plain, withGroup)
}
