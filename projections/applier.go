package projections

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe/eventstore"
)

// Projection builds one read model. Apply is called once per event (a
// BatchProjection gets the transaction's events at once instead), in
// sequence order per aggregate, and queues the event's statements on b;
// the Applier sends them in one round trip, in the transaction that also
// moves the projection's positions. Statements run in queue order, so a
// later one sees an earlier one's writes. Apply must not write any other
// way; it returns an error only for what it can tell without the
// database (a permanent one, see eventstore.IsPermanent, for an event it
// can never apply), and checks results with the QueuedQuery callbacks.
type Projection interface {
	// Name identifies the projection: its positions, its consumer group.
	Name() string
	// AggregateTypes are the aggregate types whose events it reads.
	AggregateTypes() []string
	// Apply queues the statements that write the effect of e.
	Apply(ctx context.Context, b *pgx.Batch, e eventstore.Envelope) error
}

// BatchProjection is a Projection that takes a transaction's events at
// once, to write what they add up to rather than one change per event (a
// roll-up: one statement per transaction). For such a projection the
// Applier calls ApplyBatch once per transaction instead of Apply per
// event, with every event it applies: duplicates skipped and gaps
// repaired, aggregate by aggregate in the Applier's order, each
// aggregate's events in sequence order; never with none. Its statements
// are queued on b before the positions, under the rules of Apply. Every
// path through the Applier uses it (the Runner, CatchUp, Replay); when a
// Runner's batch fails, each event is retried alone, so ApplyBatch then
// gets one event and a permanent error poisons that event only. Apply
// must still work on its own, for callers outside the Applier.
type BatchProjection interface {
	Projection
	// ApplyBatch queues the statements that write the effect of events.
	ApplyBatch(ctx context.Context, b *pgx.Batch, events []eventstore.Envelope) error
}

// ApplierConfig configures an Applier.
type ApplierConfig struct {
	// DB is the read model's database. Required. Its search_path picks
	// the schema the read model's tables and positions live in.
	DB *pgxpool.Pool
	// Store is the event log gaps are repaired from. Required.
	Store eventstore.Store
	// Projection is what is applied. Required.
	Projection Projection
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Validate reports the first missing field.
func (c ApplierConfig) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("projections: ApplierConfig: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch {
	case c.DB == nil:
		return bad("DB", "is nil")
	case c.Store == nil:
		return bad("Store", "is nil")
	case c.Projection == nil:
		return bad("Projection", "is nil")
	case c.Projection.Name() == "":
		return bad("Projection", "has no name")
	}
	return nil
}

// Applier applies events to a projection exactly once in effect.
type Applier struct {
	cfg   ApplierConfig
	wants map[string]bool
}

// NewApplier validates cfg and returns an Applier.
func NewApplier(cfg ApplierConfig) (*Applier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	wants := map[string]bool{}
	for _, t := range cfg.Projection.AggregateTypes() {
		wants[t] = true
	}
	return &Applier{cfg: cfg, wants: wants}, nil
}

// Projection returns the projection the Applier applies.
func (a *Applier) Projection() Projection { return a.cfg.Projection }

// Name implements Sink: the projection's name.
func (a *Applier) Name() string { return a.cfg.Projection.Name() }

// AggregateTypes implements Sink: the projection's aggregate types.
func (a *Applier) AggregateTypes() []string { return a.cfg.Projection.AggregateTypes() }

// EventTypes implements Sink: the projection's event types when it is an
// EventTyper, else nil.
func (a *Applier) EventTypes() []string {
	if t, ok := a.cfg.Projection.(EventTyper); ok {
		return t.EventTypes()
	}
	return nil
}

// Outcome counts what one Apply call did.
type Outcome struct {
	Applied   int // events applied as delivered
	Repaired  int // missing events read from the store and applied
	Skipped   int // duplicates (at or below the position) and unwanted types
	Positions map[eventstore.Ref]int64
}

// Apply applies events (any aggregates, any order, duplicates allowed)
// in one transaction: per aggregate it locks the position, skips what is
// at or below it, repairs gaps from the store, applies the rest in
// sequence order and writes the new position. Nothing is written when it
// fails. The transaction holds the projection's lock shared, so a
// replay's swap (which takes it exclusively) never interleaves with it.
//
// The transaction takes two round trips to Postgres: one pipeline opens
// it, takes the locks and reads the positions; the other writes the
// events' effects and the positions and commits.
func (a *Applier) Apply(ctx context.Context, events []eventstore.Envelope) (Outcome, error) {
	name := a.cfg.Projection.Name()
	begin := func(b *pgx.Batch) {
		b.Queue(`BEGIN`)
		b.Queue(`SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0))`, projectionLockKey(name))
	}
	commit := func(b *pgx.Batch) { b.Queue(`COMMIT`) }
	return a.applyConn(ctx, events, begin, commit)
}

