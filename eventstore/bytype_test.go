package eventstore_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/eventpipe/eventpipe/eventstore"
)

// TestTypeQueryNormalizeBoundsEventIDs checks the range of event ids a
// by-type query selects: From and To by ULID millisecond, After strictly
// above a checkpoint, the default and maximum limits, and bad fields.
func TestTypeQueryNormalizeBoundsEventIDs(t *testing.T) {
	at := time.Date(2026, 5, 6, 7, 8, 9, 500_000_000, time.UTC)
	before, inside, later := eventstore.NewEventID(at.Add(-time.Millisecond)), eventstore.NewEventID(at), eventstore.NewEventID(at.Add(time.Millisecond))
	q, r, err := eventstore.TypeQuery{EventType: "Deposited", From: at, To: at.Add(time.Millisecond)}.Normalize(42)
	if err != nil || q.Limit != 42 {
		t.Fatalf("Normalize = %+v, %v; want the default limit 42", q, err)
	}
	if r.Contains(before) || !r.Contains(inside) || r.Contains(later) {
		t.Fatalf("[From, To) of one millisecond %+v: contains before %t, inside %t, later %t", r, r.Contains(before), r.Contains(inside), r.Contains(later))
	}
	_, r, err = eventstore.TypeQuery{EventType: "Deposited", After: inside}.Normalize(1)
	if err != nil || r.Contains(before) || r.Contains(inside) || !r.Contains(later) {
		t.Fatalf("After %s: %+v, %v; want only later ids", inside, r, err)
	}
	if _, r, _ := (eventstore.TypeQuery{EventType: "Deposited", After: inside, To: at}).Normalize(1); !r.Empty() {
		t.Fatalf("After a time past To: %+v; want an empty range", r)
	}
	for field, q := range map[string]eventstore.TypeQuery{
		"event_type": {EventType: "a#b"},
		"limit":      {EventType: "Deposited", Limit: eventstore.MaxPageSize + 1},
		"to":         {EventType: "Deposited", From: at, To: at},
		"after":      {EventType: "Deposited", After: "not-a-ulid"},
	} {
		var ve *eventstore.ValidationError
		if _, _, err := q.Normalize(10); !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("%+v: %v; want a *ValidationError on %s", q, err, field)
		}
	}
}

// TestRefusalRecordedCutsLongReasonsAtARuneBoundary: a store keeps at
// most MaxReasonBytes of a reason, never half a character.
func TestRefusalRecordedCutsLongReasonsAtARuneBoundary(t *testing.T) {
	short := eventstore.Refusal{Status: "rejected", Reason: "insufficient funds", Version: 3}
	if short.Recorded() != short {
		t.Fatalf("a short reason changed: %+v", short.Recorded())
	}
	long := eventstore.Refusal{Status: "rejected", Reason: "x" + strings.Repeat("é", eventstore.MaxReasonBytes)}
	got := long.Recorded().Reason
	if !utf8.ValidString(got) || !strings.HasSuffix(got, "…") || len(got) > eventstore.MaxReasonBytes+len("…") {
		t.Fatalf("recorded reason of %d bytes (valid UTF-8 %t), ending %q", len(got), utf8.ValidString(got), got[len(got)-5:])
	}
	for _, r := range []eventstore.Refusal{{}, {Status: "rejected", Version: -1}} {
		if err := r.Validate(); err == nil {
			t.Errorf("%+v: Validate accepted it", r)
		}
	}
}

// TestValidateRejectsWhatNoStoreCanWrite covers the checks every store
// relies on beyond the events themselves.
func TestValidateRejectsWhatNoStoreCanWrite(t *testing.T) {
	ref := eventstore.Ref{Type: "account", ID: "a1"}
	var ve *eventstore.ValidationError
	if err := (eventstore.AppendRequest{Aggregate: ref, State: json.RawMessage(`{}`)}).Validate(eventstore.Schema{}); !errors.As(err, &ve) || ve.Field != "events" {
		t.Errorf("STATE alone for a new aggregate: %v; want a *ValidationError on events", err)
	}
	req, err := eventstore.Prepare(ref, eventstore.MaxSequence, eventstore.Change{Events: []eventstore.NewEvent{eventstore.Event("Deposited", map[string]int{})}}, eventstore.Schema{})
	if err != nil {
		t.Fatal(err)
	}
	if err := req.Validate(eventstore.Schema{}); !errors.As(err, &ve) || ve.Field != "sequence" {
		t.Errorf("a sequence past MaxSequence: %v; want a *ValidationError on sequence", err)
	}
	for _, st := range []eventstore.Stored{{Seq: 0, Data: json.RawMessage(`{}`)}, {Seq: 1, Data: json.RawMessage(`nul`)}} {
		if err := st.Validate(); !errors.As(err, &ve) {
			t.Errorf("snapshot %d %s: %v; want a *ValidationError", st.Seq, st.Data, err)
		}
	}
}
