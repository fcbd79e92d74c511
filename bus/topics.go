package bus

import (
	"fmt"
	"strings"
)

// Topic names, in one place. Every part of eventpipe builds its topic
// names with these functions so that producers and consumers agree.
const (
	commandsPrefix = "commands."
	eventsPrefix   = "events."
	outboundPrefix = "outbound."
	poisonPrefix   = "poison."
	// RepliesTopic carries command results, keyed by command id.
	RepliesTopic = "commands.replies"
)

// CommandsTopic is where commands for an aggregate type are published.
func CommandsTopic(aggregateType string) string { return commandsPrefix + topicPart(aggregateType) }

// EventsTopic is where the relay publishes the events of an aggregate type.
func EventsTopic(aggregateType string) string { return eventsPrefix + topicPart(aggregateType) }

// OutboundTopic is where the relay publishes outbox events of a name.
func OutboundTopic(name string) string { return outboundPrefix + topicPart(name) }

// PoisonTopic is where a consumer group parks messages that can never
// succeed, with the reason in metadata.
func PoisonTopic(consumerGroup string) string { return poisonPrefix + topicPart(consumerGroup) }

// topicPart maps a name onto Kafka's legal topic characters
// ([a-zA-Z0-9._-]); anything else becomes '_'. Aggregate and event names
// are already validated by the event store, so this only guards.
func topicPart(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		default:
			return '_'
		}
	}, s)
}

// ValidateTopic reports whether name is a legal Kafka topic name.
func ValidateTopic(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return fmt.Errorf("bus: topic %q: must be 1–249 characters and not . or ..", name)
	}
	if topicPart(name) != name {
		return fmt.Errorf("bus: topic %q: only [a-zA-Z0-9._-] allowed", name)
	}
	return nil
}
