// Package readmodels holds the Postgres read models of the example
// domains (tables in migrations/postgres), each a projections.Projection.
package readmodels

import (
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eventpipe/eventpipe/eventstore"
)

// touch queues the update of the row of e's aggregate in table (key
// column key) with set, which may use $3 (the event's time) and
// parameters from $4, moving its version and apply count. A missing row
// fails the batch: the creating event was never applied, which positions
// and gap repair rule out.
func touch(b *pgx.Batch, table, key string, e eventstore.Envelope, set string, args ...any) {
	b.Queue(`UPDATE `+table+` SET `+set+`, version = $2, apply_count = apply_count + 1
		WHERE `+key+` = $1`, append([]any{e.AggregateID, e.Sequence, e.OccurredAt}, args...)...).Exec(func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("%s: %s: no row (its creating event was never applied)", table, e)
		}
		return nil
	})
}

// unknownEvent is the error for an event type a read model does not
// apply: a *eventstore.ValidationError, permanent, so the event goes to
// the poison topic rather than being dropped silently.
func unknownEvent(e eventstore.Envelope) error {
	return fmt.Errorf("%s: %w", e, &eventstore.ValidationError{Field: "event_type",
		Reason: fmt.Sprintf("%q is not applied by this read model", e.EventType)})
}
