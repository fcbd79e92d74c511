// Package analyticsbus puts raw analytics events on the bus: the relay
// publishes each event item of the analytics table's stream onto
// Topics.Analytics(source) keyed by session id (so a session's events
// stay in order on one partition), and the aggregation consumer decodes
// them.
//
// A message's UUID is the event's id (a ULID), its payload the
// analytics.Event as JSON, and its metadata carries the partition key
// (the session id), MetadataSourceID and MetadataEventType.
package analyticsbus

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/oklog/ulid/v2"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/eventstore"
)

// Metadata keys of an analytics event message.
const (
	MetadataSourceID  = "source_id"
	MetadataEventType = "event_type"
)

// Message is the bus message of e.
func Message(e analytics.Event) (*message.Message, error) {
	payload, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("analyticsbus: encode event %s: %w", e.EventID, err)
	}
	msg := message.NewMessage(e.EventID, payload)
	msg.Metadata.Set(bus.MetadataPartitionKey, e.SessionID)
	msg.Metadata.Set(MetadataSourceID, e.SourceID)
	msg.Metadata.Set(MetadataEventType, e.Type)
	return msg, nil
}

// Decode reads a message payload written by Message. The event must name
// its source, session and type, carry a ULID event id and a createdAt;
// anything else is a *eventstore.DecodeError (permanent: the same payload
// never decodes).
func Decode(payload []byte) (analytics.Event, error) {
	var e analytics.Event
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	if err := dec.Decode(&e); err != nil {
		return analytics.Event{}, &eventstore.DecodeError{What: "analytics event", Reason: err.Error()}
	}
	missing := func(field string) error {
		return &eventstore.DecodeError{What: "analytics event", Field: field, Reason: "is missing"}
	}
	switch {
	case e.SourceID == "":
		return analytics.Event{}, missing("sourceId")
	case e.SessionID == "":
		return analytics.Event{}, missing("sessionId")
	case e.Type == "":
		return analytics.Event{}, missing("type")
	case e.CreatedAt.IsZero():
		return analytics.Event{}, missing("createdAt")
	}
	if _, err := ulid.ParseStrict(e.EventID); err != nil {
		return analytics.Event{}, &eventstore.DecodeError{What: "analytics event", Field: "eventId", Reason: fmt.Sprintf("%q is not a ULID: %v", e.EventID, err)}
	}
	e.CreatedAt = e.CreatedAt.UTC()
	return e, nil
}
