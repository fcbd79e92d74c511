package eventstore

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Rule is a pure reducer: it returns the state after ev, or an error. A
// *RuleRejection (see Reject) refuses the event; any other error is a
// failure of the rule itself. A rule may publish outbound events on out.
// It must not do I/O: it runs between the read of the state and the
// conditional write, and on every replay. It receives a state of its own
// (the facet hands it a fresh copy) and may modify and return it.
type Rule[S any] func(state S, ev Envelope, out *Outbox) (S, error)

// On adapts a rule that wants the payload decoded as E. A payload that
// does not decode into E is a *ValidationError on "payload".
func On[S, E any](fn func(state S, ev E, out *Outbox) (S, error)) Rule[S] {
	return func(state S, env Envelope, out *Outbox) (S, error) {
		var ev E
		if err := env.DecodePayload(&ev); err != nil {
			return state, &ValidationError{Field: "payload", Reason: err.Error()}
		}
		return fn(state, ev, out)
	}
}

// Outbox collects the outbound events a rule publishes while one event is
// applied. Not safe for concurrent use (rules run sequentially).
type Outbox struct {
	seq     int64
	pending []Outbound
	err     error
}

// Publish records an outbound event called name with payload v encoded as
// JSON. An encoding failure fails the event's application.
func (o *Outbox) Publish(name string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		o.err = errors.Join(o.err, fmt.Errorf("outbound %s: %w", name, err))
		return
	}
	o.pending = append(o.pending, Outbound{Seq: o.seq, Index: len(o.pending), Name: name, Payload: b})
}

// Processor applies rules to events. Initial gives the state of an
// aggregate before its first event. Each event type has one rule, in
// Rules, in HistoryRules (a rule that sees the aggregate's other events)
// or in FoldRules (one that sees the past through a Fold), in only one of
// them. NewProcessor builds one from typed event definitions (OnEvent and
// its siblings), so that each rule's payload type is its event's; the
// maps can also be filled by event type name. A Processor is immutable
// once built and safe for concurrent use.
type Processor[S any] struct {
	Initial      func() S
	Rules        map[string]Rule[S]
	HistoryRules map[string]HistoryRule[S]
	// FoldRules are history rules that declare a fold: a facet without
	// HistoryRules gives them the past from its latest snapshot plus the
	// later events, not the whole log. Their folds' keys are unique.
	FoldRules map[string]FoldRule[S]

	defs map[string]EventDefinition // by event type; see Events
}

// Apply folds events into state in order and returns the new state and
// every outbound event published. It stops at the first event that has no
// rule (*ValidationError on "event_type"), is rejected (*RuleRejection,
// filled with the event type and sequence) or fails, and returns that
// error with the state as it was before that event. A history rule sees
// New (events) and its Index but no past (PastLoaded false); one that
// needs it, and every fold rule, fails with ErrPastNotLoaded.
func (p Processor[S]) Apply(state S, events []Envelope) (S, []Outbound, error) {
	return p.apply(state, History{}, nil, events)
}

// ApplyWithHistory is Apply for events that follow past, the aggregate's
// whole stored log (sequences 1 to len(past), then events without a gap,
// else a *ValidationError on "past" or "events" before any rule runs).
// History rules see Past = past with PastLoaded set, fold rules their
// folds over past. state must be the state after past (see Replay).
func (p Processor[S]) ApplyWithHistory(state S, past, events []Envelope) (S, []Outbound, error) {
	fs := p.startFolds()
	if err := p.foldLog(fs, past); err != nil {
		return state, nil, err
	}
	if err := checkLog("events", events, int64(len(past))); err != nil {
		return state, nil, err
	}
	return p.apply(state, History{Past: past[:len(past):len(past)], PastLoaded: true}, fs, events)
}

// Replay folds an aggregate's whole stored log (sequences 1, 2, … in
// order, else a *ValidationError on "events") from the initial state and
// returns the state after it. Outbound events are discarded: they were
// published when the events were appended. History rules see each event
// replayed with the stored events before it as Past, PastLoaded and
// Replayed set, New = [ev] and Index 0; fold rules their folds over the
// events before it. Errors are as for Apply.
func (p Processor[S]) Replay(log []Envelope) (S, error) {
	state, _, err := p.replay(log)
	return state, err
}

// replay is Replay, also returning the folds after log.
func (p Processor[S]) replay(log []Envelope) (S, *folds, error) {
	state := p.Initial()
	if err := checkLog("events", log, 0); err != nil {
		return state, nil, err
	}
	fs := p.startFolds()
	for k := range log {
		next, _, err := p.apply(state, History{Past: log[:k:k], PastLoaded: true, Replayed: true}, fs, log[k:k+1])
		if err != nil {
			return state, nil, err
		}
		state = next
	}
	return state, fs, nil
}

// apply folds events with h as their history (h.New becomes events and
// h.Index each event's position) and fs as the folds before them (nil:
// not loaded), stepping fs past each event applied.
func (p Processor[S]) apply(state S, h History, fs *folds, events []Envelope) (S, []Outbound, error) {
	var all []Outbound
	h.New = events[:len(events):len(events)]
	for i, ev := range events {
		out := &Outbox{seq: ev.Sequence}
		var next S
		var err error
		if rule, ok := p.Rules[ev.EventType]; ok {
			next, err = rule(state, ev, out)
		} else if hrule, ok := p.HistoryRules[ev.EventType]; ok {
			h.Index = i
			next, err = hrule(state, ev, h, out)
		} else if frule, ok := p.FoldRules[ev.EventType]; ok {
			if fs == nil {
				err = ErrPastNotLoaded
			} else {
				next, err = frule.apply(state, ev, fs.accs[frule.foldKey()], out)
			}
		} else {
			return state, nil, &ValidationError{Field: "event_type", Reason: fmt.Sprintf("%q has no rule", ev.EventType)}
		}
		if err == nil {
			err = out.err
		}
		if err != nil {
			var rej *RuleRejection
			if errors.As(err, &rej) {
				filled := *rej
				filled.EventType, filled.Sequence = ev.EventType, ev.Sequence
				return state, nil, &filled
			}
			return state, nil, fmt.Errorf("rule %s (sequence %d): %w", ev.EventType, ev.Sequence, err)
		}
		if fs != nil {
			if err := p.stepFolds(fs, ev); err != nil {
				return state, nil, err
			}
		}
		state = next
		all = append(all, out.pending...)
	}
	return state, all, nil
}

// Types returns the event types the processor has rules for (in Rules,
// HistoryRules or FoldRules), as a set usable as Schema.Types.
func (p Processor[S]) Types() EventTypes {
	s := make(EventTypes, len(p.Rules)+len(p.HistoryRules)+len(p.FoldRules))
	for t := range p.Rules {
		s[t] = struct{}{}
	}
	for t := range p.HistoryRules {
		s[t] = struct{}{}
	}
	for t := range p.FoldRules {
		s[t] = struct{}{}
	}
	return s
}
