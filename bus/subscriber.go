package bus

import "github.com/ThreeDotsLabs/watermill/message"

// SubscriberConstructor returns a subscriber that reads as a member of
// consumer group group, the way Watermill's components/cqrs take
// subscribers: a consumer asks for one per topic it reads and closes each
// when it stops. bus/kafka.Subscribers builds Kafka subscribers; a test
// can hand out Watermill's GoChannel instead (which has no groups: every
// subscriber sees every message).
type SubscriberConstructor func(group string) (message.Subscriber, error)
