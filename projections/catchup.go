package projections

import (
	"context"
	"fmt"

	"github.com/eventpipe/eventpipe/eventstore"
)

// EventTyper is implemented by projections that can be caught up from the
// event store: it names every event type the projection applies.
type EventTyper interface {
	EventTypes() []string
}

// HistoryPage returns one page of the stored events of eventType across
// all aggregates (in the event store's order) and the cursor of the next
// page, "" at the end. eventstore/dynamodb's ListByType (AP6) provides it.
type HistoryPage func(ctx context.Context, eventType, cursor string) (events []eventstore.Envelope, next string, err error)

// CatchUp applies the stored history of every event type the projection
// names, page by page, through the Applier. Pages of different types
// arrive in any order relative to each other; that is safe because the
// Applier repairs any earlier sequence of an aggregate from the store
// before applying a later one, and skips what the position already holds.
// For the same reason the live consumer may run at the same time: the
// positions decide, so the hand-over has no gap and no double effect.
// progress, when set, is called after each page with the events seen so
// far. It returns the number of events seen.
func CatchUp(ctx context.Context, a *Applier, history HistoryPage, progress func(seen int)) (int, error) {
	typer, ok := a.cfg.Projection.(EventTyper)
	if !ok {
		return 0, fmt.Errorf("projections: %s does not name its event types; it cannot catch up from the store", a.cfg.Projection.Name())
	}
	seen := 0
	for _, t := range typer.EventTypes() {
		cursor := ""
		for {
			events, next, err := history(ctx, t, cursor)
			if err != nil {
				return seen, fmt.Errorf("projections: %s: catch up %s: %w", a.cfg.Projection.Name(), t, err)
			}
			if _, err := a.Apply(ctx, events); err != nil {
				return seen, err
			}
			seen += len(events)
			if progress != nil {
				progress(seen)
			}
			if next == "" {
				break
			}
			cursor = next
		}
	}
	return seen, nil
}

// HasPositions reports whether the projection has applied anything yet.
func (a *Applier) HasPositions(ctx context.Context) (bool, error) {
	var exists bool
	err := a.cfg.DB.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM projection_positions WHERE projection = $1)`, a.cfg.Projection.Name()).Scan(&exists)
	if err != nil {
		return false, fmt.Errorf("projections: %s: positions: %w", a.cfg.Projection.Name(), err)
	}
	return exists, nil
}