// applyConn runs apply on a connection of the pool, rolling back what a
// failure left open.
func (a *Applier) applyConn(ctx context.Context, events []eventstore.Envelope, begin, commit func(*pgx.Batch)) (Outcome, error) {
	name := a.cfg.Projection.Name()
	conn, err := a.cfg.DB.Acquire(ctx)
	if err != nil {
		return Outcome{}, fmt.Errorf("projections: %s: acquire a connection: %w", name, err)
	}
	defer conn.Release() // the pool drops a connection left in a transaction
	out, err := a.apply(ctx, conn, events, begin, commit)
	if err != nil {
		if conn.Conn().PgConn().TxStatus() != 'I' {
			rollbackCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_, _ = conn.Exec(rollbackCtx, `ROLLBACK`)
		}
		return Outcome{}, err
	}
	return out, nil
}

// projectionLockKey is hashed into the advisory lock that live appliers
// hold shared and a replay's swap holds exclusively.
func projectionLockKey(name string) string { return "eventpipe.projection/" + name }

// batchSender sends a pipeline of statements: a connection or a
// transaction.
type batchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// applyTx is Apply inside tx, whose search_path picks the tables.
func (a *Applier) applyTx(ctx context.Context, tx pgx.Tx, events []eventstore.Envelope) (Outcome, error) {
	return a.apply(ctx, tx, events, nil, nil)
}

// apply applies events in two pipelines on conn: the first (after what
// before queues, when set) locks the aggregates' positions and reads
// them; the second holds the projection's statements and the new
// positions, then what after queues. With only duplicates or unwanted
// events the second pipeline holds only what after queues.
func (a *Applier) apply(ctx context.Context, conn batchSender, events []eventstore.Envelope, before, after func(*pgx.Batch)) (Outcome, error) {
	out := Outcome{Positions: map[eventstore.Ref]int64{}}
	refs, byAgg, unwanted := ByAggregate(events, a.wants)
	out.Skipped = unwanted
	name := a.cfg.Projection.Name()
	var b pgx.Batch
	if before != nil {
		before(&b)
	}
	positions := lockPositions(&b, name, refs)
	if b.Len() > 0 {
		if err := conn.SendBatch(ctx, &b).Close(); err != nil {
			return Outcome{}, fmt.Errorf("projections: %s: lock positions of %d aggregates: %w", name, len(refs), err)
		}
	}
	b = pgx.Batch{}
	var (
		posTypes, posIDs []string
		posSeqs          []int64
		batched          []eventstore.Envelope
	)
	batcher, _ := a.cfg.Projection.(BatchProjection)
	for _, ref := range refs {
		p, err := Sequence(ctx, a.cfg.Store, name, ref, positions[ref], byAgg[ref])
		if err != nil {
			return Outcome{}, err
		}
		if p.Repaired > 0 {
			a.cfg.Logger.WarnContext(ctx, "repaired a gap from the event store", "projection", name, "aggregate", ref.String(), "events", p.Repaired)
		}
		out.Skipped += p.Skipped
		out.Repaired += p.Repaired
		out.Applied += len(p.Apply) - p.Repaired
		if batcher != nil {
			batched = append(batched, p.Apply...)
		} else {
			for _, e := range p.Apply {
				if err := a.cfg.Projection.Apply(ctx, &b, e); err != nil {
					return Outcome{}, fmt.Errorf("projections: %s: apply %s: %w", name, e, err)
				}
			}
		}
		if n := len(p.Apply); n > 0 {
			pos := p.Apply[n-1].Sequence
			posTypes, posIDs, posSeqs = append(posTypes, ref.Type), append(posIDs, ref.ID), append(posSeqs, pos)
			out.Positions[ref] = pos
		}
	}
	if len(posSeqs) > 0 {
		if batcher != nil {
			if err := batcher.ApplyBatch(ctx, &b, batched); err != nil {
				return Outcome{}, fmt.Errorf("projections: %s: apply a batch of %d events: %w", name, len(batched), err)
			}
		}
		b.Queue(`INSERT INTO projection_positions (projection, aggregate_type, aggregate_id, seq)
		SELECT $1, t, i, s FROM unnest($2::text[], $3::text[], $4::bigint[]) AS p (t, i, s)
		ON CONFLICT (projection, aggregate_type, aggregate_id) DO UPDATE SET seq = EXCLUDED.seq, updated_at = now()`,
			name, posTypes, posIDs, posSeqs)
	}
	if after != nil {
		after(&b)
	}
	if b.Len() > 0 {
		if err := conn.SendBatch(ctx, &b).Close(); err != nil {
			return Outcome{}, fmt.Errorf("projections: %s: apply %d events: %w", name, out.Applied+out.Repaired, err)
		}
	}
	return out, nil
}

