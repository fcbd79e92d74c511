package eventstore_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
)

func sampleEnvelope() eventstore.Envelope {
	return eventstore.Envelope{
		EventID: eventstore.NewEventID(time.Now()), AggregateType: "order", AggregateID: "1234", Sequence: 3,
		EventType: "OrderShipped", SchemaVersion: 2, OccurredAt: time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.FixedZone("X", 3600)),
		Payload:  json.RawMessage(`{"tracking":"Z1","items":[1,2]}`),
		Metadata: eventstore.Metadata{CorrelationID: "c", CausationID: "cmd", Actor: "u_alice", IP: "::1"},
	}
}

func TestCodecRoundTripsAnEnvelopeInUTC(t *testing.T) {
	e := sampleEnvelope()
	b, err := eventstore.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := eventstore.Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if !got.OccurredAt.Equal(e.OccurredAt) || got.OccurredAt.Location() != time.UTC {
		t.Fatalf("occurred at %v, want %v in UTC", got.OccurredAt, e.OccurredAt)
	}
	b2, _ := eventstore.Marshal(got)
	if string(b) != string(b2) {
		t.Fatalf("re-encoding differs:\n%s\n%s", b, b2)
	}
	if !strings.Contains(string(b), `"payload":{"tracking":"Z1","items":[1,2]}`) {
		t.Fatalf("payload not embedded as JSON: %s", b)
	}
}

func TestCodecRejectsMalformedInputWithTypedErrors(t *testing.T) {
	good, _ := eventstore.Marshal(sampleEnvelope())
	edit := func(from, to string) string { return strings.Replace(string(good), from, to, 1) }
	var m map[string]any
	_ = json.Unmarshal(good, &m)
	cases := map[string]struct{ in, field string }{
		"not JSON":          {`{"event_id":`, ""},
		"empty":             {``, ""},
		"array":             {`[]`, ""},
		"trailing data":     {string(good) + `{}`, ""},
		"unknown field":     {edit(`{"event_id"`, `{"extra":1,"event_id"`), ""},
		"sequence a string": {edit(`"sequence":3`, `"sequence":"3"`), "sequence"},
		"sequence zero":     {edit(`"sequence":3`, `"sequence":0`), "sequence"},
		"bad event id":      {edit(`"event_id":"`, `"event_id":"x`), "event_id"},
		"# in type":         {edit(`"aggregate_type":"order"`, `"aggregate_type":"or#der"`), "aggregate_type"},
		"no event type":     {edit(`"event_type":"OrderShipped"`, `"event_type":""`), "event_type"},
		"no payload":        {edit(`"payload":{"tracking":"Z1","items":[1,2]}`, `"payload":null`), "payload"},
		"no occurred at":    {edit(`"occurred_at":"2026-11-22T09:00:00.123456789Z"`, `"occurred_at":"0001-01-01T00:00:00Z"`), "occurred_at"},
		"version zero":      {edit(`"schema_version":2`, `"schema_version":0`), "schema_version"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := eventstore.Unmarshal([]byte(tc.in))
			var de *eventstore.DecodeError
			if !errors.As(err, &de) || !errors.Is(err, eventstore.ErrMalformed) {
				t.Fatalf("got %v, want *DecodeError", err)
			}
			if tc.field != "" && de.Field != tc.field {
				t.Fatalf("field %q, want %q (%v)", de.Field, tc.field, err)
			}
		})
	}
	bad := sampleEnvelope()
	bad.Payload = json.RawMessage(`{`)
	var ve *eventstore.ValidationError
	if _, err := eventstore.Marshal(bad); !errors.As(err, &ve) || ve.Field != "payload" {
		t.Fatalf("Marshal of a broken payload: %v", err)
	}
}

func TestEventIDsIncreaseStrictlyAcrossGoroutines(t *testing.T) {
	const n, workers = 2000, 8
	ch := make(chan []string, workers)
	now := time.Now()
	for range workers {
		go func() {
			ids := make([]string, n)
			for i := range ids {
				ids[i] = eventstore.NewEventID(now) // same millisecond for all
			}
			ch <- ids
		}()
	}
	seen := map[string]bool{}
	for range workers {
		ids := <-ch
		for i, id := range ids {
			if seen[id] {
				t.Fatalf("duplicate id %s", id)
			}
			seen[id] = true
			if i > 0 && id <= ids[i-1] {
				t.Fatalf("ids not increasing within a goroutine: %s after %s", id, ids[i-1])
			}
		}
	}
	prev := eventstore.NewEventID(now)
	back := eventstore.NewEventID(now.Add(-time.Hour)) // the clock went backwards
	if back <= prev {
		t.Fatalf("a clock going backwards broke the order: %s after %s", back, prev)
	}
}

// TestCodecKeepsTheTraceParentAndReadsEnvelopesWithoutOne round-trips an
// envelope whose metadata holds a W3C traceparent, and decodes one
// encoded before metadata had the field.
func TestCodecKeepsTheTraceParentAndReadsEnvelopesWithoutOne(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	e := sampleEnvelope()
	e.Metadata.TraceParent = tp
	b, err := eventstore.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"traceparent":"`+tp+`"`) {
		t.Errorf("no traceparent in %s", b)
	}
	got, err := eventstore.Unmarshal(b)
	if err != nil || got.Metadata != e.Metadata {
		t.Fatalf("decoded metadata %+v (%v), want %+v", got.Metadata, err, e.Metadata)
	}
	old, err := eventstore.Marshal(sampleEnvelope())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(old), "traceparent") {
		t.Fatalf("an untraced envelope encodes a traceparent: %s", old)
	}
	got, err = eventstore.Unmarshal(old)
	if err != nil || got.Metadata != sampleEnvelope().Metadata {
		t.Fatalf("old envelope: metadata %+v (%v)", got.Metadata, err)
	}
}
