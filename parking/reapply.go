package parking

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe/eventstore"
)

// ApplyFunc applies events (one aggregate's, in sequence order) exactly
// once in effect, all or nothing, and returns how many it applied (events
// it had applied before are skipped, not counted): a projections.Sink's
// Apply.
type ApplyFunc func(ctx context.Context, events []eventstore.Envelope) (applied int, err error)

// ReapplyConfig configures Reapply.
type ReapplyConfig struct {
	// Consumer whose parked aggregates are re-applied. Required.
	Consumer string
	// Aggregate, when its Type is set, re-applies only that aggregate (or
	// every aggregate of the type, when its ID is empty).
	Aggregate eventstore.Ref
	// Apply applies the events: the same Sink the consumer applies
	// through, so that what the consumer applied before parking, and a
	// parked event applied by an earlier re-apply that crashed before it
	// cleaned up, is skipped. Required.
	Apply ApplyFunc
	// BatchSize is the most events applied at once (default 100).
	BatchSize int
	// Logger defaults to the Store's.
	Logger *slog.Logger
}

func (c *ReapplyConfig) setDefaults(s *Store) {
	if c.BatchSize == 0 {
		c.BatchSize = 100
	}
	if c.Logger == nil {
		c.Logger = s.cfg.Logger
	}
}

// Validate reports the first missing or invalid field.
func (c ReapplyConfig) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("parking: ReapplyConfig: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch {
	case c.Consumer == "":
		return bad("Consumer", "is empty")
	case c.Apply == nil:
		return bad("Apply", "is nil")
	case c.BatchSize < 0:
		return bad("BatchSize", "is %d, want ≥ 0", c.BatchSize)
	case c.Aggregate.Type == "" && c.Aggregate.ID != "":
		return bad("Aggregate.Type", "is empty but Aggregate.ID is %q", c.Aggregate.ID)
	}
	return nil
}

// AggregateReapply is what Reapply did to one aggregate.
type AggregateReapply struct {
	Aggregate eventstore.Ref
	// Reapplied is how many parked events went through Apply again and
	// were released; Applied how many of them Apply counted as applied
	// (the others had been applied before).
	Reapplied, Applied int
	// Unparked: every parked event applied and the aggregate is live
	// again. When false, Err says why it is still parked.
	Unparked bool
	Err      error
}

// ReapplyResult says what Reapply did, aggregate by aggregate.
type ReapplyResult struct {
	Aggregates []AggregateReapply
}

// StillParked counts the aggregates that stay parked.
func (r ReapplyResult) StillParked() int {
	n := 0
	for _, a := range r.Aggregates {
		if !a.Unparked {
			n++
		}
	}
	return n
}

// Reapply re-applies the parked aggregates cfg selects, one after the
// other, oldest parked first. For each, it applies the parked events in
// sequence order through cfg.Apply, up to BatchSize at once, deletes them
// once applied, and goes on until none is left; then, holding the
// aggregate's lock exclusively, it makes sure none was parked meanwhile
// (a live consumer parks the aggregate's new events as long as it has
// any, and the re-apply drains those too) and so unparks it. When an event
// fails again, the events before it stay applied and released, and it
// and the later ones stay parked: a permanent error becomes its new
// reason. One aggregate's failure does not stop the others; it is in its
// AggregateReapply. Reapply returns an error only when it cannot read what
// is parked.
//
// Reapply is safe to run beside the live consumer and beside another
// Reapply: Apply skips what was applied already.
func (s *Store) Reapply(ctx context.Context, cfg ReapplyConfig) (ReapplyResult, error) {
	cfg.setDefaults(s)
	if err := cfg.Validate(); err != nil {
		return ReapplyResult{}, err
	}
	refs, err := s.Aggregates(ctx, Filter{Consumer: cfg.Consumer, Aggregate: cfg.Aggregate})
	if err != nil {
		return ReapplyResult{}, err
	}
	var res ReapplyResult
	for _, ref := range refs {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		a := s.reapplyAggregate(ctx, cfg, ref)
		if a.Unparked {
			cfg.Logger.InfoContext(ctx, "aggregate unparked", "consumer", cfg.Consumer, "aggregate", ref.String(), "reapplied", a.Reapplied, "applied", a.Applied)
		} else {
			cfg.Logger.WarnContext(ctx, "aggregate still parked", "consumer", cfg.Consumer, "aggregate", ref.String(), "reapplied", a.Reapplied, "err", a.Err)
		}
		res.Aggregates = append(res.Aggregates, a)
	}
	return res, nil
}

