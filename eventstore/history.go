package eventstore

import "fmt"

// HistoryRule is a Rule that also sees the aggregate's events around ev:
// the stored events before it and the other events of its append (h). It
// is for rules whose answer depends on more than the state, e.g. "refuse
// a transaction whose description was already used" or "at most three
// withdrawals a day", when the state does not (or did not always) carry
// what they need. Everything said of Rule holds: pure, no I/O, a state of
// its own. h and the events in it belong to the processor and must not be
// modified.
//
// The past costs reads: it is only loaded by Facet.Recalculate and
// Facet.Load (and Processor.ApplyWithHistory and Processor.Replay). On
// Facet.Append and Facet.AppendTo, which read only STATE, h.PastLoaded is
// false; a rule that needs the past returns h.RequirePast() then, which
// fails the append with ErrPastNotLoaded.
type HistoryRule[S any] func(state S, ev Envelope, h History, out *Outbox) (S, error)

// OnHistory adapts a history rule that wants the payload decoded as E. A
// payload that does not decode into E is a *ValidationError on "payload".
// Events in h are not decoded (use Envelope.DecodePayload).
func OnHistory[S, E any](fn func(state S, ev E, h History, out *Outbox) (S, error)) HistoryRule[S] {
	return func(state S, env Envelope, h History, out *Outbox) (S, error) {
		var ev E
		if err := env.DecodePayload(&ev); err != nil {
			return state, &ValidationError{Field: "payload", Reason: err.Error()}
		}
		return fn(state, ev, h, out)
	}
}

// History is what a HistoryRule sees besides the state and the event ev
// it applies. Always ev == New[Index], and the events before ev, in
// sequence order, are Past followed by New[:Index] (see Before).
//
//   - Appending (Processor.Apply, Facet.Append, Facet.AppendTo): New is
//     the append's events, Index ev's position in them; the past was not
//     read, so Past is nil and PastLoaded false.
//   - Recalculating with new events (Processor.ApplyWithHistory,
//     Facet.Recalculate): Past is every stored event, PastLoaded true,
//     New and Index as when appending.
//   - Replaying a stored event (Processor.Replay, as Facet.Recalculate and
//     Facet.Load do first): Past is the stored events before ev,
//     PastLoaded true, New is just ev and Index 0 (which events were
//     appended together is not recorded), Replayed true. So a rule that
//     decides from Before alone decides a replay as it decided the append.
type History struct {
	// Past are the aggregate's stored events before those being applied,
	// from sequence 1, in order. Nil when PastLoaded is false.
	Past []Envelope
	// PastLoaded says Past is complete: the caller read the aggregate's
	// whole log. When false, an empty Past says nothing about the log.
	PastLoaded bool
	// New are the events being applied together, ev among them.
	New []Envelope
	// Index is ev's position in New.
	Index int
	// Replayed is set when ev is a stored event being replayed: it was
	// accepted once, its outbound events are discarded, and refusing it
	// now fails the replay (a rule may choose to enforce a newer policy
	// only on events that are not replayed).
	Replayed bool
}

// Before returns the events before ev in sequence order: Past followed by
// New[:Index]. Valid only when PastLoaded; otherwise it is New[:Index].
// The result must not be modified; it may share memory with the log.
func (h History) Before() []Envelope {
	switch {
	case h.Index == 0:
		return h.Past[:len(h.Past):len(h.Past)]
	case len(h.Past) == 0:
		return h.New[:h.Index:h.Index]
	}
	all := make([]Envelope, 0, len(h.Past)+h.Index)
	return append(append(all, h.Past...), h.New[:h.Index]...)
}

// RequirePast returns nil when the past was loaded, else ErrPastNotLoaded.
// A history rule that needs the past starts with it:
//
//	if err := h.RequirePast(); err != nil {
//		return state, err
//	}
func (h History) RequirePast() error {
	if h.PastLoaded {
		return nil
	}
	return ErrPastNotLoaded
}

// ErrPastNotLoaded is returned (wrapped, with the event type and
// sequence) when a history rule needs the aggregate's past events and the
// call did not read them: Facet.Append, Facet.AppendTo, Processor.Apply.
// Use Facet.Recalculate, which reads every event, to append instead.
// Nothing was written. It is permanent (IsPermanent): the same append
// fails the same way.
var ErrPastNotLoaded error = permanentError("rule needs the aggregate's past events, which were not read: use Facet.Recalculate")

// permanentError is a sentinel error that IsPermanent reports as
// permanent.
type permanentError string

func (e permanentError) Error() string { return string(e) }

// Permanent makes IsPermanent true.
func (permanentError) Permanent() bool { return true }

// checkLog reports, as a *ValidationError on field, a log whose events do
// not carry the sequences from+1, from+2, … in order: the past a history
// rule sees must be the whole log, without gap.
func checkLog(field string, events []Envelope, from int64) error {
	for i, ev := range events {
		if want := from + int64(i) + 1; ev.Sequence != want {
			return &ValidationError{Field: field, Reason: fmt.Sprintf("event %d has sequence %d, want %d (not the whole log in order)", i, ev.Sequence, want)}
		}
	}
	return nil
}
