// Package parking keeps the events a consumer parked, in Postgres: a
// sequenced dead-letter queue. When an event fails permanently (see
// eventstore.IsPermanent) the consumer parks it, and from then on every
// later event of the same aggregate is parked behind it instead of being
// applied, so that the aggregate's events are never applied out of order,
// while the consumer's other aggregates keep flowing. Reapply re-applies a
// parked aggregate's events in sequence order, once the cause is fixed,
// and unparks the aggregate when all of them applied.
//
// The events live in the table parked_events (migrations/postgres), keyed
// by (consumer, aggregate type, aggregate id, sequence): parking an event
// that is already parked (a redelivery) changes nothing. An aggregate is
// parked for a consumer exactly while it has rows there.
//
// Parking and unparking one aggregate are serialised by a Postgres
// advisory lock per (consumer, aggregate), which consumers take shared
// (ParkBehind, Park) and Reapply takes exclusively to unpark: an event
// that a consumer found parked-behind is either parked before the re-apply
// unparks (and the re-apply drains it too) or found not parked after it
// (and applied by the consumer).
package parking

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe/eventstore"
)

// Config configures a Store.
type Config struct {
	// DB holds the parked_events table; its search_path picks the schema.
	// Required.
	DB *pgxpool.Pool
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first missing field.
func (c Config) Validate() error {
	if c.DB == nil {
		return fmt.Errorf("parking: Config: %w", &eventstore.ValidationError{Field: "DB", Reason: "is nil"})
	}
	return nil
}

// Store reads and writes parked events. It is safe for concurrent use,
// also by several processes on the same database.
type Store struct {
	cfg Config
}

// New validates cfg and returns a Store.
func New(cfg Config) (*Store, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Store{cfg: cfg}, nil
}

// ErrNoTable is returned by Ready and Counts when the database's schema
// has no parked_events table: `eventpipe migrate` (eventpipe.Migrate)
// creates it.
var ErrNoTable = errors.New("parking: no parked_events table in the database's schema: run `eventpipe migrate` (migrations/postgres 004)")

// Ready reports whether the parked_events table exists, with ErrNoTable,
// which says to migrate, when it does not: a consumer checks it once
// before it consumes, rather than failing every batch.
func (s *Store) Ready(ctx context.Context) error {
	var exists bool
	if err := s.cfg.DB.QueryRow(ctx, `SELECT to_regclass('parked_events') IS NOT NULL`).Scan(&exists); err != nil {
		return fmt.Errorf("parking: %w", err)
	}
	if !exists {
		return ErrNoTable
	}
	return nil
}

// Counts is how much one consumer has parked.
type Counts struct {
	// Events is how many events are parked; Aggregates how many
	// aggregates they belong to, each of them parked for the consumer.
	Events, Aggregates int64
}

// Counts returns, by consumer, how many events are parked and for how
// many aggregates, in one query; a consumer with nothing parked is
// absent. It returns ErrNoTable when the table does not exist.
func (s *Store) Counts(ctx context.Context) (map[string]Counts, error) {
	rows, err := s.cfg.DB.Query(ctx, `SELECT consumer, count(*), count(DISTINCT (aggregate_type, aggregate_id))
		FROM parked_events GROUP BY consumer`)
	if err != nil {
		return nil, countsError(err)
	}
	defer rows.Close()
	out := map[string]Counts{}
	for rows.Next() {
		var (
			consumer string
			c        Counts
		)
		if err := rows.Scan(&consumer, &c.Events, &c.Aggregates); err != nil {
			return nil, countsError(err)
		}
		out[consumer] = c
	}
	if err := rows.Err(); err != nil {
		return nil, countsError(err)
	}
	return out, nil
}

// undefinedTable is Postgres' SQLSTATE for a relation that does not
// exist.
const undefinedTable = "42P01"

// countsError wraps an error of Counts; a missing table is ErrNoTable.
func countsError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == undefinedTable {
		return ErrNoTable
	}
	return fmt.Errorf("parking: counts: %w", err)
}

// Event is a parked event.
type Event struct {
	// Consumer parked it (a projection's name).
	Consumer string
	// Envelope is the event as it was delivered.
	Envelope eventstore.Envelope
	// Reason is why: the error of the event that failed, or, for an event
	// parked behind it, which sequence of the aggregate it waits for.
	Reason   string
	ParkedAt time.Time
}

// BehindReason is the reason recorded for an event parked because an
// earlier event of its aggregate (sequence first) is parked.
func BehindReason(first int64) string {
	return fmt.Sprintf("parked behind sequence %d of the same aggregate", first)
}

// lockKey names the advisory lock of one parked aggregate.
func lockKey(consumer string, ref eventstore.Ref) string {
	return "eventpipe.parking/" + consumer + "/" + ref.Type + "/" + ref.ID
}

