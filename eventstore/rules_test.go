package eventstore_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
)

type counter struct{ N int }

func counterProcessor() eventstore.Processor[counter] {
	return eventstore.Processor[counter]{
		Initial: func() counter { return counter{} },
		Rules: map[string]eventstore.Rule[counter]{
			"Inc": eventstore.On(func(c counter, by struct{ By int }, out *eventstore.Outbox) (counter, error) {
				if by.By < 0 {
					return c, eventstore.Reject("negative increment")
				}
				c.N += by.By
				if c.N >= 10 {
					out.Publish("reachedTen", map[string]int{"n": c.N})
					out.Publish("audit", struct{}{})
				}
				return c, nil
			}),
		},
	}
}

func evs(payloads ...string) []eventstore.Envelope {
	out := make([]eventstore.Envelope, len(payloads))
	for i, p := range payloads {
		out[i] = eventstore.Envelope{EventID: eventstore.NewEventID(time.Now()), AggregateType: "c", AggregateID: "1",
			Sequence: int64(i + 1), EventType: "Inc", SchemaVersion: 1, OccurredAt: time.Now(), Payload: json.RawMessage(p)}
	}
	return out
}

func TestProcessorFoldsEventsAndCollectsOutbound(t *testing.T) {
	p := counterProcessor()
	st, out, err := p.Apply(p.Initial(), evs(`{"By":4}`, `{"By":6}`, `{"By":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if st.N != 11 || len(out) != 4 {
		t.Fatalf("state %d, %d outbound", st.N, len(out))
	}
	if out[0].Seq != 2 || out[0].Index != 0 || out[1].Index != 1 || out[2].Seq != 3 || out[2].Index != 0 || string(out[1].Payload) != "{}" {
		t.Fatalf("outbound numbering %+v", out)
	}
}

func TestProcessorStopsAtRejectionUnknownTypeAndBadPayload(t *testing.T) {
	p := counterProcessor()
	st, out, err := p.Apply(counter{N: 1}, evs(`{"By":2}`, `{"By":-1}`))
	var rej *eventstore.RuleRejection
	if !errors.As(err, &rej) || rej.Sequence != 2 || rej.EventType != "Inc" || rej.Reason != "negative increment" {
		t.Fatalf("rejection: %v", err)
	}
	if st.N != 3 || out != nil {
		t.Fatalf("state before the rejected event should be returned: %d, %v", st.N, out)
	}
	unknown := evs(`{}`)
	unknown[0].EventType = "Dec"
	var ve *eventstore.ValidationError
	if _, _, err := p.Apply(counter{}, unknown); !errors.As(err, &ve) || ve.Field != "event_type" {
		t.Fatalf("unknown type: %v", err)
	}
	if _, _, err := p.Apply(counter{}, evs(`{"By":"x"}`)); !errors.As(err, &ve) || ve.Field != "payload" {
		t.Fatalf("bad payload: %v", err)
	}
}
