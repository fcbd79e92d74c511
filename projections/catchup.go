package projections

import (
	"context"
	"fmt"

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
}

// EventTyper is implemented by projections that can be caught up from the
// event store: it names every event type the projection applies.
type EventTyper interface {
	EventTypes() []string
}

// HistoryPage returns one page of the stored events of eventType across
// all aggregates (in the event store's order) and the cursor of the next
// page, "" at the end. eventstore/dynamodb's ListByType provides it.
type HistoryPage func(ctx context.Context, eventType, cursor string) (events []eventstore.Envelope, next string, err error)

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
// the number of events seen.
func CatchUp(ctx context.Context, a Sink, history HistoryPage, progress func(seen int)) (int, error) {
	name := a.Name()
	types := a.EventTypes()
	if len(types) == 0 {
		return 0, fmt.Errorf("projections: %s does not name its event types; it cannot catch up from the store", name)
	}
	g, ctx := errgroup.WithContext(ctx)
	streams := make([]chan []eventstore.Envelope, len(types))
	for i, t := range types {
		pages := make(chan []eventstore.Envelope, 1)
		streams[i] = pages
		g.Go(func() error {
			defer close(pages)
			cursor := ""
			for {
				events, next, err := history(ctx, t, cursor)
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
					return nil
				}
				cursor = next
			}
		})
	}
	seen := 0
	g.Go(func() error {
		heads := make([][]eventstore.Envelope, len(streams))
		refill := func(i int) {
			if len(heads[i]) == 0 && streams[i] != nil {
				page, ok := <-streams[i]
				if !ok {
					streams[i] = nil
				}
				heads[i] = page
			}
		}
		batch := make([]eventstore.Envelope, 0, catchUpBatch)
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			if _, err := a.Apply(ctx, batch); err != nil {
				return err
			}
			seen += len(batch)
			batch = batch[:0]
			if progress != nil {
				progress(seen)
			}
			return nil
		}
		for {
			next := -1
			for i := range heads {
				refill(i)
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
	err := g.Wait()
	return seen, err
}
