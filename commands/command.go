// Package commands carries users' intentions to the aggregates: the command
// envelope and its codec, the registry of handlers by command type, the
// dispatcher that runs them against the event store, and the results sent
// back on the replies topic. A domain declares each command type with the
// Go type of its payload (DefineCommand) and registers one decision per
// definition (OnCommand, FacetDomain), which receives the payload decoded
// as that type; a refusal's eventstore.Code reaches the caller in the
// Result (Result.Err, errors.Is).
package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/oklog/ulid/v2"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/tracing"
)

// Command is one request to change one aggregate. Its ID is the
// idempotency key: the event store records it in the same transaction as
// the events it caused, so a redelivered command appends nothing twice.
type Command struct {
	ID            string `json:"id"`             // ULID; also the Watermill message UUID
	Type          string `json:"type"`           // e.g. "DepositMoney"
	AggregateType string `json:"aggregate_type"` // e.g. "account"
	AggregateID   string `json:"aggregate_id"`
	// ExpectedVersion, when set, must equal the aggregate's current version
	// (0 for a new aggregate); a stale one fails with a conflict and is not
	// retried. When nil the dispatcher reloads and retries on conflict.
	ExpectedVersion *int64          `json:"expected_version,omitempty"`
	Payload         json.RawMessage `json:"payload"`
	Actor           string          `json:"actor,omitempty"`
	IP              string          `json:"ip,omitempty"`
	CorrelationID   string          `json:"correlation_id,omitempty"`
	IssuedAt        time.Time       `json:"issued_at"`
	// ActorSource says how Actor and IP were established
	// (eventstore.ActorHTTP, ActorSigned, ActorClaimed), and is recorded
	// with them in the events' metadata. It is never read from a message:
	// the dispatcher sets it from the command's signature, the HTTP API
	// from the verified token; a command with an actor or IP and no
	// source is recorded as claimed.
	ActorSource string `json:"-"`
}

// actorSource is the ActorSource the command's events record.
func (c Command) actorSource() string {
	if c.ActorSource == "" && (c.Actor != "" || c.IP != "") {
		return eventstore.ActorClaimed
	}
	return c.ActorSource
}

// Metadata keys set on command messages besides the correlation id and
// partition key.
const (
	MetadataCommandType   = "command_type"
	MetadataAggregateType = "aggregate_type"
	// MetadataReplyTo names the topic the command's answer goes to:
	// Topics.Replies() (the default) or a Topics.RepliesFor topic, such
	// as a saga's own. Any other topic makes the command invalid.
	MetadataReplyTo = "reply_to"
	// MetadataReplyPartition asks for the answer on one partition (a
	// decimal number) of its replies topic, so a sender can read that
	// partition alone (see bus.MetadataPartition). It must be a partition
	// the topic has, or the answer cannot be published.
	MetadataReplyPartition = "reply_partition"
)

// New returns a command with a fresh ULID, the current time, and the
// correlation id defaulting to the command id.
func New(commandType, aggregateType, aggregateID string, payload json.RawMessage) Command {
	id := ulid.Make().String()
	return Command{
		ID: id, Type: commandType, AggregateType: aggregateType, AggregateID: aggregateID,
		Payload: payload, CorrelationID: id, IssuedAt: time.Now().UTC(),
	}
}

// Validate checks the envelope (not the payload, which is the handler's).
func (c Command) Validate() error {
	for _, f := range []struct{ name, value string }{
		{"id", c.ID}, {"type", c.Type}, {"aggregate_type", c.AggregateType}, {"aggregate_id", c.AggregateID},
	} {
		if f.value == "" {
			return &eventstore.ValidationError{Field: f.name, Reason: "is empty"}
		}
		if strings.ContainsAny(f.value, "#\x00") {
			return &eventstore.ValidationError{Field: f.name, Reason: fmt.Sprintf("%q contains a reserved character ('#' or NUL)", f.value)}
		}
		if len(f.value) > 256 {
			return &eventstore.ValidationError{Field: f.name, Reason: "is longer than 256 bytes"}
		}
	}
	if c.ExpectedVersion != nil && *c.ExpectedVersion < 0 {
		return &eventstore.ValidationError{Field: "expected_version", Reason: "is negative"}
	}
	if trimmed := strings.TrimSpace(string(c.Payload)); !strings.HasPrefix(trimmed, "{") || !json.Valid(c.Payload) {
		return &eventstore.ValidationError{Field: "payload", Reason: "is not a JSON object"}
	}
	return nil
}

