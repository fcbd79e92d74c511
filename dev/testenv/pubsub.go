package testenv

import (
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"

	"github.com/eventpipe/eventpipe/bus/kafka"
)

// UniversalPubSub returns the constructors Watermill's universal Pub/Sub
// suite (tests.TestPubSub) takes for bus/kafka's Publisher on brokers with
// the subscribers newSub builds. Every subscriber the plain constructor
// makes for one test (one *testing.T) is in the same group, named
// uniquely after groupPrefix; the consumer-group constructor uses the
// group it is given.
func UniversalPubSub(brokers []string, groupPrefix string, newSub func(group string) (message.Subscriber, error)) (tests.PubSubConstructor, tests.ConsumerGroupPubSubConstructor) {
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
			group = UniqueName(t, groupPrefix)
			groups[t] = group
		}
		mu.Unlock()
		return withGroup(t, group)
	}
	return plain, withGroup
}
