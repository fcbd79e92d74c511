package memstore

import (
	"context"
	"fmt"

	"github.com/eventpipe/eventpipe/eventstore"
)

// Position is where a committed append sits in the store's change feed:
// 1 for the first, then one more for each (0 is before the first).
type Position uint64

// Change is one committed append as the change feed reports it (the
// in-memory counterpart of the DynamoDB table's stream, for an
// in-process relay): the events and outbound records it wrote, as stored
// (not upcast: a relay upcasts, as it does the stream's events). A
// rewrite of STATE alone has neither. Not to be confused with
// eventstore.Change, what a decision appends.
type Change struct {
	Position  Position
	Aggregate eventstore.Ref
	Events    []eventstore.Envelope
	Outbound  []eventstore.OutboundRecord
}

// Head returns the position of the last committed append (0 before the
// first): a reader that starts at Head sees only later appends.
func (s *Store) Head() Position {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return Position(len(s.feed))
}

// Changes returns, in commit order, at most limit (0: Config.PageSize)
// committed appends after position after; none when the reader is up to
// date. It does not wait: see Wait. A negative limit is a
// *eventstore.ValidationError. Nothing is ever dropped from the feed.
func (s *Store) Changes(ctx context.Context, after Position, limit int) ([]Change, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("changes after %d: %w", after, err)
	}
	if limit == 0 {
		limit = s.cfg.PageSize
	}
	if limit < 0 {
		return nil, fmt.Errorf("changes after %d: %w", after, &eventstore.ValidationError{Field: "limit", Reason: fmt.Sprintf("is %d, want ≥ 0", limit)})
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if after >= Position(len(s.feed)) {
		return nil, nil
	}
	tail := s.feed[after:]
	if len(tail) > limit {
		tail = tail[:limit]
	}
	out := make([]Change, len(tail))
	for i, c := range tail {
		out[i] = Change{Position: c.Position, Aggregate: c.Aggregate}
		for _, e := range c.Events {
			out[i].Events = append(out[i].Events, cloneEnvelope(e))
		}
		for _, o := range c.Outbound {
			out[i].Outbound = append(out[i].Outbound, cloneOutbound(o))
		}
	}
	return out, nil
}

// Wait blocks until an append after position after is committed (at
// once when one is) and returns the head position, or returns ctx's
// error when it is done first. A relay loops: Changes, then Wait on the
// last position it handled.
func (s *Store) Wait(ctx context.Context, after Position) (Position, error) {
	for {
		s.mu.RLock()
		head, changed := Position(len(s.feed)), s.changed
		s.mu.RUnlock()
		if head > after {
			return head, nil
		}
		select {
		case <-ctx.Done():
			return head, fmt.Errorf("wait for changes after %d: %w", after, ctx.Err())
		case <-changed:
		}
	}
}
