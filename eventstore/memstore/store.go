package memstore

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/eventstore/dynamodb"
)

// Store is the in-memory event store, for tests and local experiments
// only: nothing survives the process. Build it with New; it is safe for
// concurrent use.
type Store struct {
	cfg Config

	mu       sync.RWMutex
	aggs     map[eventstore.Ref]*aggregate
	commands map[commandKey]command
	byType   map[string][]typeEntry // per event type, sorted (see typeEntry.less)
	feed     []Change               // feed[i].Position == i+1
	changed  chan struct{}          // closed and replaced on every commit
}

// aggregate is everything stored of one aggregate. Its version is
// len(events): events[i] has sequence i+1.
type aggregate struct {
	events   []eventstore.Envelope // as appended (not upcast)
	state    *eventstore.Stored
	snapshot *eventstore.Stored
	outbound []eventstore.OutboundRecord
}

type commandKey struct {
	ref eventstore.Ref
	id  string
}

// command is the recorded answer to a command id: the append it caused
// (result, Duplicate set) or its refusal.
type command struct {
	result  eventstore.AppendResult
	refusal *eventstore.Refusal
	expires time.Time // zero: never
}

var (
	_ eventstore.Store           = (*Store)(nil)
	_ eventstore.TypeReader      = (*Store)(nil)
	_ eventstore.AggregateLister = (*Store)(nil)
)

// New validates cfg and returns an empty Store.
func New(cfg Config) (*Store, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Store{
		cfg:      cfg,
		aggs:     map[eventstore.Ref]*aggregate{},
		commands: map[commandKey]command{},
		byType:   map[string][]typeEntry{},
		changed:  make(chan struct{}),
	}, nil
}

// Schema returns the store's schema (for a Facet's Upcasters and for
// eventstore.Prepare).
func (s *Store) Schema() eventstore.Schema { return s.cfg.Schema }