// lockPositions queues on b a transaction-scoped advisory lock on
// (projection, aggregate) for every ref, in a stable order so that two
// appliers of overlapping batches cannot deadlock, and then the read of
// their positions, and returns the map that read fills when b has been
// sent (a ref without a position stays out: 0). Concurrent appliers of
// the same aggregate, new or not, take turns. (A hash collision only
// makes two aggregates take turns too.) The read is a statement of its
// own so that its snapshot follows the locks.
func lockPositions(b *pgx.Batch, name string, refs []eventstore.Ref) map[eventstore.Ref]int64 {
	positions := make(map[eventstore.Ref]int64, len(refs))
	if len(refs) == 0 {
		return positions
	}
	keys := make([]string, len(refs))
	types := make([]string, len(refs))
	ids := make([]string, len(refs))
	for i, ref := range refs {
		keys[i] = name + "/" + ref.Type + "/" + ref.ID
		types[i], ids[i] = ref.Type, ref.ID
	}
	sort.Strings(keys)
	b.Queue(`SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) FROM unnest($1::text[]) WITH ORDINALITY AS l (k, n)`, keys)
	b.Queue(`SELECT aggregate_type, aggregate_id, seq FROM projection_positions
		WHERE projection = $1 AND (aggregate_type, aggregate_id) IN (SELECT * FROM unnest($2::text[], $3::text[]))`,
		name, types, ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var ref eventstore.Ref
			var seq int64
			if err := rows.Scan(&ref.Type, &ref.ID, &seq); err != nil {
				return err
			}
			positions[ref] = seq
		}
		return rows.Err()
	})
	return positions
}

// CatchUpState implements Sink: the projection's row of
// projection_catchup (migrations 007 and 011), or the zero state.
func (a *Applier) CatchUpState(ctx context.Context) (CatchUpState, error) {
	st, err := readCatchUpState(ctx, a.cfg.DB, "projection_catchup", a.cfg.Projection.Name())
	if err != nil {
		return CatchUpState{}, fmt.Errorf("projections: %s: catch-up state: %w", a.cfg.Projection.Name(), err)
	}
	return st, nil
}

// querier is what reads a catch-up state: a pool, a connection or a
// transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// readCatchUpState reads the catch-up state of projection name from table
// (a projection_catchup table, qualified or not), or the zero state.
func readCatchUpState(ctx context.Context, db querier, table, name string) (CatchUpState, error) {
	var (
		st   CatchUpState
		done *time.Time
	)
	err := db.QueryRow(ctx, `SELECT started_at, after_event, events, done_at, event_types, skip_types, version FROM `+table+` WHERE projection = $1`,
		name).Scan(&st.Started, &st.After, &st.Events, &done, &st.Types, &st.Skip, &st.Version)
	if errors.Is(err, pgx.ErrNoRows) {
		return CatchUpState{}, nil
	}
	if err != nil {
		return CatchUpState{}, err
	}
	if done != nil {
		st.Done = *done
	}
	return st, nil
}

// ApplyCatchUp implements Sink: Apply, with st written to
// projection_catchup in the same transaction, unless the row holds a
// state st does not advance (CatchUpState.Advances: another replica's
// later start, or its cursor further on), which it keeps.
func (a *Applier) ApplyCatchUp(ctx context.Context, events []eventstore.Envelope, st CatchUpState) (Outcome, error) {
	name := a.cfg.Projection.Name()
	begin := func(b *pgx.Batch) {
		b.Queue(`BEGIN`)
		b.Queue(`SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0))`, projectionLockKey(name))
	}
	var done *time.Time
	if !st.Done.IsZero() {
		done = &st.Done
	}
	commit := func(b *pgx.Batch) {
		b.Queue(`INSERT INTO projection_catchup (projection, started_at, after_event, events, done_at, event_types, skip_types, version)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (projection) DO UPDATE SET started_at = EXCLUDED.started_at, after_event = EXCLUDED.after_event,
			events = EXCLUDED.events, done_at = EXCLUDED.done_at, event_types = EXCLUDED.event_types, skip_types = EXCLUDED.skip_types,
			version = EXCLUDED.version, updated_at = now()
		WHERE EXCLUDED.started_at > projection_catchup.started_at
			OR (EXCLUDED.started_at = projection_catchup.started_at
				AND EXCLUDED.after_event COLLATE "C" >= projection_catchup.after_event COLLATE "C"
				AND EXCLUDED.events >= projection_catchup.events
				AND (projection_catchup.done_at IS NULL OR EXCLUDED.done_at IS NOT NULL))`,
			name, st.Started, st.After, st.Events, done, nonNil(st.Types), nonNil(st.Skip), st.ModelVersion())
		b.Queue(`COMMIT`)
	}
	return a.applyConn(ctx, events, begin, commit)
}

// Version is the projection's declared version (VersionOf).
func (a *Applier) Version() int { return VersionOf(a.cfg.Projection) }

// HasPositions reports whether the projection has applied anything yet.
func (a *Applier) HasPositions(ctx context.Context) (bool, error) {
	var exists bool
	err := a.cfg.DB.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM projection_positions WHERE projection = $1)`, a.cfg.Projection.Name()).Scan(&exists)
	if err != nil {
		return false, fmt.Errorf("projections: %s: positions: %w", a.cfg.Projection.Name(), err)
	}
	return exists, nil
}

// nonNil is s, or an empty slice for nil (a NOT NULL text[] column).
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
