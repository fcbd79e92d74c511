package eventstore_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
)

type added struct {
	By int `json:"by"`
}

var (
	addedEvent = eventstore.DefineEvent[added]("Added")
	resetEvent = eventstore.DefineEvent[struct{}]("Reset")
)

const errTooBig eventstore.Code = "counter.too_big"

func envelope(seq int64, ne eventstore.NewEvent) eventstore.Envelope {
	return eventstore.Envelope{EventID: eventstore.NewEventID(time.Now()), AggregateType: "c", AggregateID: "1",
		Sequence: seq, EventType: ne.Type, SchemaVersion: 1, OccurredAt: time.Now(), Payload: ne.Payload}
}

// TestAnEventDefinitionMakesAndReadsItsEvents: New encodes the payload
// under the definition's name, Decode reads it back, and refuses an
// event of another type or a payload that is not P.
func TestAnEventDefinitionMakesAndReadsItsEvents(t *testing.T) {
	ne := addedEvent.New(added{By: 3})
	if ne.Type != "Added" || string(ne.Payload) != `{"by":3}` {
		t.Fatalf("New = %s %s, want Added {\"by\":3}", ne.Type, ne.Payload)
	}
	if addedEvent.Name() != "Added" || addedEvent.PayloadType() != reflect.TypeFor[added]() || addedEvent.String() != "Added(eventstore_test.added)" {
		t.Fatalf("definition %s: %s, %v", addedEvent, addedEvent.Name(), addedEvent.PayloadType())
	}
	got, err := addedEvent.Decode(envelope(1, ne))
	if err != nil || got != (added{By: 3}) {
		t.Fatalf("Decode = %+v, %v", got, err)
	}
	var ve *eventstore.ValidationError
	if _, err := addedEvent.Decode(envelope(1, resetEvent.New(struct{}{}))); !errors.As(err, &ve) || ve.Field != "event_type" {
		t.Fatalf("Decode of a Reset: %v, want a ValidationError on event_type", err)
	}
	bad := envelope(1, eventstore.NewEvent{Type: "Added", Payload: json.RawMessage(`{"by":"three"}`)})
	if _, err := addedEvent.Decode(bad); !errors.As(err, &ve) || ve.Field != "payload" || !eventstore.IsPermanent(err) {
		t.Fatalf("Decode of a bad payload: %v, want a permanent ValidationError on payload", err)
	}
}

// TestAProcessorBuiltFromDefinitionsAppliesAndListsThem: NewProcessor
// puts each rule under its definition's name, Events lists the
// definitions, and a coded rejection keeps its code through Apply.
func TestAProcessorBuiltFromDefinitionsAppliesAndListsThem(t *testing.T) {
	p := eventstore.NewProcessor(func() counter { return counter{} },
		eventstore.OnEvent(addedEvent, func(c counter, a added, _ *eventstore.Outbox) (counter, error) {
			if c.N+a.By > 10 {
				return c, eventstore.RejectWith(errTooBig, "%d is past 10", c.N+a.By)
			}
			c.N += a.By
			return c, nil
		}),
		eventstore.OnEventEnvelope(resetEvent, func(c counter, env eventstore.Envelope, _ struct{}, out *eventstore.Outbox) (counter, error) {
			out.Publish("reset", map[string]int64{"at": env.Sequence})
			return counter{}, nil
		}),
	)
	if got := p.Types().Names(); !reflect.DeepEqual(got, []string{"Added", "Reset"}) {
		t.Fatalf("Types = %v", got)
	}
	if defs := p.Events(); len(defs) != 2 || defs["Added"].PayloadType() != reflect.TypeFor[added]() || defs["Reset"].Name() != "Reset" {
		t.Fatalf("Events = %v", defs)
	}
	st, out, err := p.Apply(counter{}, []eventstore.Envelope{envelope(1, addedEvent.New(added{By: 4})), envelope(2, resetEvent.New(struct{}{})), envelope(3, addedEvent.New(added{By: 9}))})
	if err != nil || st.N != 9 || len(out) != 1 || string(out[0].Payload) != `{"at":2}` {
		t.Fatalf("Apply = %+v, %+v, %v", st, out, err)
	}
	_, _, err = p.Apply(st, []eventstore.Envelope{envelope(4, addedEvent.New(added{By: 2}))})
	var rej *eventstore.RuleRejection
	if !errors.As(err, &rej) || rej.Code != errTooBig || rej.Sequence != 4 || rej.EventType != "Added" || !errors.Is(err, errTooBig) {
		t.Fatalf("past 10: %v, want a RuleRejection matching %s", err, errTooBig)
	}
	if errors.Is(eventstore.Reject("uncoded"), errTooBig) || errors.Is(err, eventstore.Code("counter.other")) {
		t.Fatal("a rejection matches a code it does not carry")
	}
}

// TestWithReplacesARuleWhateverMapHeldIt: With moves an event type's
// rule to the map of its new kind (here a plain rule to a fold rule)
// and leaves the processor it was called on as it was.
func TestWithReplacesARuleWhateverMapHeldIt(t *testing.T) {
	base := eventstore.NewProcessor(func() counter { return counter{} },
		eventstore.OnEvent(addedEvent, func(c counter, a added, _ *eventstore.Outbox) (counter, error) { c.N += a.By; return c, nil }))
	seen := eventstore.Fold[int]{Key: "count", Initial: func() int { return 0 }, Step: func(n int, _ eventstore.Envelope) (int, error) { return n + 1, nil }}
	folded := base.With(eventstore.OnFoldEvent(addedEvent, seen, func(c counter, a added, n int, _ *eventstore.Outbox) (counter, error) {
		c.N += a.By * (n + 1)
		return c, nil
	}))
	if _, ok := base.Rules["Added"]; !ok || len(base.FoldRules) != 0 {
		t.Fatalf("With changed the processor it was called on: %v, %v", base.Rules, base.FoldRules)
	}
	if _, ok := folded.Rules["Added"]; ok || len(folded.FoldRules) != 1 || folded.Events()["Added"] == nil {
		t.Fatalf("With left %v in Rules, %v in FoldRules", folded.Rules, folded.FoldRules)
	}
	log := []eventstore.Envelope{envelope(1, addedEvent.New(added{By: 1})), envelope(2, addedEvent.New(added{By: 1}))}
	if st, err := folded.Replay(log); err != nil || st.N != 3 {
		t.Fatalf("Replay through the fold rule = %+v, %v; want 1×1 + 1×2", st, err)
	}
}

// TestARecordedRefusalMatchesItsCode: the store's answer to a refused
// command id matches the refusal's Code with errors.Is, as the fresh
// refusal did; one without a code matches none.
func TestARecordedRefusalMatchesItsCode(t *testing.T) {
	err := error(&eventstore.RefusedCommandError{CommandID: "c1", Refusal: eventstore.Refusal{Status: "rejected", Reason: "past 10", Code: errTooBig}})
	if !errors.Is(err, errTooBig) {
		t.Fatalf("%v does not match %s", err, errTooBig)
	}
	if uncoded := error(&eventstore.RefusedCommandError{Refusal: eventstore.Refusal{Status: "rejected"}}); errors.Is(uncoded, errTooBig) || errors.Unwrap(uncoded) != nil {
		t.Fatalf("an uncoded refusal unwraps to %v", errors.Unwrap(uncoded))
	}
	var ve *eventstore.ValidationError
	if err := (eventstore.Refusal{Status: "rejected", Code: "a#b"}).Validate(); !errors.As(err, &ve) || ve.Field != "code" {
		t.Fatalf("a code with a reserved character: %v", err)
	}
}
