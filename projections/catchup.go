package projections

import (
	"context"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/eventpipe/eventpipe/eventstore"
)

// Sink is what a Runner feeds and CatchUp fills: a read model that applies
// batches of events exactly once in effect and keeps its positions with
// its data. *Applier is the Postgres one; projections/elastic has the
// Elasticsearch one.
type Sink interface {
	// Name identifies the read model: its positions, its consumer group.
	Name() string
	// AggregateTypes are the aggregate types whose events it reads.
	AggregateTypes() []string
	// EventTypes are the event types it applies (for catching up from the
	// store); nil when it cannot catch up.
	EventTypes() []string
	// Apply applies events (any aggregates, any order, duplicates
	// allowed), skipping what was applied and repairing gaps from the
	// store.
	Apply(ctx context.Context, events []eventstore.Envelope) (Outcome, error)
	// HasPositions reports whether it has applied anything yet.
	HasPositions(ctx context.Context) (bool, error)
	// CatchUpState returns how far its catch-up from the event store has
	// come: the zero CatchUpState when none ever began.
	CatchUpState(ctx context.Context) (CatchUpState, error)
	// ApplyCatchUp applies events as Apply does and records st as the
	// catch-up state: in the same transaction as the events' effects, or,
	// for a read model whose writes are idempotent (a search model's
	// external versions), once they are durable. Either way the recorded
	// state never claims an event that is not applied. With no events it
	// records st alone.
	ApplyCatchUp(ctx context.Context, events []eventstore.Envelope, st CatchUpState) (Outcome, error)
}

// CatchUpState is how far a read model's catch-up from the event store
// has come, kept durably beside the read model (ResumeCatchUp).
type CatchUpState struct {
	// Started is when the catch-up first began; zero: never.
	Started time.Time
	// After is the id of the last event, in event-id order, of the last
	// batch applied: every stored event of the read model's types up to
	// it is applied, and a resumed catch-up reads only later ones.
	After string
	// Events counts the events the catch-up applied so far.
	Events int64
	// Done is when it caught up and handed over to the live topics; zero
	// while it has not.
	Done time.Time
	// Types are the event types the catch-up covers: once it is done, the
	// read model holds the history of exactly these. Empty in a state
	// recorded before types were: the read model's types at the time.
	Types []string
	// Skip are the types of Types an earlier, finished catch-up already
	// covered: a catch-up of types the read model gained reads only the
	// others (Types minus Skip), while the read model stays live. Empty
	// for a read model's first catch-up.
	Skip []string
	// Version is the version of the read model's definition (VersionOf)
	// that built it: the version whose catch-up this is, and, once done,
	// the version the rows are at until a rebuild swaps in another. 0 in
	// a state recorded before versions were: version 1.
	Version int
}

// ModelVersion is st.Version, or 1 for a state that names none.
func (st CatchUpState) ModelVersion() int { return max(st.Version, 1) }

// Advances reports whether recording st over prev moves the catch-up
// forward, never back: a catch-up that began later replaces an earlier
// one, and within one catch-up (same Started) the cursor and the event
// count never go back nor does a finished catch-up become unfinished.
// Two replicas of a read model that both run its catch-up record only
// what advances (both Sinks check it where they write), so the cursor
// cannot move back whichever of them writes last.
func (st CatchUpState) Advances(prev CatchUpState) bool {
	switch {
	case prev.Started.IsZero() || st.Started.After(prev.Started):
		return true
	case !st.Started.Equal(prev.Started):
		return false
	}
	return st.After >= prev.After && st.Events >= prev.Events && (prev.Done.IsZero() || !st.Done.IsZero())
}

// Versioned is a read or search model that declares the version of its
// definition. Bump it when a change of its Apply (a fixed fold, a new
// column) makes rows built before wrong: a model whose rows were built by
// another version is rebuilt from the event store beside the live one
// (see RunnerConfig.Rebuild), or by `eventpipe replay`.
type Versioned interface {
	Version() int
}

// VersionOf is p's declared version (Versioned), 1 when it declares none
// or one below 1.
func VersionOf(p any) int {
	if v, ok := p.(Versioned); ok {
		return max(v.Version(), 1)
	}
	return 1
}

// Reading returns the event types a catch-up in state st reads from the
// store: Types minus Skip, or types (the read model's) when st names none.
func (st CatchUpState) Reading(types []string) []string {
	if len(st.Types) > 0 {
		types = st.Types
	}
	var out []string
	for _, t := range types {
		if !slices.Contains(st.Skip, t) {
			out = append(out, t)
		}
	}
	return out
}

// Extending reports whether st is an unfinished catch-up of types the
// read model gained after its first catch-up (Skip is set).
func (st CatchUpState) Extending() bool { return st.Done.IsZero() && len(st.Skip) > 0 }

// EventTyper is implemented by projections that can be caught up from the
// event store: it names every event type the projection applies.
type EventTyper interface {
	EventTypes() []string
}

// HistoryPage returns one page of the stored events of eventType across
// all aggregates (in the event store's order, which is event-id order),
// starting after the event id after ("" from the first) or at cursor, a
// previous page's next ("" for the first page), and the cursor of the
// next page, "" at the end. eventstore/dynamodb's ListByType provides it.
type HistoryPage func(ctx context.Context, eventType, after, cursor string) (events []eventstore.Envelope, next string, err error)