// Topic is the commands topic of the command's aggregate type in the
// namespace t.
func (c Command) Topic(t bus.Topics) string { return t.Commands(c.AggregateType) }

// ToMessage encodes the command as a Watermill message: the UUID is the
// command id, the partition key the aggregate id (so one aggregate's
// commands stay in order), and the correlation id is in metadata.
func (c Command) ToMessage() (*message.Message, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	body, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode command %s: %w", c.ID, err)
	}
	msg := message.NewMessage(c.ID, body)
	msg.Metadata.Set(bus.MetadataPartitionKey, c.AggregateID)
	msg.Metadata.Set(MetadataCommandType, c.Type)
	msg.Metadata.Set(MetadataAggregateType, c.AggregateType)
	if c.CorrelationID != "" {
		middleware.SetCorrelationID(c.CorrelationID, msg)
	}
	return msg, nil
}

// FromMessage decodes and validates a command message. A message that
// does not decode is a *eventstore.DecodeError; a command that fails
// Validate is a *eventstore.ValidationError. A message without a UUID (a
// record from a plain Kafka producer, without Watermill's UUID header)
// takes the command id as its UUID; one with a UUID must carry the same
// id in its body.
func FromMessage(msg *message.Message) (Command, error) {
	var c Command
	what := "command message " + msg.UUID
	if err := eventstore.DecodeStrict(what, msg.Payload, &c); err != nil {
		return Command{}, err
	}
	if msg.UUID == "" {
		msg.UUID = c.ID
	}
	if c.ID != msg.UUID {
		return Command{}, &eventstore.DecodeError{What: what, Field: "id", Reason: fmt.Sprintf("%q differs from the message id", c.ID)}
	}
	if c.CorrelationID == "" {
		c.CorrelationID = middleware.MessageCorrelationID(msg)
	}
	if err := c.Validate(); err != nil {
		return Command{}, err
	}
	return c, nil
}

// DecodePayload decodes the command's payload strictly into v (unknown
// fields and trailing data are refused). Its error is a
// *eventstore.ValidationError on field "payload": the command is invalid.
// Every domain decodes its command payloads with it.
func (c Command) DecodePayload(v any) error {
	if err := eventstore.DecodeStrict(c.Type+" payload", c.Payload, v); err != nil {
		return &eventstore.ValidationError{Field: "payload", Reason: err.Error()}
	}
	return nil
}

// NewJSON is New with payload v encoded as JSON.
func NewJSON(commandType, aggregateType, aggregateID string, v any) (Command, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Command{}, &eventstore.ValidationError{Field: "payload", Reason: err.Error()}
	}
	return New(commandType, aggregateType, aggregateID, b), nil
}

// Publish validates cmd and publishes it on its commands topic in the
// namespace t, in a producer span "send <command type>" (a child of ctx's
// span, whose context the message carries: package tracing). It returns
// once pub returns: for a Kafka publisher, once the broker acknowledged.
// Every Sender publishes through it.
func Publish(ctx context.Context, pub message.Publisher, t bus.Topics, cmd Command) error {
	return PublishWithMetadata(ctx, pub, t, cmd, nil)
}

// PublishWithMetadata is Publish with md set on the message besides what
// ToMessage sets, e.g. MetadataReplyPartition.
func PublishWithMetadata(ctx context.Context, pub message.Publisher, t bus.Topics, cmd Command, md message.Metadata) (err error) {
	msg, err := cmd.ToMessage()
	if err != nil {
		return err
	}
	for k, v := range md {
		msg.Metadata.Set(k, v)
	}
	topic := cmd.Topic(t)
	ctx, span := tracing.StartProducer(ctx, msg, "send "+cmd.Type, topic)
	defer func() { tracing.RecordFailure(span, err); span.End() }()
	msg.SetContext(ctx)
	if err := pub.Publish(topic, msg); err != nil {
		return fmt.Errorf("send command %s (%s): %w", cmd.ID, cmd.Type, err)
	}
	return nil
}
