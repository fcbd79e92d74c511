// Package poison reads the poison topics of eventpipe's consumers and
// redrives their messages to the topics they were poisoned from, each
// at most once in effect (see Redriver).
//
// A message reaches a poison topic in one of three forms, told apart by
// its metadata (Kafka headers):
//
//   - Watermill's poison middleware (bus.Middlewares: the command
//     handlers, read and search models without parking, sagas, the
//     snapshotter, handlers) adds reason_poisoned, topic_poisoned,
//     handler_poisoned and subscriber_poisoned to the message as it was
//     delivered. The original partition and offset are not recorded.
//   - The analytics aggregator republishes the record's value and key
//     with reason, topic, partition and offset.
//   - The relay publishes a DynamoDB stream record that did not translate,
//     with reason, shard_id and stream_sequence_number: it has no topic to
//     go back to, so it cannot be redriven (ErrNoOrigin).
//
// Read reads a poison topic from its start to its end (kafka.ReadTopic);
// Redriver publishes a poison message again, without its poison fields,
// and records it in Postgres (table poison_redrives, migrations/postgres
// 009) so that a second redrive publishes nothing.
package poison

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/eventpipe/eventpipe/bus"
)

// Metadata keys of the three poison forms (see the package comment).
const (
	// Watermill's poison middleware.
	KeyReasonPoisoned     = middleware.ReasonForPoisonedKey
	KeyTopicPoisoned      = middleware.PoisonedTopicKey
	KeyHandlerPoisoned    = middleware.PoisonedHandlerKey
	KeySubscriberPoisoned = middleware.PoisonedSubscriberKey
	// The analytics aggregator (analytics/aggregator) and the relay.
	KeyReason    = "reason"
	KeyTopic     = "topic"
	KeyPartition = "partition"
	KeyOffset    = "offset"
	KeyShardID   = "shard_id"
	KeyStreamSeq = "stream_sequence_number"
	// KeyRedrivenFrom is set on every redriven copy: the poison topic,
	// partition and offset it was redriven from (Ref.String). A consumer
	// may ignore it; Redriver looks for it after an interrupted redrive.
	KeyRedrivenFrom = "eventpipe_redriven_from"
)

// ErrNoOrigin is wrapped when a poison message does not say which topic
// it was poisoned from (a relay poison record: it came from a DynamoDB
// stream, not from a topic), so it cannot be redriven.
var ErrNoOrigin = errors.New("poison: the message does not name the topic it was poisoned from")

// Ref is where a message sits on a poison topic.
type Ref struct {
	Topic     string
	Partition int32
	Offset    int64
}

// String is "<topic>/<partition>/<offset>".
func (r Ref) String() string { return fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset) }

// Origin is where a poison message came from. Partition and Offset are -1
// when the poison form does not record them (Watermill's middleware).
type Origin struct {
	Topic     string
	Partition int32
	Offset    int64
	// Handler is the Watermill handler that poisoned it, when known.
	Handler string
}

// Known reports whether the origin names a topic.
func (o Origin) Known() bool { return o.Topic != "" }

// Message is one record of a poison topic.
type Message struct {
	Ref
	// Key is the record key (the partition key of the original message).
	Key string
	// UUID is the Watermill message UUID.
	UUID string
	// Metadata is every header but the UUID's.
	Metadata message.Metadata
	// Payload is the record value: the original message's payload (the
	// relay's: a PoisonRecord in JSON).
	Payload []byte
	// Timestamp is when the record was written to the poison topic.
	Timestamp time.Time
}

// Reason is why the message was poisoned.
func (m Message) Reason() string {
	if r := m.Metadata.Get(KeyReasonPoisoned); r != "" {
		return r
	}
	return m.Metadata.Get(KeyReason)
}

// Origin returns where m was poisoned from; Origin.Known is false for a
// relay poison record.
func (m Message) Origin() Origin {
	if t := m.Metadata.Get(KeyTopicPoisoned); t != "" {
		return Origin{Topic: t, Partition: -1, Offset: -1, Handler: m.Metadata.Get(KeyHandlerPoisoned)}
	}
	if t := m.Metadata.Get(KeyTopic); t != "" && m.Metadata.Get(KeyOffset) != "" {
		o := Origin{Topic: t, Partition: -1, Offset: -1}
		if p, err := strconv.ParseInt(m.Metadata.Get(KeyPartition), 10, 32); err == nil {
			o.Partition = int32(p)
		}
		if off, err := strconv.ParseInt(m.Metadata.Get(KeyOffset), 10, 64); err == nil {
			o.Offset = off
		}
		return o
	}
	return Origin{Partition: -1, Offset: -1}
}

// Age is how long ago m was poisoned, at now.
func (m Message) Age(now time.Time) time.Duration { return now.Sub(m.Timestamp) }

// poisonKeys are the metadata keys a poison form added, for m's form.
func (m Message) poisonKeys() []string {
	if m.Metadata.Get(KeyTopicPoisoned) != "" {
		return []string{KeyReasonPoisoned, KeyTopicPoisoned, KeyHandlerPoisoned, KeySubscriberPoisoned}
	}
	return []string{KeyReason, KeyTopic, KeyPartition, KeyOffset}
}

// Redrive returns the message to publish again on m's origin topic: the
// same UUID and payload, the metadata without the poison fields (and
// without an earlier KeyRedrivenFrom) plus KeyRedrivenFrom, and the
// partition key of the original (its record key when the metadata lacks
// it), so the copy goes to the same partition as the original's next
// messages and keeps the per-aggregate order. It fails with ErrNoOrigin
// for a message that names no origin topic.
func (m Message) Redrive() (topic string, msg *message.Message, err error) {
	o := m.Origin()
	if !o.Known() {
		return "", nil, fmt.Errorf("%s: %w", m.Ref, ErrNoOrigin)
	}
	msg = message.NewMessage(m.UUID, append([]byte(nil), m.Payload...))
	for k, v := range m.Metadata {
		msg.Metadata.Set(k, v)
	}
	for _, k := range m.poisonKeys() {
		delete(msg.Metadata, k)
	}
	if msg.Metadata.Get(bus.MetadataPartitionKey) == "" && m.Key != "" {
		msg.Metadata.Set(bus.MetadataPartitionKey, m.Key)
	}
	msg.Metadata.Set(KeyRedrivenFrom, m.Ref.String())
	return o.Topic, msg, nil
}