// reapplyAggregate re-applies one parked aggregate.
func (s *Store) reapplyAggregate(ctx context.Context, cfg ReapplyConfig, ref eventstore.Ref) AggregateReapply {
	a := AggregateReapply{Aggregate: ref}
	for {
		events, err := s.List(ctx, Filter{Consumer: cfg.Consumer, Aggregate: ref, Limit: cfg.BatchSize})
		if err != nil {
			a.Err = err
			return a
		}
		if len(events) == 0 {
			// Nothing (left) to apply: unpark, unless the live consumer
			// parked more meanwhile.
			done, err := s.release(ctx, cfg.Consumer, ref, 0)
			if err != nil {
				a.Err = err
				return a
			}
			if done {
				a.Unparked = true
				return a
			}
			continue
		}
		envs := make([]eventstore.Envelope, len(events))
		for i, ev := range events {
			envs[i] = ev.Envelope
		}
		applied, err := cfg.Apply(ctx, envs)
		n := len(envs)
		if err != nil {
			// Find the event that fails: apply them one by one.
			applied, n, err = 0, 0, nil
			for _, e := range envs {
				k, aerr := cfg.Apply(ctx, []eventstore.Envelope{e})
				if aerr != nil {
					err = aerr
					break
				}
				applied += k
				n++
			}
		}
		a.Reapplied += n
		a.Applied += applied
		var last int64
		if n > 0 {
			last = envs[n-1].Sequence
		}
		if err != nil {
			a.Err = fmt.Errorf("%s: %w", envs[n], err)
			if _, rerr := s.release(ctx, cfg.Consumer, ref, last); rerr != nil {
				a.Err = errors.Join(a.Err, rerr)
			}
			if eventstore.IsPermanent(err) {
				if rerr := s.setReason(ctx, cfg.Consumer, envs[n], err.Error()); rerr != nil {
					a.Err = errors.Join(a.Err, rerr)
				}
			}
			return a
		}
		done, err := s.release(ctx, cfg.Consumer, ref, last)
		if err != nil {
			a.Err = err
			return a
		}
		if done {
			a.Unparked = true
			return a
		}
	}
}

// release deletes ref's parked events up to sequence last (applied), and
// reports whether none is left: the aggregate is unparked. It holds the
// aggregate's lock exclusively, so a consumer's ParkBehind either parked
// its events before (they are left, and the re-apply goes on) or finds the
// aggregate unparked after.
func (s *Store) release(ctx context.Context, consumer string, ref eventstore.Ref, last int64) (bool, error) {
	var left bool
	err := pgx.BeginFunc(ctx, s.cfg.DB, func(tx pgx.Tx) error {
		var b pgx.Batch
		b.Queue(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, lockKey(consumer, ref))
		b.Queue(`DELETE FROM parked_events WHERE consumer = $1 AND aggregate_type = $2 AND aggregate_id = $3 AND seq <= $4`,
			consumer, ref.Type, ref.ID, last)
		b.Queue(`SELECT EXISTS (SELECT 1 FROM parked_events WHERE consumer = $1 AND aggregate_type = $2 AND aggregate_id = $3)`,
			consumer, ref.Type, ref.ID).QueryRow(func(row pgx.Row) error { return row.Scan(&left) })
		return tx.SendBatch(ctx, &b).Close()
	})
	if err != nil {
		return false, fmt.Errorf("parking: %s: release %s up to %d: %w", consumer, ref, last, err)
	}
	return !left, nil
}

// setReason records why a parked event failed again.
func (s *Store) setReason(ctx context.Context, consumer string, e eventstore.Envelope, reason string) error {
	_, err := s.cfg.DB.Exec(ctx, `UPDATE parked_events SET reason = $5
		WHERE consumer = $1 AND aggregate_type = $2 AND aggregate_id = $3 AND seq = $4`,
		consumer, e.AggregateType, e.AggregateID, e.Sequence, reason)
	if err != nil {
		return fmt.Errorf("parking: %s: record the reason of %s: %w", consumer, e, err)
	}
	return nil
}
