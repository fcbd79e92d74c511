package eventstore_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe/eventstore"
)

func TestUpcastersChainUntilTheCurrentVersion(t *testing.T) {
	var u eventstore.Upcasters
	u.MustRegister("Renamed", 1, func(p json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(strings.Replace(string(p), `"name"`, `"full_name"`, 1)), nil
	})
	u.MustRegister("Renamed", 2, func(p json.RawMessage) (json.RawMessage, error) {
		var v map[string]any
		if err := json.Unmarshal(p, &v); err != nil {
			return nil, err
		}
		v["v3"] = true
		return json.Marshal(v)
	})
	if u.Current("Renamed") != 3 || u.Current("Other") != 1 {
		t.Fatalf("current versions %d / %d", u.Current("Renamed"), u.Current("Other"))
	}
	e := sampleEnvelope()
	e.EventType, e.SchemaVersion, e.Payload = "Renamed", 1, json.RawMessage(`{"name":"x"}`)
	got, err := u.Upcast(e)
	if err != nil {
		t.Fatal(err)
	}
	if got.SchemaVersion != 3 || string(got.Payload) != `{"full_name":"x","v3":true}` {
		t.Fatalf("upcast to v%d %s", got.SchemaVersion, got.Payload)
	}
	if string(e.Payload) != `{"name":"x"}` {
		t.Fatal("upcast modified the original")
	}
	e.SchemaVersion = 2
	if got, _ := u.Upcast(e); got.SchemaVersion != 3 {
		t.Fatalf("from v2: v%d", got.SchemaVersion)
	}
	e.SchemaVersion = 3
	if got, _ := u.Upcast(e); string(got.Payload) != string(e.Payload) {
		t.Fatal("current version changed")
	}
	var nilU *eventstore.Upcasters
	if got, err := nilU.Upcast(e); err != nil || got.SchemaVersion != 3 {
		t.Fatal("nil registry must pass through")
	}
	var ve *eventstore.ValidationError
	if err := u.Register("Renamed", 1, func(p json.RawMessage) (json.RawMessage, error) { return p, nil }); !errors.As(err, &ve) {
		t.Fatalf("duplicate registration: %v", err)
	}
	if err := u.Register("Re#named", 1, func(p json.RawMessage) (json.RawMessage, error) { return p, nil }); !errors.As(err, &ve) {
		t.Fatalf("bad type: %v", err)
	}
	u.MustRegister("Broken", 1, func(json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{`), nil })
	e.EventType, e.SchemaVersion = "Broken", 1
	if _, err := u.Upcast(e); err == nil {
		t.Fatal("an upcaster producing broken JSON must fail the read")
	}
}

func TestPrepareValidatesAndNumbersEvents(t *testing.T) {
	ref := eventstore.Ref{Type: "order", ID: "1"}
	schema := eventstore.Schema{Types: eventstore.NewEventTypes("A", "B")}
	req, err := eventstore.Prepare(ref, 4, eventstore.Change{
		CommandID: "cmd", Metadata: eventstore.Metadata{Actor: "bob"},
		Events: []eventstore.NewEvent{eventstore.Event("A", 1), {Type: "B", Payload: json.RawMessage(`{}`), Metadata: eventstore.Metadata{Actor: "eve"}}},
	}, schema)
	if err != nil {
		t.Fatal(err)
	}
	if req.NewVersion() != 6 || req.Events[0].Sequence != 5 || req.Events[1].Sequence != 6 || req.Events[0].EventID >= req.Events[1].EventID {
		t.Fatalf("numbering: %+v", req.Events)
	}
	if req.Events[0].Metadata.Actor != "bob" || req.Events[1].Metadata.Actor != "eve" || req.Events[1].Metadata.CausationID != "cmd" {
		t.Fatalf("metadata: %+v / %+v", req.Events[0].Metadata, req.Events[1].Metadata)
	}
	if err := req.Validate(schema); err != nil {
		t.Fatalf("a prepared request must validate: %v", err)
	}
	bad := map[string]struct {
		ref   eventstore.Ref
		ch    eventstore.Change
		field string
	}{
		"empty type":   {eventstore.Ref{ID: "1"}, eventstore.Change{}, "aggregate_type"},
		"# in id":      {eventstore.Ref{Type: "o", ID: "1#2"}, eventstore.Change{}, "aggregate_id"},
		"unknown type": {ref, eventstore.Change{Events: []eventstore.NewEvent{eventstore.Event("C", 1)}}, "events[0].event_type"},
		"# in type":    {ref, eventstore.Change{Events: []eventstore.NewEvent{eventstore.Event("A#", 1)}}, "events[0].event_type"},
		"bad payload":  {ref, eventstore.Change{Events: []eventstore.NewEvent{eventstore.Event("A", 1), {Type: "A", Payload: json.RawMessage(`nope`)}}}, "events[1].payload"},
		"bad command":  {ref, eventstore.Change{CommandID: "a#b"}, "command_id"},
	}
	for name, tc := range bad {
		_, err := eventstore.Prepare(tc.ref, 0, tc.ch, schema)
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: %v, want *ValidationError on %s", name, err, tc.field)
		}
	}
}

// TestUpcasterChainsWithAGapAreRefusedNamingTheTypeAndVersion: a chain
// v1→v2, v3→v4 lacks v2→v3, which Validate names; a whole chain, an
// empty registry and a nil one pass.
func TestUpcasterChainsWithAGapAreRefusedNamingTheTypeAndVersion(t *testing.T) {
	same := func(p json.RawMessage) (json.RawMessage, error) { return p, nil }
	var whole eventstore.Upcasters
	whole.MustRegister("Placed", 1, same).MustRegister("Placed", 2, same)
	var empty eventstore.Upcasters
	var none *eventstore.Upcasters
	for name, u := range map[string]*eventstore.Upcasters{"whole": &whole, "empty": &empty, "nil": none} {
		if err := u.Validate(); err != nil {
			t.Errorf("%s chain: %v", name, err)
		}
	}
	var gap eventstore.Upcasters
	gap.MustRegister("Placed", 1, same).MustRegister("Shipped", 1, same).MustRegister("Shipped", 3, same)
	err := gap.Validate()
	var ve *eventstore.ValidationError
	if !errors.As(err, &ve) || ve.Field != "upcasters" || !strings.Contains(err.Error(), "Shipped has no upcaster from v2 to v3") {
		t.Fatalf("chain with a gap: %v, want an *eventstore.ValidationError naming Shipped v2 to v3", err)
	}
}
