package bus_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/oklog/ulid/v2"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/eventstore"
)

func TestEventMessageRoundTrip(t *testing.T) {
	e := eventstore.Envelope{
		EventID: ulid.Make().String(), AggregateType: "account", AggregateID: "acc-1", Sequence: 7,
		EventType: "TransactionAccepted", SchemaVersion: 1, OccurredAt: time.Now().UTC().Truncate(time.Millisecond),
		Payload:  json.RawMessage(`{"amount":5}`),
		Metadata: eventstore.Metadata{CorrelationID: "corr", CausationID: "cmd-1", Actor: "u_alice", IP: "127.0.0.1"},
	}
	msg, err := bus.EventMessage(e)
	if err != nil {
		t.Fatal(err)
	}
	if msg.UUID != e.EventID || msg.Metadata.Get(bus.MetadataPartitionKey) != "acc-1" ||
		middleware.MessageCorrelationID(msg) != "corr" || msg.Metadata.Get(bus.MetadataCausationID) != "cmd-1" ||
		msg.Metadata.Get(bus.MetadataSequence) != "7" {
		t.Fatalf("message %s metadata %v", msg.UUID, msg.Metadata)
	}
	got, err := bus.EventFromMessage(msg)
	if err != nil {
		t.Fatal(err)
	}
	if got.EventID != e.EventID || got.Sequence != 7 || got.Metadata != e.Metadata || !got.OccurredAt.Equal(e.OccurredAt) || string(got.Payload) != `{"amount":5}` {
		t.Fatalf("round trip gave %+v", got)
	}
}

func TestMalformedEventMessagesArePermanentErrors(t *testing.T) {
	good, _ := bus.EventMessage(eventstore.Envelope{
		EventID: ulid.Make().String(), AggregateType: "a", AggregateID: "1", Sequence: 1,
		EventType: "X", SchemaVersion: 1, OccurredAt: time.Now(), Payload: json.RawMessage(`{}`),
	})
	for name, msg := range map[string]*message.Message{
		"not json":    message.NewMessage("m", []byte(`{`)),
		"no fields":   message.NewMessage("m", []byte(`{}`)),
		"id mismatch": message.NewMessage("other", good.Payload),
	} {
		_, err := bus.EventFromMessage(msg)
		if !eventstore.IsPermanent(err) || !errors.Is(err, eventstore.ErrMalformed) {
			t.Errorf("%s: error %v is not a permanent malformed-envelope error", name, err)
		}
	}
}
