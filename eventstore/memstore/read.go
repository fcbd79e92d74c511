package memstore

import (
	"context"
	"fmt"
	"sort"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/eventstore/dynamodb"
)

// Load returns every event of ref after afterSeq, in sequence order and
// upcast through the Schema. With afterSeq 0 and no event it returns
// eventstore.ErrAggregateNotFound; above 0 an empty slice means the
// caller is up to date.
func (s *Store) Load(ctx context.Context, ref eventstore.Ref, afterSeq int64) ([]eventstore.Envelope, error) {
	return s.load(ctx, ref, afterSeq, -1)
}

// LoadPage returns at most limit events of ref after afterSeq (limit 0:
// Config.PageSize), upcast. Fewer than limit events (or none) means the
// end of the log. With afterSeq 0 and no event it returns
// eventstore.ErrAggregateNotFound.
func (s *Store) LoadPage(ctx context.Context, ref eventstore.Ref, afterSeq int64, limit int) ([]eventstore.Envelope, error) {
	if limit <= 0 {
		limit = s.cfg.PageSize
	}
	return s.load(ctx, ref, afterSeq, limit)
}

// load is Load with at most limit events (-1: all).
func (s *Store) load(ctx context.Context, ref eventstore.Ref, afterSeq int64, limit int) ([]eventstore.Envelope, error) {
	wrap := func(err error) error { return fmt.Errorf("load %s: %w", ref, err) }
	if err := ctx.Err(); err != nil {
		return nil, wrap(err)
	}
	if err := ref.Validate(); err != nil {
		return nil, wrap(err)
	}
	if afterSeq < 0 {
		return nil, wrap(&eventstore.ValidationError{Field: "after_seq", Reason: fmt.Sprintf("is %d, want ≥ 0", afterSeq)})
	}
	s.mu.RLock()
	var stored []eventstore.Envelope
	if agg := s.aggs[ref]; agg != nil && afterSeq < int64(len(agg.events)) {
		stored = agg.events[afterSeq:]
	}
	if limit >= 0 && len(stored) > limit {
		stored = stored[:limit]
	}
	out, err := s.upcast(stored)
	s.mu.RUnlock()
	if err != nil {
		return nil, wrap(err)
	}
	if len(out) == 0 && afterSeq == 0 {
		return nil, wrap(eventstore.ErrAggregateNotFound)
	}
	return out, nil
}

