package eventstore

import (
	"encoding/json"
	"fmt"
	"time"
)

// NewEvent is an event a caller wants to append; the store assigns its id
// and sequence.
type NewEvent struct {
	Type    string
	Payload json.RawMessage
	// SchemaVersion defaults to the schema's current version of Type.
	SchemaVersion int
	// OccurredAt defaults to now; stored in UTC.
	OccurredAt time.Time
	// Metadata defaults to the Change's Metadata when zero.
	Metadata Metadata
}

// Event builds a NewEvent whose payload is v encoded as JSON. It panics if
// v cannot be encoded (a programming error: use NewEvent for raw JSON).
func Event(eventType string, v any) NewEvent {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("eventstore.Event(%q): %v", eventType, err))
	}
	return NewEvent{Type: eventType, Payload: b}
}

// Change is what a decision appends: events plus who caused them.
type Change struct {
	Events []NewEvent
	// CommandID makes the append idempotent (see AppendRequest.CommandID).
	// It also becomes each event's causation id when that is empty.
	CommandID string
	// Metadata is given to every event that has none of its own.
	Metadata Metadata
}

// Prepare validates ch against schema and turns it into an AppendRequest
// for ref at expectedVersion: event ids (monotonic ULIDs), sequences from
// expectedVersion+1, schema versions, UTC times and metadata are filled
// in. Every problem is a *ValidationError; nothing is written by Prepare.
func Prepare(ref Ref, expectedVersion int64, ch Change, schema Schema) (AppendRequest, error) {
	if err := ref.Validate(); err != nil {
		return AppendRequest{}, err
	}
	if expectedVersion < 0 {
		return AppendRequest{}, &ValidationError{Field: "expected_version", Reason: fmt.Sprintf("is %d, want ≥ 0", expectedVersion)}
	}
	if ch.CommandID != "" {
		if err := ValidateName("command_id", ch.CommandID); err != nil {
			return AppendRequest{}, err
		}
	}
	req := AppendRequest{Aggregate: ref, ExpectedVersion: expectedVersion, CommandID: ch.CommandID}
	now := time.Now().UTC()
	for i, ne := range ch.Events {
		if err := schema.CheckType(ne.Type); err != nil {
			return AppendRequest{}, indexed(err, i)
		}
		if err := ValidatePayload("payload", ne.Payload); err != nil {
			return AppendRequest{}, indexed(err, i)
		}
		env := Envelope{
			EventID:       NewEventID(now),
			AggregateType: ref.Type,
			AggregateID:   ref.ID,
			Sequence:      expectedVersion + int64(i) + 1,
			EventType:     ne.Type,
			SchemaVersion: ne.SchemaVersion,
			OccurredAt:    ne.OccurredAt.UTC(),
			Payload:       append(json.RawMessage(nil), ne.Payload...),
			Metadata:      ne.Metadata,
		}
		if env.SchemaVersion == 0 {
			env.SchemaVersion = schema.Upcasters.Current(ne.Type)
		}
		if env.SchemaVersion < 0 {
			return AppendRequest{}, indexed(&ValidationError{Field: "schema_version", Reason: fmt.Sprintf("is %d, want ≥ 1", env.SchemaVersion)}, i)
		}
		if ne.OccurredAt.IsZero() {
			env.OccurredAt = now
		}
		if env.Metadata.IsZero() {
			env.Metadata = ch.Metadata
		}
		if env.Metadata.CausationID == "" {
			env.Metadata.CausationID = ch.CommandID
		}
		req.Events = append(req.Events, env)
	}
	return req, nil
}

// indexed prefixes a *ValidationError's field with the event's position,
// e.g. "events[2].payload".
func indexed(err error, i int) error {
	if ve, ok := err.(*ValidationError); ok {
		return &ValidationError{Field: fmt.Sprintf("events[%d].%s", i, ve.Field), Reason: ve.Reason}
	}
	return err
}