// catchUpBatch is how many events one catch-up transaction applies.
const catchUpBatch = 1000

// CatchUp applies the stored history of every event type the projection
// names through the Applier. Each type is paged by a goroutine of its own
// (one page ahead) and the streams are merged by event id (ULID, so
// roughly the order the events were written in) into transactions of up
// to 1,000 events. Merging keeps gap repairs rare; where an aggregate's
// event still comes before an earlier one (ULIDs from different writers),
// the Applier repairs the earlier ones from the store before applying the
// later one, and skips them when they arrive. For the same reason the
// live consumer may run at the same time: the positions decide, so the
// hand-over has no gap and no double effect. progress, when set, is
// called after each transaction with the events seen so far. It returns
// the number of events seen. CatchUp keeps no state: a rebuild (Replay)
// uses it; a new read model's Runner uses ResumeCatchUp.
func CatchUp(ctx context.Context, a Sink, history HistoryPage, progress func(seen int)) (int, error) {
	seen := 0
	err := catchUp(ctx, a, history, a.EventTypes(), "", func(ctx context.Context, batch []eventstore.Envelope) error {
		if _, err := a.Apply(ctx, batch); err != nil {
			return err
		}
		seen += len(batch)
		if progress != nil {
			progress(seen)
		}
		return nil
	})
	return seen, err
}

// ResumeCatchUp is CatchUp with a durable cursor: it reads the Sink's
// CatchUpState, starts a new catch-up (recording its start) or resumes
// one after its last applied batch, records each batch's last event id
// with the batch (ApplyCatchUp), and marks the state done at the end. A
// state already done is returned as it is. Killed at any point, the next
// call goes on from the last committed batch, whatever the live topics
// still hold. progress, when set, is called after each batch.
func ResumeCatchUp(ctx context.Context, a Sink, history HistoryPage, progress func(CatchUpState)) (CatchUpState, error) {
	st, err := a.CatchUpState(ctx)
	if err != nil {
		return st, err
	}
	if !st.Done.IsZero() {
		return st, nil
	}
	if st.Started.IsZero() {
		st.Started = time.Now().UTC().Truncate(time.Microsecond)
		st.Types = a.EventTypes()
		st.Version = VersionOf(a)
		if _, err := a.ApplyCatchUp(ctx, nil, st); err != nil {
			return st, err
		}
		// Another replica may have begun the same catch-up first: go on
		// with whichever start the Sink kept.
		if st, err = a.CatchUpState(ctx); err != nil {
			return st, err
		}
		if !st.Done.IsZero() {
			return st, nil
		}
	}
	err = catchUp(ctx, a, history, st.Reading(a.EventTypes()), st.After, func(ctx context.Context, batch []eventstore.Envelope) error {
		next := st
		next.After = batch[len(batch)-1].EventID
		next.Events += int64(len(batch))
		if _, err := a.ApplyCatchUp(ctx, batch, next); err != nil {
			return err
		}
		st = next
		if progress != nil {
			progress(st)
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	done := st
	done.Done = time.Now().UTC().Truncate(time.Microsecond)
	if _, err := a.ApplyCatchUp(ctx, nil, done); err != nil {
		return st, err
	}
	return done, nil
}

// catchUp merges the history of types (some of a's event types) after
// the event id after by event id and hands apply batches of up to
// catchUpBatch events, each ending with the greatest event id read so far.
func catchUp(ctx context.Context, a Sink, history HistoryPage, types []string, after string, apply func(context.Context, []eventstore.Envelope) error) error {
	name := a.Name()
	if len(types) == 0 {
		return fmt.Errorf("projections: %s does not name its event types; it cannot catch up from the store", name)
	}
	g, ctx := errgroup.WithContext(ctx)
	streams := make([]chan []eventstore.Envelope, len(types))
	for i, t := range types {
		pages := make(chan []eventstore.Envelope, 1)
		streams[i] = pages
		g.Go(func() error {
			// pages is closed only at the end of t's history: a stream
			// that failed or was cancelled must not look ended, or the
			// merge would go on without it and record a cursor past its
			// unread events.
			cursor := ""
			for {
				events, next, err := history(ctx, t, after, cursor)
				if err != nil {
					return fmt.Errorf("projections: %s: catch up %s: %w", name, t, err)
				}
				if len(events) > 0 {
					select {
					case pages <- events:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				if next == "" {
					close(pages)
					return nil
				}
				cursor = next
			}
		})
	}
	g.Go(func() error {
		heads := make([][]eventstore.Envelope, len(streams))
		refill := func(i int) error {
			if len(heads[i]) == 0 && streams[i] != nil {
				select {
				case page, ok := <-streams[i]:
					if !ok {
						streams[i] = nil
					}
					heads[i] = page
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		}
		batch := make([]eventstore.Envelope, 0, catchUpBatch)
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			if err := apply(ctx, batch); err != nil {
				return err
			}
			batch = batch[:0]
			return nil
		}
		for {
			next := -1
			for i := range heads {
				if err := refill(i); err != nil {
					return err
				}
				if len(heads[i]) > 0 && (next < 0 || heads[i][0].EventID < heads[next][0].EventID) {
					next = i
				}
			}
			if next < 0 {
				return flush()
			}
			batch = append(batch, heads[next][0])
			heads[next] = heads[next][1:]
			if len(batch) == catchUpBatch {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	})
	return g.Wait()
}
