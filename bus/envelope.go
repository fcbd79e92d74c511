package bus

import (
	"encoding/json"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/tracing"
)

// Metadata keys set on event messages besides the partition key and the
// correlation id. They let a subscriber route or filter without decoding
// the payload; the payload (the envelope) stays the source of truth.
const (
	MetadataEventType     = "event_type"
	MetadataAggregateType = "aggregate_type"
	MetadataCausationID   = "causation_id"
	MetadataSequence      = "sequence"
)

// EventMessage maps an envelope to a Watermill message: UUID = event id,
// payload = eventstore.Marshal(e), partition key = aggregate id (one
// aggregate's events stay in order on one partition), and correlation id,
// causation id, event type, aggregate type and sequence in metadata.
func EventMessage(e eventstore.Envelope) (*message.Message, error) {
	body, err := eventstore.Marshal(e)
	if err != nil {
		return nil, err
	}
	msg := message.NewMessage(e.EventID, body)
	msg.Metadata.Set(MetadataEventType, e.EventType)
	setOrigin(msg, e.Aggregate(), e.Sequence, e.Metadata)
	return msg, nil
}

// setOrigin sets the metadata every message from the event log carries:
// partition key = aggregate id, aggregate type, sequence, and the
// correlation and causation ids when known.
func setOrigin(msg *message.Message, ref eventstore.Ref, seq int64, md eventstore.Metadata) {
	msg.Metadata.Set(MetadataPartitionKey, ref.ID)
	msg.Metadata.Set(MetadataAggregateType, ref.Type)
	msg.Metadata.Set(MetadataSequence, fmt.Sprint(seq))
	if md.CorrelationID != "" {
		middleware.SetCorrelationID(md.CorrelationID, msg)
	}
	if md.CausationID != "" {
		msg.Metadata.Set(MetadataCausationID, md.CausationID)
	}
	if md.TraceParent != "" {
		msg.Metadata.Set(tracing.MetadataTraceParent, md.TraceParent)
	}
}

// EventFromMessage decodes an event message. A payload that is not a valid
// envelope, or whose event id differs from the message UUID, is a
// *eventstore.DecodeError (permanent: see eventstore.IsPermanent).
func EventFromMessage(msg *message.Message) (eventstore.Envelope, error) {
	e, err := eventstore.Unmarshal(msg.Payload)
	if err != nil {
		return eventstore.Envelope{}, fmt.Errorf("event message %s: %w", msg.UUID, err)
	}
	if e.EventID != msg.UUID {
		return eventstore.Envelope{}, &eventstore.DecodeError{What: "event message " + msg.UUID, Field: "event_id",
			Reason: fmt.Sprintf("%q differs from the message UUID", e.EventID)}
	}
	return e, nil
}

// UpcastedEventFromMessage is EventFromMessage, then the event upgraded to
// its current schema version by u (nil: none), as the store upgrades on
// every read: a message published before an upcaster was added, or
// re-driven from a poison topic, reaches its consumer as the current
// version. An upcaster's failure is a *eventstore.DecodeError (permanent:
// upcasters are pure, so it fails the same way every time).
func UpcastedEventFromMessage(msg *message.Message, u *eventstore.Upcasters) (eventstore.Envelope, error) {
	e, err := EventFromMessage(msg)
	if err != nil {
		return e, err
	}
	up, err := u.Upcast(e)
	if err != nil {
		return e, &eventstore.DecodeError{What: "event message " + msg.UUID, Field: "payload", Reason: err.Error()}
	}
	return up, nil
}

// OpenedEventFromMessage is UpcastedEventFromMessage, then the event's
// sealed personal fields opened by o (nil: none; see eventstore.Opener):
// what a consumer of the events topics reads. A forgotten subject's
// fields read as forgotten; a value that does not open is a
// *eventstore.DecodeError (permanent), a KMS failure a retried error.
func OpenedEventFromMessage(msg *message.Message, u *eventstore.Upcasters, o eventstore.Opener) (eventstore.Envelope, error) {
	e, err := UpcastedEventFromMessage(msg, u)
	if err != nil || o == nil {
		return e, err
	}
	opened, err := o.OpenEvent(msg.Context(), e)
	if err != nil {
		return e, fmt.Errorf("event message %s: open %s: %w", msg.UUID, e, err)
	}
	return opened, nil
}

// MetadataOutboundName carries an outbound event's name.
const MetadataOutboundName = "outbound_name"

// OutboundMessage maps an outbox record to a Watermill message: UUID =
// the record's id, payload = the record as JSON (name, aggregate, the
// causing event's id and sequence, payload, metadata), partition key =
// aggregate id, correlation and causation ids in metadata.
func OutboundMessage(o eventstore.OutboundRecord) (*message.Message, error) {
	body, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("outbound %s: %w", o.ID, err)
	}
	msg := message.NewMessage(o.ID, body)
	msg.Metadata.Set(MetadataOutboundName, o.Name)
	setOrigin(msg, eventstore.Ref{Type: o.AggregateType, ID: o.AggregateID}, o.Seq, o.Metadata)
	return msg, nil
}
