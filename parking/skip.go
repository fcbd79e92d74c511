package parking

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe/eventstore"
)

// ErrNotParked is wrapped by Skip when the aggregate has no parked event
// for the consumer.
var ErrNotParked = errors.New("parking: the aggregate has no parked event")

// SkipConfig says which parked event Skip releases, and on whose word.
type SkipConfig struct {
	// Consumer is the projection that parked the aggregate. Required.
	Consumer string
	// Aggregate is the parked aggregate (type and id). Required.
	Aggregate eventstore.Ref
	// Actor is who skips, and Reason why; both are recorded with the
	// skipped event. Required.
	Actor, Reason string
	// Advance records, in the transaction that releases the event, that
	// the consumer is past it, so that its next event of the aggregate
	// does not repair the gap with it (a Postgres read model: its
	// projection_positions row moves to the event's sequence). Required.
	Advance func(ctx context.Context, tx pgx.Tx, skipped eventstore.Envelope) error
}

// Validate reports the first missing field as an
// *eventstore.ValidationError.
func (c SkipConfig) Validate() error {
	switch {
	case c.Consumer == "":
		return &eventstore.ValidationError{Field: "Consumer", Reason: "empty"}
	case c.Aggregate.Type == "" || c.Aggregate.ID == "":
		return &eventstore.ValidationError{Field: "Aggregate", Reason: "want an aggregate type and id"}
	case c.Actor == "":
		return &eventstore.ValidationError{Field: "Actor", Reason: "empty: say who skips"}
	case c.Reason == "":
		return &eventstore.ValidationError{Field: "Reason", Reason: "empty: say why the event is skipped"}
	case c.Advance == nil:
		return &eventstore.ValidationError{Field: "Advance", Reason: "nil"}
	}
	return nil
}

// Skipped is a parked event that Skip released without applying it.
type Skipped struct {
	Event
	Actor, Reason string
	SkippedAt     time.Time
}

// Skip releases the aggregate's first parked event (its lowest parked
// sequence) without applying it: in one transaction, holding the
// aggregate's lock exclusively (as Reapply's release does), it copies the
// event to skipped_events (migrations/postgres 009) with cfg.Actor and
// cfg.Reason, deletes it from parked_events and calls cfg.Advance. The
// aggregate's later parked events stay parked: Reapply re-applies them (the
// consumer goes on parking the aggregate's new events until then). An
// aggregate with nothing parked is an error wrapping ErrNotParked.
func (s *Store) Skip(ctx context.Context, cfg SkipConfig) (Skipped, error) {
	if err := cfg.Validate(); err != nil {
		return Skipped{}, fmt.Errorf("parking: skip: %w", err)
	}
	out := Skipped{Actor: cfg.Actor, Reason: cfg.Reason}
	err := pgx.BeginFunc(ctx, s.cfg.DB, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, lockKey(cfg.Consumer, cfg.Aggregate)); err != nil {
			return err
		}
		var body string
		err := tx.QueryRow(ctx, `DELETE FROM parked_events WHERE (consumer, aggregate_type, aggregate_id, seq) =
				(SELECT consumer, aggregate_type, aggregate_id, min(seq) FROM parked_events
				 WHERE consumer = $1 AND aggregate_type = $2 AND aggregate_id = $3 GROUP BY 1, 2, 3)
			RETURNING envelope::text, reason, parked_at`,
			cfg.Consumer, cfg.Aggregate.Type, cfg.Aggregate.ID).Scan(&body, &out.Event.Reason, &out.ParkedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%s %s: %w", cfg.Consumer, cfg.Aggregate, ErrNotParked)
		}
		if err != nil {
			return err
		}
		out.Consumer = cfg.Consumer
		if out.Envelope, err = eventstore.Unmarshal([]byte(body)); err != nil {
			return err
		}
		e := out.Envelope
		if err := tx.QueryRow(ctx, `INSERT INTO skipped_events (consumer, aggregate_type, aggregate_id, seq, event_id, event_type, envelope, parked_reason, actor, reason)
			VALUES ($1, $2, $3, $4, $5, $6, $7::text::jsonb, $8, $9, $10)
			ON CONFLICT (consumer, aggregate_type, aggregate_id, seq) DO UPDATE SET actor = EXCLUDED.actor, reason = EXCLUDED.reason, skipped_at = now()
			RETURNING skipped_at`,
			cfg.Consumer, e.AggregateType, e.AggregateID, e.Sequence, e.EventID, e.EventType, body, out.Event.Reason, cfg.Actor, cfg.Reason).Scan(&out.SkippedAt); err != nil {
			return err
		}
		return cfg.Advance(ctx, tx, e)
	})
	if err != nil {
		return Skipped{}, fmt.Errorf("parking: %s: skip the first parked event of %s: %w", cfg.Consumer, cfg.Aggregate, err)
	}
	s.cfg.Logger.WarnContext(ctx, "parked event skipped", "consumer", cfg.Consumer, "aggregate", cfg.Aggregate.String(),
		"sequence", out.Envelope.Sequence, "event_type", out.Envelope.EventType, "event_id", out.Envelope.EventID, "actor", cfg.Actor, "reason", cfg.Reason)
	return out, nil
}
