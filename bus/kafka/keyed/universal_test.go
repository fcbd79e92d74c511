package keyed_test

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"

	"github.com/eventpipe/eventpipe/bus/kafka/keyed"
	"github.com/eventpipe/eventpipe/dev/testenv"
)

// TestUniversalPubSub runs Watermill's universal Pub/Sub suite on the
// stack's broker against bus/kafka's Publisher and the keyed Subscriber.
// The Features claimed are bus/kafka's subscriber's (see its
// TestUniversalPubSubWithSubscriber): the keyed subscriber promises
// order only per key, and the suite's messages have no key, so the
// Publisher spreads them over the partitions:
//
//   - ConsumerGroups, Persistent: group members resuming from committed
//     offsets; two groups each get every message.
//   - no ExactlyOnceDelivery: at least once.
//   - no GuaranteedOrder: per-key order only, which
//     TestRouterProcessesEachKeyInOrderWithManyMessagesOfAPartitionInFlight
//     and TestSecondMemberTakesOverPartitionsWithoutBreakingKeyOrder check.
//   - no NewSubscriberReceivesOldMessages: the plain constructor makes
//     members of one group per test, which share partitions.
//   - no ContextPreserved: a publisher's context does not travel.
//   - ForceShort: smaller counts, to keep the run short.
func TestUniversalPubSub(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	features := tests.Features{
		ConsumerGroups: true,
		Persistent:     true,
		ForceShort:     true,
	}
	plain, withGroup := testenv.UniversalPubSub(brokers, "wm-keyed", keyed.Subscribers(keyed.Config{Brokers: brokers, Logger: watermill.NopLogger{}}))
	tests.TestPubSub(t, features, plain, withGroup)
}