// Append writes req atomically, as the DynamoDB store does: the events,
// the new version, the STATE, the OUTBOUND records and the command record,
// or nothing. Before anything is written it validates req against the
// Schema (*eventstore.ValidationError) and DynamoDB's limits
// (eventstore.ErrTooManyItems, ErrItemTooLarge, ErrTransactionTooLarge).
// A command id already recorded returns the original result with
// Duplicate set, or *eventstore.RefusedCommandError; a stale expected
// version, or a STATE revision other than req.IfState's, returns
// *eventstore.ConcurrencyError
// (eventstore.ErrAggregateNotFound when a version above 0 was expected of
// an aggregate that does not exist). Errors are wrapped as
// "append <type>/<id>: …".
func (s *Store) Append(ctx context.Context, req eventstore.AppendRequest) (eventstore.AppendResult, error) {
	ref := req.Aggregate
	wrap := func(err error) error { return fmt.Errorf("append %s: %w", ref, err) }
	if err := ctx.Err(); err != nil {
		return eventstore.AppendResult{}, wrap(err)
	}
	if err := req.Validate(s.cfg.Schema); err != nil {
		return eventstore.AppendResult{}, wrap(err)
	}
	if err := dynamodb.CheckAppendLimits(req, s.cfg.CommandRetention); err != nil {
		return eventstore.AppendResult{}, wrap(err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now().UTC()
	if req.CommandID != "" {
		if rec, ok := s.command(ref, req.CommandID, now); ok {
			res, err := rec.outcome(ref, req.CommandID)
			if err != nil {
				return res, wrap(err)
			}
			return res, nil
		}
	}
	agg := s.aggs[ref]
	var actual int64
	if agg != nil {
		actual = int64(len(agg.events))
	}
	switch {
	case actual == req.ExpectedVersion:
	case actual == 0:
		return eventstore.AppendResult{}, wrap(fmt.Errorf("expected version %d: %w", req.ExpectedVersion, eventstore.ErrAggregateNotFound))
	default:
		return eventstore.AppendResult{}, wrap(&eventstore.ConcurrencyError{Aggregate: ref, Expected: req.ExpectedVersion, Actual: actual})
	}
	if req.IfState != nil {
		var rev string
		if agg != nil && agg.state != nil {
			rev = agg.state.Revision
		}
		if rev != req.IfState.Revision {
			return eventstore.AppendResult{}, wrap(&eventstore.ConcurrencyError{Aggregate: ref, Expected: req.ExpectedVersion, Actual: actual, StateRewritten: true})
		}
	}

	// Everything is checked: from here on the append cannot fail.
	if agg == nil {
		agg = &aggregate{}
		s.aggs[ref] = agg
	}
	change := Change{Position: Position(len(s.feed) + 1), Aggregate: ref}
	for _, e := range req.Events {
		e = cloneEnvelope(e)
		e.OccurredAt = e.OccurredAt.UTC()
		agg.events = append(agg.events, e)
		s.index(e)
		change.Events = append(change.Events, e)
	}
	var revision string
	if len(req.State) > 0 {
		revision = eventstore.NewEventID(now)
		agg.state = &eventstore.Stored{Seq: req.NewVersion(), Data: cloneJSON(req.State), UpdatedAt: now, Revision: revision}
	}
	for _, o := range req.Outbound {
		rec := outboundRecord(o, agg.events[o.Seq-1])
		agg.outbound = append(agg.outbound, rec)
		change.Outbound = append(change.Outbound, rec)
	}
	res := req.Result()
	res.StateRevision = revision
	if req.CommandID != "" {
		dup := res
		dup.StateRevision = ""
		dup.Events, dup.Duplicate = nil, true
		dup.EventIDs = append([]string{}, res.EventIDs...)
		s.commands[commandKey{ref, req.CommandID}] = command{result: dup, expires: s.expiry(now)}
	}
	s.feed = append(s.feed, change)
	close(s.changed)
	s.changed = make(chan struct{})
	return res, nil
}

// outboundRecord is o as stored, caused by event cause: a new ULID, the
// cause's time and metadata, the cause's id as causation id.
func outboundRecord(o eventstore.Outbound, cause eventstore.Envelope) eventstore.OutboundRecord {
	md := cause.Metadata
	md.CausationID = cause.EventID
	return eventstore.OutboundRecord{
		ID:            eventstore.NewEventID(time.Now()),
		Name:          o.Name,
		AggregateType: cause.AggregateType,
		AggregateID:   cause.AggregateID,
		Seq:           o.Seq,
		Index:         o.Index,
		EventID:       cause.EventID,
		OccurredAt:    cause.OccurredAt.UTC(),
		Payload:       cloneJSON(o.Payload),
		Metadata:      md,
	}
}

func (s *Store) expiry(now time.Time) time.Time {
	if s.cfg.CommandRetention <= 0 {
		return time.Time{}
	}
	return now.Add(s.cfg.CommandRetention)
}

// command returns the unexpired record of command id on ref. The caller
// holds s.mu.
func (s *Store) command(ref eventstore.Ref, id string, now time.Time) (command, bool) {
	rec, ok := s.commands[commandKey{ref, id}]
	if !ok || (!rec.expires.IsZero() && !now.Before(rec.expires)) {
		return command{}, false
	}
	return rec, true
}

// outcome is the answer a record gives: the append's result (Duplicate
// set) or *eventstore.RefusedCommandError.
func (c command) outcome(ref eventstore.Ref, id string) (eventstore.AppendResult, error) {
	if c.refusal != nil {
		return eventstore.AppendResult{}, &eventstore.RefusedCommandError{Aggregate: ref, CommandID: id, Refusal: *c.refusal}
	}
	res := c.result
	res.EventIDs = append([]string(nil), res.EventIDs...)
	return res, nil
}

// CommandResult returns the answer recorded for commandID on ref: the
// result of the append it caused (Duplicate set, no Events),
// *eventstore.RefusedCommandError when it was refused, or
// eventstore.ErrCommandNotFound (also once the record expired).
func (s *Store) CommandResult(ctx context.Context, ref eventstore.Ref, commandID string) (eventstore.AppendResult, error) {
	wrap := func(err error) error { return fmt.Errorf("command %s on %s: %w", commandID, ref, err) }
	if err := ctx.Err(); err != nil {
		return eventstore.AppendResult{}, wrap(err)
	}
	if err := eventstore.ValidateName("command_id", commandID); err != nil {
		return eventstore.AppendResult{}, wrap(err)
	}
	if err := ref.Validate(); err != nil {
		return eventstore.AppendResult{}, wrap(err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	rec, ok := s.command(ref, commandID, s.cfg.Now().UTC())
	if !ok {
		return eventstore.AppendResult{}, wrap(eventstore.ErrCommandNotFound)
	}
	return rec.outcome(ref, commandID)
}

// RecordRefusal records r (its reason cut as eventstore.Refusal.Recorded
// says) as the final answer to commandID on ref, unless an answer is
// recorded already: whichever of RecordRefusal and an Append with the
// same command id comes first wins. It returns a zero result when r is
// now the record, the earlier append's result with Duplicate set, or
// *eventstore.RefusedCommandError with the earlier refusal. Bad input is a
// *eventstore.ValidationError and records nothing.
func (s *Store) RecordRefusal(ctx context.Context, ref eventstore.Ref, commandID string, r eventstore.Refusal) (eventstore.AppendResult, error) {
	wrap := func(err error) error {
		return fmt.Errorf("record refusal of command %s on %s: %w", commandID, ref, err)
	}
	if err := ctx.Err(); err != nil {
		return eventstore.AppendResult{}, wrap(err)
	}
	if err := ref.Validate(); err != nil {
		return eventstore.AppendResult{}, wrap(err)
	}
	if err := eventstore.ValidateName("command_id", commandID); err != nil {
		return eventstore.AppendResult{}, wrap(err)
	}
	if err := r.Validate(); err != nil {
		return eventstore.AppendResult{}, wrap(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now().UTC()
	if rec, ok := s.command(ref, commandID, now); ok {
		return rec.outcome(ref, commandID)
	}
	recorded := r.Recorded()
	s.commands[commandKey{ref, commandID}] = command{refusal: &recorded, expires: s.expiry(now)}
	return eventstore.AppendResult{}, nil
}

func cloneJSON(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage{}, b...)
}

func cloneEnvelope(e eventstore.Envelope) eventstore.Envelope {
	e.Payload = cloneJSON(e.Payload)
	return e
}

func cloneOutbound(o eventstore.OutboundRecord) eventstore.OutboundRecord {
	o.Payload = cloneJSON(o.Payload)
	return o
}

func cloneStored(st eventstore.Stored) eventstore.Stored {
	st.Data = cloneJSON(st.Data)
	return st
}