// Parked returns, for those of refs that are parked for consumer, the
// lowest parked sequence: the consumer parks an event of such an
// aggregate at or above it (with ParkBehind) and may apply one below it
// (it precedes the parked ones). It takes no lock: only the consumer
// itself parks an aggregate, so an aggregate it finds unparked stays so,
// and ParkBehind checks again under the lock.
func (s *Store) Parked(ctx context.Context, consumer string, refs []eventstore.Ref) (map[eventstore.Ref]int64, error) {
	first := map[eventstore.Ref]int64{}
	if len(refs) == 0 {
		return first, nil
	}
	types, ids := make([]string, len(refs)), make([]string, len(refs))
	for i, ref := range refs {
		types[i], ids[i] = ref.Type, ref.ID
	}
	rows, err := s.cfg.DB.Query(ctx, `SELECT aggregate_type, aggregate_id, min(seq) FROM parked_events
		WHERE consumer = $1 AND (aggregate_type, aggregate_id) IN (SELECT * FROM unnest($2::text[], $3::text[]))
		GROUP BY aggregate_type, aggregate_id`, consumer, types, ids)
	if err != nil {
		return nil, fmt.Errorf("parking: %s: parked aggregates: %w", consumer, err)
	}
	defer rows.Close()
	for rows.Next() {
		var ref eventstore.Ref
		var seq int64
		if err := rows.Scan(&ref.Type, &ref.ID, &seq); err != nil {
			return nil, fmt.Errorf("parking: %s: parked aggregates: %w", consumer, err)
		}
		first[ref] = seq
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("parking: %s: parked aggregates: %w", consumer, err)
	}
	return first, nil
}

// Park parks e, which failed permanently with reason, and so parks its
// aggregate for consumer. It is durable when Park returns nil. An event
// already parked keeps its first reason.
func (s *Store) Park(ctx context.Context, consumer string, e eventstore.Envelope, reason string) error {
	body, err := eventstore.Marshal(e)
	if err != nil {
		return fmt.Errorf("parking: %s: park %s: %w", consumer, e, err)
	}
	inserted := false
	err = pgx.BeginFunc(ctx, s.cfg.DB, func(tx pgx.Tx) error {
		var b pgx.Batch
		b.Queue(`SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0))`, lockKey(consumer, e.Aggregate()))
		b.Queue(`INSERT INTO parked_events (consumer, aggregate_type, aggregate_id, seq, event_id, event_type, envelope, reason)
			VALUES ($1, $2, $3, $4, $5, $6, $7::text::jsonb, $8) ON CONFLICT DO NOTHING`,
			consumer, e.AggregateType, e.AggregateID, e.Sequence, e.EventID, e.EventType, string(body), reason).Exec(func(tag pgconn.CommandTag) error {
			inserted = tag.RowsAffected() == 1
			return nil
		})
		return tx.SendBatch(ctx, &b).Close()
	})
	if err != nil {
		return fmt.Errorf("parking: %s: park %s: %w", consumer, e, err)
	}
	if !inserted {
		return nil // parked before: a redelivery
	}
	s.cfg.Logger.WarnContext(ctx, "event parked", "consumer", consumer, "aggregate", e.Aggregate().String(),
		"sequence", e.Sequence, "event_type", e.EventType, "event_id", e.EventID, "reason", reason)
	return nil
}

