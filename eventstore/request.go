package eventstore

import (
	"fmt"
	"strings"
)

// Validate checks everything an adapter needs before writing, against
// schema: the aggregate, the expected version, every event (complete,
// of a known type, of this aggregate, sequences contiguous from
// ExpectedVersion+1), the command id, the STATE JSON and every outbound
// event (caused by an event of this request, unique (Seq, Index)); a
// request without events must be for an existing aggregate, and no
// sequence may exceed MaxSequence. The first problem is returned as a
// *ValidationError. Every Store runs it before writing.
func (r AppendRequest) Validate(schema Schema) error {
	if err := r.Aggregate.Validate(); err != nil {
		return err
	}
	if r.ExpectedVersion < 0 {
		return &ValidationError{Field: "expected_version", Reason: fmt.Sprintf("is %d, want ≥ 0", r.ExpectedVersion)}
	}
	if len(r.Events) == 0 && len(r.State) == 0 {
		return &ValidationError{Field: "events", Reason: "is empty (an append without events must rewrite STATE)"}
	}
	for i, e := range r.Events {
		if err := e.Validate(); err != nil {
			return indexed(err, i)
		}
		if err := schema.Types.Check(e.EventType); err != nil {
			return indexed(err, i)
		}
		if e.Aggregate() != r.Aggregate {
			return indexed(&ValidationError{Field: "aggregate", Reason: fmt.Sprintf("is %s, want %s", e.Aggregate(), r.Aggregate)}, i)
		}
		if want := r.ExpectedVersion + int64(i) + 1; e.Sequence != want {
			return indexed(&ValidationError{Field: "sequence", Reason: fmt.Sprintf("is %d, want %d", e.Sequence, want)}, i)
		}
	}
	if r.CommandID != "" {
		if err := ValidateName("command_id", r.CommandID); err != nil {
			return err
		}
	}
	if len(r.State) > 0 {
		if err := ValidatePayload("state", r.State); err != nil {
			return err
		}
	}
	if r.IfState != nil && len(r.State) == 0 {
		return &ValidationError{Field: "if_state", Reason: "is set without a STATE to write"}
	}
	seen := map[[2]int64]bool{}
	for i, o := range r.Outbound {
		field := func(f string) string { return fmt.Sprintf("outbound[%d].%s", i, f) }
		if err := ValidateName(field("name"), o.Name); err != nil {
			return err
		}
		if err := ValidatePayload(field("payload"), o.Payload); err != nil {
			return err
		}
		if o.Seq <= r.ExpectedVersion || o.Seq > r.NewVersion() {
			return &ValidationError{Field: field("seq"), Reason: fmt.Sprintf("is %d, want an event of this append (%d..%d)", o.Seq, r.ExpectedVersion+1, r.NewVersion())}
		}
		k := [2]int64{o.Seq, int64(o.Index)}
		if o.Index < 0 || seen[k] {
			return &ValidationError{Field: field("index"), Reason: fmt.Sprintf("%d is negative or repeated for sequence %d", o.Index, o.Seq)}
		}
		seen[k] = true
	}
	if len(r.Events) == 0 && r.ExpectedVersion == 0 {
		return &ValidationError{Field: "events", Reason: "is empty for a new aggregate"}
	}
	if r.NewVersion() > MaxSequence {
		return &ValidationError{Field: "sequence", Reason: fmt.Sprintf("%d exceeds %d", r.NewVersion(), int64(MaxSequence))}
	}
	return nil
}

// MaxSequence is the highest sequence number (and so version) an
// aggregate can reach: the store's keys hold 12 decimal digits.
const MaxSequence = 999_999_999_999

// MaxReasonBytes bounds the reason a store records with a refusal; a
// longer one is cut (see Refusal.Recorded).
const MaxReasonBytes = 1024

// Validate reports an empty status, a negative version or a code that is
// not a usable name (see ValidateName) as a *ValidationError.
func (r Refusal) Validate() error {
	if r.Status == "" {
		return &ValidationError{Field: "status", Reason: "is empty"}
	}
	if r.Version < 0 {
		return &ValidationError{Field: "version", Reason: "is negative"}
	}
	if r.Code != "" {
		return ValidateName("code", string(r.Code))
	}
	return nil
}

// Recorded is r as a store records it: a reason longer than
// MaxReasonBytes is cut there (at a UTF-8 boundary) and ends with "…".
func (r Refusal) Recorded() Refusal {
	if len(r.Reason) > MaxReasonBytes {
		r.Reason = strings.ToValidUTF8(r.Reason[:MaxReasonBytes], "") + "…"
	}
	return r
}

// Validate checks a snapshot before a store keeps it: a sequence of at
// least 1 and a JSON document ("state"), as a *ValidationError.
func (s Stored) Validate() error {
	if s.Seq < 1 {
		return &ValidationError{Field: "seq", Reason: fmt.Sprintf("is %d, want ≥ 1", s.Seq)}
	}
	return ValidatePayload("state", s.Data)
}

// Result is the AppendResult of r once stored: its first and last
// sequence and its events with their ids. Every Store answers an append
// with it.
func (r AppendRequest) Result() AppendResult {
	res := AppendResult{
		Aggregate: r.Aggregate,
		FirstSeq:  r.ExpectedVersion + 1,
		LastSeq:   r.NewVersion(),
		Events:    r.Events,
		EventIDs:  make([]string, len(r.Events)),
	}
	for i, e := range r.Events {
		res.EventIDs[i] = e.EventID
	}
	return res
}
