package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/internal/pause"
)

// RecalculateFunc recalculates the STATE item of aggregate id from its event
// log through the domain's rules (Processor.Replay, the fold every facet
// append keeps STATE equal to) and writes it when it differs from the
// stored one, conditional on the aggregate's version not having moved
// since the log was read. It never appends an event.
//
// The write gives STATE a new revision (eventstore.Stored.Revision). A
// command that read the old STATE before the write appends conditional on
// that STATE's revision as well as the version, so it fails with a
// *eventstore.ConcurrencyError and decides again on the new STATE: once
// the call returns, no state derived from the old STATE can be written.
//
// Errors: a stored event the rules reject is a *ReplayRefusedError naming
// the event (nothing is written); an aggregate with no event is
// eventstore.ErrAggregateNotFound; a command appended meanwhile (the
// version moved, or STATE is ahead of the log read) is a
// *eventstore.ConcurrencyError after the retries the caller asked for
// (RecalculateOptions.Retries), each retry reading the log again.
type RecalculateFunc func(ctx context.Context, id string) (Recalculation, error)

// Recalculation is what a recalculation found and did.
type Recalculation struct {
	Aggregate eventstore.Ref
	// Version is the aggregate's version: the sequence of the last event
	// folded, which Now is the state after.
	Version int64
	// WasSeq is the sequence the STATE item said it was at, Was its JSON
	// (both zero when there was no STATE item: HadState false).
	HadState bool
	WasSeq   int64
	Was      json.RawMessage
	// Now is the fold of the log (JSON), the STATE item after the call.
	Now json.RawMessage
	// Changed is set when STATE was rewritten: its JSON or its sequence
	// differed from the fold. When false nothing was written.
	Changed bool
	// Attempts counts the passes over the log: 1, more after conflicts
	// with concurrent commands.
	Attempts int
}

// ReplayRefusedError says the domain's rules reject a stored event when
// the aggregate's log is folded again: the stored history is no longer
// valid under the current rules (a rule changed, or an event was written
// around them). Nothing was written. It is permanent and unwraps to the
// rules' *eventstore.RuleRejection (or whatever error the rule returned).
type ReplayRefusedError struct {
	Aggregate eventstore.Ref
	// EventID, EventType and Sequence name the refused event.
	EventID   string
	EventType string
	Sequence  int64
	Err       error
}

func (e *ReplayRefusedError) Error() string {
	return fmt.Sprintf("the rules of %s refuse stored event %d (%s, id %s): %v", e.Aggregate, e.Sequence, e.EventType, e.EventID, e.Err)
}

// Unwrap returns the rules' error.
func (e *ReplayRefusedError) Unwrap() error { return e.Err }

// Permanent is true: the same log fails the same way until the rules or
// the log change (see eventstore.IsPermanent).
func (e *ReplayRefusedError) Permanent() bool { return true }

// RecalculateOptions tune a RecalculateFunc.
type RecalculateOptions struct {
	// Retries is how many times a conflict with a concurrent command is
	// retried, reading the events appended since and folding again, after
	// a short random pause (default 10; negative: none).
	Retries int
}

// FacetRecalculate returns the RecalculateFunc of a facet domain of
// aggregateType with processor p on store (whose upcasters the events
// are read through). It is safe for concurrent use.
func FacetRecalculate[S any](store eventstore.Store, aggregateType string, p eventstore.Processor[S], opts RecalculateOptions) RecalculateFunc {
	if opts.Retries == 0 {
		opts.Retries = 10
	}
	return func(ctx context.Context, id string) (Recalculation, error) {
		ref := eventstore.Ref{Type: aggregateType, ID: id}
		if err := ref.Validate(); err != nil {
			return Recalculation{Aggregate: ref}, fmt.Errorf("recalculate %s: %w", ref, err)
		}
		var log []eventstore.Envelope
		for attempt := 1; ; attempt++ {
			if attempt > 1 {
				// A short random pause, so that passes do not collide
				// with the commands they lost to in lock step.
				if err := pause.Sleep(ctx, pause.Jittered(pause.Backoff(attempt-1, 2*time.Millisecond, 200*time.Millisecond))); err != nil {
					return Recalculation{Aggregate: ref, Attempts: attempt - 1}, fmt.Errorf("recalculate %s: %w", ref, err)
				}
			}
			var rec Recalculation
			var err error
			rec, log, err = recalculateOnce(ctx, store, ref, p, log)
			rec.Attempts = attempt
			var conflict *eventstore.ConcurrencyError
			if err != nil && errors.As(err, &conflict) && attempt <= opts.Retries && ctx.Err() == nil {
				continue
			}
			return rec, err
		}
	}
}

