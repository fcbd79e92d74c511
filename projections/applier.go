package projections

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe/eventstore"
)

// Projection builds one read model. Apply is called inside the
// transaction that also moves the projection's position, once per event,
// in sequence order per aggregate; it must only write through tx.
type Projection interface {
	// Name identifies the projection: its positions, its consumer group.
	Name() string
	// AggregateTypes are the aggregate types whose events it reads.
	AggregateTypes() []string
	// Apply writes the effect of e.
	Apply(ctx context.Context, tx pgx.Tx, e eventstore.Envelope) error
}

// ApplierConfig configures an Applier.
type ApplierConfig struct {
	// DB is the read model's database. Required.
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
	switch {
	case c.DB == nil:
		return errors.New("projections: ApplierConfig.DB is nil")
	case c.Store == nil:
		return errors.New("projections: ApplierConfig.Store is nil")
	case c.Projection == nil:
		return errors.New("projections: ApplierConfig.Projection is nil")
	case c.Projection.Name() == "":
		return errors.New("projections: the projection has no name")
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
// fails.
func (a *Applier) Apply(ctx context.Context, events []eventstore.Envelope) (Outcome, error) {
	out := Outcome{Positions: map[eventstore.Ref]int64{}}
	byAgg := map[eventstore.Ref][]eventstore.Envelope{}
	var refs []eventstore.Ref
	for _, e := range events {
		if !a.wants[e.AggregateType] {
			out.Skipped++
			continue
		}
		ref := e.Aggregate()
		if byAgg[ref] == nil {
			refs = append(refs, ref)
		}
		byAgg[ref] = append(byAgg[ref], e)
	}
	if len(refs) == 0 {
		return out, nil
	}
	// A stable lock order keeps two appliers on overlapping batches from
	// deadlocking.
	sort.Slice(refs, func(i, j int) bool { return refs[i].String() < refs[j].String() })
	name := a.cfg.Projection.Name()
	err := pgx.BeginFunc(ctx, a.cfg.DB, func(tx pgx.Tx) error {
		for _, ref := range refs {
			pos, err := lockPosition(ctx, tx, name, ref)
			if err != nil {
				return err
			}
			evs := byAgg[ref]
			sort.SliceStable(evs, func(i, j int) bool { return evs[i].Sequence < evs[j].Sequence })
			for _, e := range evs {
				switch {
				case e.Sequence <= pos:
					out.Skipped++
					continue
				case e.Sequence > pos+1:
					missing, err := a.cfg.Store.Load(ctx, ref, pos)
					if err != nil {
						return fmt.Errorf("projections: %s: repair %s after %d: %w", name, ref, pos, err)
					}
					for _, m := range missing {
						if m.Sequence >= e.Sequence {
							break
						}
						if err := a.cfg.Projection.Apply(ctx, tx, m); err != nil {
							return fmt.Errorf("projections: %s: apply %s: %w", name, m, err)
						}
						pos = m.Sequence
						out.Repaired++
					}
					if pos != e.Sequence-1 {
						return fmt.Errorf("projections: %s: %s: the store has no events %d..%d", name, ref, pos+1, e.Sequence-1)
					}
					a.cfg.Logger.WarnContext(ctx, "repaired a gap from the event store", "projection", name, "aggregate", ref.String(), "up_to", pos)
				}
				if err := a.cfg.Projection.Apply(ctx, tx, e); err != nil {
					return fmt.Errorf("projections: %s: apply %s: %w", name, e, err)
				}
				pos = e.Sequence
				out.Applied++
			}
			if pos == 0 {
				continue // only unwanted or duplicate events: nothing to record
			}
			if _, err := tx.Exec(ctx, `INSERT INTO projection_positions (projection, aggregate_type, aggregate_id, seq)
				VALUES ($1, $2, $3, $4)
				ON CONFLICT (projection, aggregate_type, aggregate_id) DO UPDATE SET seq = EXCLUDED.seq, updated_at = now()`,
				name, ref.Type, ref.ID, pos); err != nil {
				return fmt.Errorf("projections: %s: write position of %s: %w", name, ref, err)
			}
			out.Positions[ref] = pos
		}
		return nil
	})
	if err != nil {
		return Outcome{}, err
	}
	return out, nil
}

// lockPosition returns the aggregate's position (0 when new), holding a
// transaction-scoped advisory lock on (projection, aggregate) so that
// concurrent appliers of the same aggregate, new or not, take turns. (A
// hash collision only makes two aggregates take turns too.)
func lockPosition(ctx context.Context, tx pgx.Tx, name string, ref eventstore.Ref) (int64, error) {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1 || '/' || $2 || '/' || $3, 0))`, name, ref.Type, ref.ID); err != nil {
		return 0, fmt.Errorf("projections: %s: lock position of %s: %w", name, ref, err)
	}
	var pos int64
	err := tx.QueryRow(ctx, `SELECT seq FROM projection_positions
		WHERE projection = $1 AND aggregate_type = $2 AND aggregate_id = $3`, name, ref.Type, ref.ID).Scan(&pos)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("projections: %s: position of %s: %w", name, ref, err)
	}
	return pos, nil
}