// ParkBehind parks those of events whose aggregate is parked for consumer
// at or below their sequence (see Parked) and reports, per event, whether
// it is parked now (newly or already). The others are the caller's to
// apply: their aggregate was unparked meanwhile, or they precede its
// parked events. It is durable when ParkBehind returns nil.
func (s *Store) ParkBehind(ctx context.Context, consumer string, events []eventstore.Envelope) ([]bool, error) {
	parked := make([]bool, len(events))
	if len(events) == 0 {
		return parked, nil
	}
	fresh := make([]bool, len(events)) // parked now, not before
	var (
		keys                        []string
		seen                        = map[eventstore.Ref]bool{}
		types, ids, eids, ets, envs = make([]string, len(events)), make([]string, len(events)), make([]string, len(events)), make([]string, len(events)), make([]string, len(events))
		seqs                        = make([]int64, len(events))
	)
	for i, e := range events {
		body, err := eventstore.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("parking: %s: park %s: %w", consumer, e, err)
		}
		types[i], ids[i], seqs[i], eids[i], ets[i], envs[i] = e.AggregateType, e.AggregateID, e.Sequence, e.EventID, e.EventType, string(body)
		if ref := e.Aggregate(); !seen[ref] {
			seen[ref] = true
			keys = append(keys, lockKey(consumer, ref))
		}
	}
	sort.Strings(keys) // a stable lock order: no deadlock between two consumers
	err := pgx.BeginFunc(ctx, s.cfg.DB, func(tx pgx.Tx) error {
		var b pgx.Batch
		b.Queue(`SELECT count(pg_advisory_xact_lock_shared(hashtextextended(k, 0))) FROM unnest($1::text[]) WITH ORDINALITY AS l (k, n)`, keys)
		// A statement of its own, so that its snapshot follows the locks.
		b.Queue(`WITH c AS (
				SELECT c.*, (SELECT min(p.seq) FROM parked_events p
					WHERE p.consumer = $1 AND p.aggregate_type = c.t AND p.aggregate_id = c.i) AS first_seq
				FROM unnest($2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[]) WITH ORDINALITY AS c (t, i, s, id, et, env, n)
			), ins AS (
				INSERT INTO parked_events (consumer, aggregate_type, aggregate_id, seq, event_id, event_type, envelope, reason)
				SELECT $1, t, i, s, id, et, env::jsonb, 'parked behind sequence ' || first_seq || ' of the same aggregate'
				FROM c WHERE first_seq <= s
				ON CONFLICT DO NOTHING
				RETURNING aggregate_type AS t, aggregate_id AS i, seq AS s
			)
			SELECT c.n, ins.s IS NOT NULL FROM c LEFT JOIN ins USING (t, i, s) WHERE c.first_seq <= c.s`,
			consumer, types, ids, seqs, eids, ets, envs).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var n int64
				var inserted bool
				if err := rows.Scan(&n, &inserted); err != nil {
					return err
				}
				parked[n-1], fresh[n-1] = true, inserted
			}
			return rows.Err()
		})
		return tx.SendBatch(ctx, &b).Close()
	})
	if err != nil {
		return nil, fmt.Errorf("parking: %s: park %d events behind their aggregates: %w", consumer, len(events), err)
	}
	for i, e := range events {
		if fresh[i] {
			s.cfg.Logger.InfoContext(ctx, "event parked behind its aggregate", "consumer", consumer, "aggregate", e.Aggregate().String(),
				"sequence", e.Sequence, "event_type", e.EventType, "event_id", e.EventID)
		}
	}
	return parked, nil
}

// Filter selects parked events. Zero fields select everything.
type Filter struct {
	// Consumer, when set, selects one consumer's events.
	Consumer string
	// Aggregate, when its Type is set, selects one aggregate's (its ID
	// too when set, else every aggregate of that type).
	Aggregate eventstore.Ref
	// Limit is the most events returned (0: all).
	Limit int
}

// List returns the parked events f selects, by consumer, aggregate and
// sequence.
func (s *Store) List(ctx context.Context, f Filter) ([]Event, error) {
	q := `SELECT consumer, envelope::text, reason, parked_at FROM parked_events
		WHERE ($1 = '' OR consumer = $1) AND ($2 = '' OR aggregate_type = $2) AND ($3 = '' OR aggregate_id = $3)
		ORDER BY consumer, aggregate_type, aggregate_id, seq`
	args := []any{f.Consumer, f.Aggregate.Type, f.Aggregate.ID}
	if f.Limit > 0 {
		q += ` LIMIT $4`
		args = append(args, f.Limit)
	}
	rows, err := s.cfg.DB.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("parking: list: %w", err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var (
			ev   Event
			body string
		)
		if err := rows.Scan(&ev.Consumer, &body, &ev.Reason, &ev.ParkedAt); err != nil {
			return nil, fmt.Errorf("parking: list: %w", err)
		}
		if ev.Envelope, err = eventstore.Unmarshal([]byte(body)); err != nil {
			return nil, fmt.Errorf("parking: list: %s: %w", ev.Consumer, err)
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("parking: list: %w", err)
	}
	return out, nil
}

// Aggregates returns the aggregates parked for consumer, oldest parked
// first (f.Consumer is required; f.Aggregate narrows as in List).
func (s *Store) Aggregates(ctx context.Context, f Filter) ([]eventstore.Ref, error) {
	if f.Consumer == "" {
		return nil, errors.New("parking: aggregates: Filter.Consumer is empty")
	}
	rows, err := s.cfg.DB.Query(ctx, `SELECT aggregate_type, aggregate_id FROM parked_events
		WHERE consumer = $1 AND ($2 = '' OR aggregate_type = $2) AND ($3 = '' OR aggregate_id = $3)
		GROUP BY aggregate_type, aggregate_id ORDER BY min(parked_at), aggregate_type, aggregate_id`,
		f.Consumer, f.Aggregate.Type, f.Aggregate.ID)
	if err != nil {
		return nil, fmt.Errorf("parking: %s: parked aggregates: %w", f.Consumer, err)
	}
	refs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (eventstore.Ref, error) {
		var ref eventstore.Ref
		err := row.Scan(&ref.Type, &ref.ID)
		return ref, err
	})
	if err != nil {
		return nil, fmt.Errorf("parking: %s: parked aggregates: %w", f.Consumer, err)
	}
	return refs, nil
}