// recalculateOnce reads the log (only the events after log, the log of
// a previous pass, which it returns grown), then STATE (so that a command
// appended in between shows as STATE ahead of the log: a conflict),
// folds, and writes STATE conditional on the version of the log read.
func recalculateOnce[S any](ctx context.Context, store eventstore.Store, ref eventstore.Ref, p eventstore.Processor[S], log []eventstore.Envelope) (Recalculation, []eventstore.Envelope, error) {
	rec := Recalculation{Aggregate: ref}
	wrap := func(err error) error { return fmt.Errorf("recalculate %s: %w", ref, err) }
	var after int64
	if len(log) > 0 {
		after = log[len(log)-1].Sequence
	}
	more, err := store.Load(ctx, ref, after)
	if err != nil {
		return rec, log, wrap(err)
	}
	log = append(log, more...)
	if len(log) == 0 {
		return rec, log, wrap(eventstore.ErrAggregateNotFound)
	}
	rec.Version = log[len(log)-1].Sequence
	st, err := store.State(ctx, ref)
	switch {
	case errors.Is(err, eventstore.ErrAggregateNotFound):
	case err != nil:
		return rec, log, wrap(err)
	default:
		rec.HadState, rec.WasSeq, rec.Was = true, st.Seq, st.Data
		if st.Seq > rec.Version {
			return rec, log, wrap(&eventstore.ConcurrencyError{Aggregate: ref, Expected: rec.Version, Actual: st.Seq})
		}
	}
	state, err := p.Replay(log)
	if err != nil {
		return rec, log, wrap(refused(ref, p, log, err))
	}
	now, err := json.Marshal(state)
	if err != nil {
		return rec, log, wrap(fmt.Errorf("encode state: %w", err))
	}
	rec.Now = now
	if rec.HadState && rec.WasSeq == rec.Version && sameJSON(rec.Was, now) {
		return rec, log, nil
	}
	// No IfState: the fold of the log at rec.Version is right whatever
	// STATE holds, and the new revision fences off commands decided on it.
	if _, err := store.Append(ctx, eventstore.AppendRequest{Aggregate: ref, ExpectedVersion: rec.Version, State: now}); err != nil {
		return rec, log, fmt.Errorf("recalculate: %w", err) // the store names the aggregate
	}
	rec.Changed = true
	return rec, log, nil
}

// refused names the event a replay of events stopped at with err: the
// first event whose prefix of the log the rules do not fold (found by
// bisection, on this error path only). Errors that are not about an event
// (a broken log) are returned as they are.
func refused[S any](ref eventstore.Ref, p eventstore.Processor[S], events []eventstore.Envelope, err error) error {
	var val *eventstore.ValidationError
	if errors.As(err, &val) && val.Field == "events" {
		return err
	}
	lo, hi := 0, len(events) // events[:lo] folds, events[:hi] does not
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if _, e := p.Replay(events[:mid]); e != nil {
			hi = mid
		} else {
			lo = mid
		}
	}
	e := events[hi-1]
	return &ReplayRefusedError{Aggregate: ref, EventID: e.EventID, EventType: e.EventType, Sequence: e.Sequence, Err: err}
}

// sameJSON reports whether a and b are the same JSON value (object keys
// in any order, numbers compared by their text).
func sameJSON(a, b []byte) bool {
	decode := func(raw []byte) (any, bool) {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			return nil, false
		}
		return v, true
	}
	va, oka := decode(a)
	vb, okb := decode(b)
	return oka && okb && reflect.DeepEqual(va, vb)
}
