package eventstore

import (
	"encoding/json"
	"fmt"
	"time"
)

// Ref names one aggregate: its type (e.g. "account") and its id.
type Ref struct {
	Type string
	ID   string
}

// String renders the reference as "type/id", the form used in error messages.
func (r Ref) String() string { return r.Type + "/" + r.ID }

// Validate reports an empty type or id, or one holding a reserved
// character, as a *ValidationError naming the field.
func (r Ref) Validate() error {
	if err := ValidateName("aggregate_type", r.Type); err != nil {
		return err
	}
	return ValidateName("aggregate_id", r.ID)
}

// Metadata travels with every event: who and what caused it.
type Metadata struct {
	// CorrelationID ties together everything caused by one user action.
	CorrelationID string `json:"correlation_id,omitempty"`
	// CausationID is the id of the command (or event) that caused this one.
	CausationID string `json:"causation_id,omitempty"`
	// Actor is the user or service on whose behalf the event was recorded.
	Actor string `json:"actor,omitempty"`
	// IP is the client address the command came from, when known.
	IP string `json:"ip,omitempty"`
	// ActorSource says how Actor and IP were established: ActorHTTP,
	// ActorSigned or ActorClaimed; empty on events recorded before
	// actor sources were (read it as claimed) and on events with no actor.
	ActorSource string `json:"actor_source,omitempty"`
	// TraceParent is the W3C traceparent of the span that appended the
	// event, when it was traced (see package tracing): consumers continue
	// that trace.
	TraceParent string `json:"traceparent,omitempty"`
}

// How an event's actor was established (Metadata.ActorSource).
const (
	// ActorHTTP: the subject of a token the HTTP API verified.
	ActorHTTP = "http"
	// ActorSigned: the actor of a command signed with a key the command
	// handlers hold (a producer's or the deployment's).
	ActorSigned = "signed"
	// ActorClaimed: what an unsigned command said; nothing verified it.
	ActorClaimed = "claimed"
)

// ActorVerified reports whether the actor was verified (ActorHTTP or
// ActorSigned) rather than claimed.
func (m Metadata) ActorVerified() bool {
	return m.ActorSource == ActorHTTP || m.ActorSource == ActorSigned
}

// IsZero reports whether no field is set.
func (m Metadata) IsZero() bool { return m == Metadata{} }

// Envelope is one stored event, the unit every part of eventpipe exchanges:
// the store writes it, the relay publishes it (one bus message per event,
// with EventID as the Watermill message UUID), consumers decode it with
// Unmarshal.
type Envelope struct {
	// EventID is a ULID, unique across all aggregates; its time part is
	// when the store prepared the event, and ULIDs made by one process are
	// strictly increasing.
	EventID       string `json:"event_id"`
	AggregateType string `json:"aggregate_type"`
	AggregateID   string `json:"aggregate_id"`
	// Sequence is the event's position in its aggregate's log, from 1.
	Sequence  int64  `json:"sequence"`
	EventType string `json:"event_type"`
	// SchemaVersion is the version of the payload's shape, from 1. Readers
	// see the current version: older events are upcast on read.
	SchemaVersion int `json:"schema_version"`
	// OccurredAt is in UTC.
	OccurredAt time.Time       `json:"occurred_at"`
	Payload    json.RawMessage `json:"payload"`
	Metadata   Metadata        `json:"metadata"`
}

// Aggregate returns the reference of the aggregate the event belongs to.
func (e Envelope) Aggregate() Ref { return Ref{Type: e.AggregateType, ID: e.AggregateID} }

// DecodePayload decodes the event's payload into v. Unlike command
// payloads, events are decoded leniently: fields v does not have are
// ignored, so a consumer built against an older payload type still reads
// newer events (incompatible changes get a new schema version and an
// upcaster). A payload that does not decode is a *DecodeError.
func (e Envelope) DecodePayload(v any) error {
	if err := json.Unmarshal(e.Payload, v); err != nil {
		return &DecodeError{What: e.String() + " payload", Reason: err.Error()}
	}
	return nil
}

// String identifies the event in logs: "type/id#seq EventType".
func (e Envelope) String() string {
	return fmt.Sprintf("%s/%s#%d %s", e.AggregateType, e.AggregateID, e.Sequence, e.EventType)
}

// Validate checks every field a stored event must have: a ULID event id,
// valid names, a positive sequence and schema version, a set occurred-at
// and a JSON payload. It returns the first problem as a *ValidationError.
func (e Envelope) Validate() error {
	if err := ValidateEventID(e.EventID); err != nil {
		return err
	}
	if err := e.Aggregate().Validate(); err != nil {
		return err
	}
	if err := ValidateName("event_type", e.EventType); err != nil {
		return err
	}
	if e.Sequence < 1 {
		return &ValidationError{Field: "sequence", Reason: fmt.Sprintf("is %d, want ≥ 1", e.Sequence)}
	}
	if e.SchemaVersion < 1 {
		return &ValidationError{Field: "schema_version", Reason: fmt.Sprintf("is %d, want ≥ 1", e.SchemaVersion)}
	}
	if e.OccurredAt.IsZero() {
		return &ValidationError{Field: "occurred_at", Reason: "is not set"}
	}
	return ValidatePayload("payload", e.Payload)
}
