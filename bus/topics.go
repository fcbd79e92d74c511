package bus

import (
	"fmt"
	"strings"
)

// MetadataPartitionKey is the message metadata field whose value becomes
// the Kafka record key, and so picks the partition. Everything published
// for one aggregate carries the aggregate id here, which keeps its messages
// in order on one partition.
const MetadataPartitionKey = "partition_key"

// MetadataPartition, set to a partition number (decimal), makes the Kafka
// publisher write the message to that partition of its topic instead of
// the one its partition key hashes to; the record keeps its key. Command
// answers use it to reach the one partition their sender reads
// (commands.MetadataReplyPartition).
const MetadataPartition = "eventpipe_partition"

// Topic names, in one place. Every part of eventpipe builds its topic
// names with these functions so that producers and consumers agree.
const (
	commandsPrefix = "commands."
	eventsPrefix   = "events."
	outboundPrefix = "outbound."
	poisonPrefix   = "poison."
	// AnalyticsPrefix starts the topics of analytics events, one per
	// source (see Topics.Analytics).
	AnalyticsPrefix = "analytics."
	// RepliesTopic carries command results, keyed by command id, in the
	// default namespace (see Topics.Replies).
	RepliesTopic = "commands.replies"
)

// Topics names topics within a namespace: Prefix (e.g. "staging.") is
// put before every name, so several deployments (or test runs) can share
// one Kafka cluster without seeing each other's messages. The zero value
// is the default namespace. EVENTPIPE_TOPIC_PREFIX sets it for the
// binary.
type Topics struct {
	Prefix string
}

// Commands is where commands for an aggregate type are published.
func (t Topics) Commands(aggregateType string) string {
	return t.Prefix + commandsPrefix + topicPart(aggregateType)
}

// Events is where the relay publishes the events of an aggregate type.
func (t Topics) Events(aggregateType string) string {
	return t.Prefix + eventsPrefix + topicPart(aggregateType)
}

// Outbound is where the relay publishes outbox events of a name.
func (t Topics) Outbound(name string) string { return t.Prefix + outboundPrefix + topicPart(name) }

// Poison is where a consumer group parks messages that can never
// succeed, with the reason in metadata.
func (t Topics) Poison(consumerGroup string) string {
	return t.Prefix + poisonPrefix + topicPart(consumerGroup)
}

// Analytics is where the relay publishes the raw analytics events of a
// source, keyed by session id.
func (t Topics) Analytics(sourceID string) string {
	return t.Prefix + AnalyticsPrefix + topicPart(sourceID)
}

// Replies carries command results, keyed by command id.
func (t Topics) Replies() string { return t.Prefix + RepliesTopic }

// RepliesFor is the replies topic of one group of readers, Replies() +
// "." + group: a command whose reply_to metadata names it is answered
// there instead of on Replies() (sagas read their own, see
// commands.MetadataReplyTo). Characters a topic name cannot hold become
// '_'.
func (t Topics) RepliesFor(group string) string { return t.Replies() + "." + topicPart(group) }

// ReplyTopic reports whether topic is Replies() or a RepliesFor topic
// of this namespace, the only topics a command may ask to be answered
// on.
func (t Topics) ReplyTopic(topic string) bool {
	if topic == t.Replies() {
		return true
	}
	group, ok := strings.CutPrefix(topic, t.Replies()+".")
	return ok && validReplyGroup(group)
}

func validReplyGroup(g string) bool {
	return g != "" && len(g) <= 200 && topicPart(g) == g
}

// CommandsTopic is Topics{}.Commands: the default namespace.
func CommandsTopic(aggregateType string) string { return Topics{}.Commands(aggregateType) }

// EventsTopic is Topics{}.Events: the default namespace.
func EventsTopic(aggregateType string) string { return Topics{}.Events(aggregateType) }

// OutboundTopic is Topics{}.Outbound: the default namespace.
func OutboundTopic(name string) string { return Topics{}.Outbound(name) }

// PoisonTopic is Topics{}.Poison: the default namespace.
func PoisonTopic(consumerGroup string) string { return Topics{}.Poison(consumerGroup) }

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
		return fmt.Errorf("bus: topic %q: must be 1–249 characters, not \".\" or \"..\"", name)
	}
	if topicPart(name) != name {
		return fmt.Errorf("bus: topic %q: only [a-zA-Z0-9._-] allowed", name)
	}
	return nil
}