// upcast returns copies of events upcast through the Schema.
func (s *Store) upcast(events []eventstore.Envelope) ([]eventstore.Envelope, error) {
	out := make([]eventstore.Envelope, 0, len(events))
	for _, e := range events {
		u, err := s.cfg.Schema.Upcasters.Upcast(cloneEnvelope(e))
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// Version returns ref's current version (the sequence of its last
// event), or eventstore.ErrAggregateNotFound.
func (s *Store) Version(ctx context.Context, ref eventstore.Ref) (int64, error) {
	wrap := func(err error) error { return fmt.Errorf("version %s: %w", ref, err) }
	if err := ctx.Err(); err != nil {
		return 0, wrap(err)
	}
	if err := ref.Validate(); err != nil {
		return 0, wrap(err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	v := s.version(ref)
	if v == 0 {
		return 0, wrap(eventstore.ErrAggregateNotFound)
	}
	return v, nil
}

// version is ref's version, 0 when it has no event. The caller holds s.mu.
func (s *Store) version(ref eventstore.Ref) int64 {
	if agg := s.aggs[ref]; agg != nil {
		return int64(len(agg.events))
	}
	return 0
}

// State returns ref's STATE, or eventstore.ErrAggregateNotFound.
func (s *Store) State(ctx context.Context, ref eventstore.Ref) (eventstore.Stored, error) {
	return s.stored(ctx, ref, "state", func(a *aggregate) *eventstore.Stored { return a.state })
}

// Snapshot returns ref's latest snapshot, or
// eventstore.ErrAggregateNotFound when none was taken.
func (s *Store) Snapshot(ctx context.Context, ref eventstore.Ref) (eventstore.Stored, error) {
	return s.stored(ctx, ref, "snapshot", func(a *aggregate) *eventstore.Stored { return a.snapshot })
}

func (s *Store) stored(ctx context.Context, ref eventstore.Ref, op string, get func(*aggregate) *eventstore.Stored) (eventstore.Stored, error) {
	wrap := func(err error) error { return fmt.Errorf("%s %s: %w", op, ref, err) }
	if err := ctx.Err(); err != nil {
		return eventstore.Stored{}, wrap(err)
	}
	if err := ref.Validate(); err != nil {
		return eventstore.Stored{}, wrap(err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	agg := s.aggs[ref]
	if agg == nil || get(agg) == nil {
		return eventstore.Stored{}, wrap(eventstore.ErrAggregateNotFound)
	}
	return cloneStored(*get(agg)), nil
}

// PutSnapshot stores st as ref's snapshot unless one at the same or a
// later sequence exists (then it does nothing and returns nil). A
// snapshot beyond ref's version (or of an aggregate without events) is
// eventstore.ErrAggregateNotFound; bad input a *eventstore.ValidationError
// and one over DynamoDB's item size eventstore.ErrItemTooLarge, as in the
// DynamoDB store. A zero UpdatedAt becomes now.
func (s *Store) PutSnapshot(ctx context.Context, ref eventstore.Ref, st eventstore.Stored) error {
	wrap := func(err error) error { return fmt.Errorf("put snapshot %s: %w", ref, err) }
	if err := ctx.Err(); err != nil {
		return wrap(err)
	}
	if err := ref.Validate(); err != nil {
		return wrap(err)
	}
	if err := st.Validate(); err != nil {
		return wrap(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.version(ref)
	if v == 0 {
		return wrap(fmt.Errorf("version %s: %w", ref, eventstore.ErrAggregateNotFound))
	}
	if st.Seq > v {
		return wrap(fmt.Errorf("seq %d is beyond version %d: %w", st.Seq, v, eventstore.ErrAggregateNotFound))
	}
	if st.UpdatedAt.IsZero() {
		st.UpdatedAt = s.cfg.Now()
	}
	st.UpdatedAt = st.UpdatedAt.UTC()
	if err := dynamodb.CheckSnapshotLimits(ref, st); err != nil {
		return wrap(err)
	}
	agg := s.aggs[ref]
	if agg.snapshot != nil && agg.snapshot.Seq >= st.Seq {
		return nil
	}
	kept := cloneStored(st)
	agg.snapshot = &kept
	return nil
}

// ListAggregates returns one page of the ids of q.Type's aggregates
// that have events, above q.After, sorted, as the DynamoDB store's
// listing does (q.Limit, default the configured page size).
func (s *Store) ListAggregates(ctx context.Context, q eventstore.AggregateQuery) (eventstore.AggregatePage, error) {
	wrap := func(err error) error { return fmt.Errorf("aggregates of %s: %w", q.Type, err) }
	if err := ctx.Err(); err != nil {
		return eventstore.AggregatePage{}, wrap(err)
	}
	if err := q.Validate(); err != nil {
		return eventstore.AggregatePage{}, wrap(err)
	}
	if q.Limit == 0 {
		q.Limit = s.cfg.PageSize
	}
	s.mu.RLock()
	var ids []string
	for ref, agg := range s.aggs {
		if ref.Type == q.Type && len(agg.events) > 0 && ref.ID > q.After {
			ids = append(ids, ref.ID)
		}
	}
	s.mu.RUnlock()
	sort.Strings(ids)
	page := eventstore.AggregatePage{IDs: ids, More: len(ids) > q.Limit}
	if page.More {
		page.IDs = ids[:q.Limit:q.Limit]
	}
	return page, nil
}

// Outbound returns the outbound records stored for ref, in (Seq, Index)
// order (none for an unknown aggregate): what the DynamoDB store keeps as
// OUTBOUND items, for tests that check an append's outbox.
func (s *Store) Outbound(ctx context.Context, ref eventstore.Ref) ([]eventstore.OutboundRecord, error) {
	wrap := func(err error) error { return fmt.Errorf("outbound %s: %w", ref, err) }
	if err := ctx.Err(); err != nil {
		return nil, wrap(err)
	}
	if err := ref.Validate(); err != nil {
		return nil, wrap(err)
	}
	s.mu.RLock()
	var out []eventstore.OutboundRecord
	if agg := s.aggs[ref]; agg != nil {
		for _, o := range agg.outbound {
			out = append(out, cloneOutbound(o))
		}
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Seq != out[j].Seq {
			return out[i].Seq < out[j].Seq
		}
		return out[i].Index < out[j].Index
	})
	return out, nil
}
