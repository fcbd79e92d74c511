package operator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
	ddbstore "github.com/eventpipe/eventpipe/eventstore/dynamodb"
)

// RecalculateConfig configures Recalculate.
type RecalculateConfig struct {
	// Process: the catalogue (the domains whose rules fold the logs), the
	// endpoints (DynamoDB, Postgres) and the logger (defaults: see
	// eventpipe.Process).
	eventpipe.Process
	// Store is the event store (default: eventpipe.OpenStore(Endpoints,
	// Catalog)).
	Store *ddbstore.Store
	// DB holds operator_actions (default:
	// eventpipe.OpenPostgres(Endpoints), closed before Recalculate
	// returns).
	DB *pgxpool.Pool
	// Type is the aggregate type, a domain of Catalog. Required.
	Type string
	// ID is the one aggregate to recalculate; exactly one of ID and All.
	ID string
	// All recalculates every aggregate of Type from the first id above
	// After ("" for the start): it lists them a page at a time from the
	// store's by-type index (Store.ListAggregates, never a table scan
	// and never every id in memory) and recalculates each page's with
	// Workers at once. A run that stops (an error, a refused log, ctx
	// ending) reports the last id up to which every aggregate is done
	// (RecalculateResult.Last): run again with After set to it to resume
	// (aggregates after it that were done already come out unchanged).
	All   bool
	After string
	// Workers is how many aggregates All recalculates at once (default
	// 4, at most 64).
	Workers int
	// PageSize is how many ids All lists at a time (default 100, at most
	// eventstore.MaxPageSize).
	PageSize int
	// Reindex makes All run the store's index of aggregates last
	// appended to before the index existed (Store.IndexAggregates, a
	// table scan) although it is recorded as done: for aggregates an
	// older writer created after it ran. Without it All runs the index
	// only the first time, on a table where it is not recorded.
	Reindex bool
	// Actor is who recalculates (default DefaultActor()); Reason why
	// (optional). Both are recorded with the operator action.
	Actor  string
	Reason string
	// Retries bounds the retries of one aggregate after a command
	// appended to it meanwhile (default 3).
	Retries int
	// Progress, when set, is called after each aggregate (for the CLI);
	// with All, in the order they finish, one call at a time.
	Progress func(commands.Recalculation)
}

// Recalculate's defaults.
const (
	DefaultRecalculateWorkers  = 4
	DefaultRecalculatePageSize = 100
)

func (c *RecalculateConfig) setDefaults() {
	if c.Workers == 0 {
		c.Workers = DefaultRecalculateWorkers
	}
	if c.PageSize == 0 {
		c.PageSize = DefaultRecalculatePageSize
	}
}

// Validate reports, as an *eventstore.ValidationError, the settings from
// the environment that could not be read (eventpipe.Process.Validate), a
// Type that is no domain of the catalogue or keeps no STATE, ID and All
// both or neither given, After or Reindex without All, Workers or
// PageSize out of range and an invalid aggregate id, the defaults filled
// (as Recalculate fills them).
func (c RecalculateConfig) Validate() error {
	if err := validProcess(&c.Process); err != nil {
		return err
	}
	d, ok := c.Catalog.Domain(c.Type)
	switch {
	case !ok:
		return invalid("Type", fmt.Sprintf("%q is not an aggregate type of the catalogue (have %s)", c.Type, strings.Join(c.Catalog.AggregateTypes(), ", ")))
	case d.NewRecalculate == nil:
		return invalid("Type", fmt.Sprintf("domain %s keeps no STATE to recalculate", c.Type))
	case c.All == (c.ID != ""):
		return invalid("ID", "give an aggregate id or All, not both or neither")
	case !c.All && c.After != "":
		return invalid("After", "is only for All")
	case !c.All && c.Reindex:
		return invalid("Reindex", "is only for All")
	case c.Workers < 0 || c.Workers > 64:
		return invalid("Workers", fmt.Sprintf("is %d, want 1–64 (0: %d)", c.Workers, DefaultRecalculateWorkers))
	case c.PageSize < 0 || c.PageSize > eventstore.MaxPageSize:
		return invalid("PageSize", fmt.Sprintf("is %d, want 1–%d (0: %d)", c.PageSize, eventstore.MaxPageSize, DefaultRecalculatePageSize))
	}
	if c.ID != "" {
		if err := (eventstore.Ref{Type: c.Type, ID: c.ID}).Validate(); err != nil {
			return err
		}
	}
	return nil
}

// RecalculateResult is what Recalculate did.
type RecalculateResult struct {
	// Aggregates holds, with ID, the recalculation done: what STATE was
	// and is now, and whether it changed. With All it is empty (memory
	// stays bounded); Progress sees each.
	Aggregates []commands.Recalculation
	// Changed and Unchanged count the recalculations done.
	Changed, Unchanged int
	// Last is, with All, the id up to which every aggregate is done (""
	// before the first): RecalculateConfig.After of a run that resumes.
	// With ID, that id once done.
	Last string
	// Indexed counts the #METADATA items the store's one-time index gave
	// their by-type keys in this run (All on a table not indexed before,
	// or Reindex).
	Indexed int64
	// Action is the operator action recorded (ActionRecalculate).
	Action OperatorAction
}

// Recalculate recalculates the STATE item of one aggregate (ID) or of every
// aggregate of a type (All) from its event log, through its domain's
// rules: the same processor whose fold the command handlers write as
// STATE on every append (commands.Domain.NewRecalculate). A STATE that
// equals the fold at the log's version is left as it is (unchanged);
// any other is rewritten, conditional on the aggregate's version not
// having moved since its log was read, so a command handled meanwhile is
// never overwritten: the aggregate is read again and folded again
// (RecalculateConfig.Retries times, then a *eventstore.ConcurrencyError).
// No event is appended and nothing is published. With All, the first run
// on a table also gives the aggregates last appended to before the
// by-type index existed their index keys (Store.IndexAggregates, one
// table scan, recorded in the table), so that the listing finds them.
//
// A log the rules reject stops Recalculate with a
// *commands.ReplayRefusedError naming the event (its id, type and
// sequence) and nothing is written for that aggregate. Bad input is a
// *eventstore.ValidationError; a missing operator_actions table is
// ErrNoOperatorTable, checked before anything is done. Every run is
// recorded as one operator action (ActionRecalculate), started before the
// first aggregate and finished, with a result that counts what changed,
// after the last, also when it failed part-way.
func Recalculate(ctx context.Context, cfg RecalculateConfig) (RecalculateResult, error) {
	var res RecalculateResult
	_ = cfg.FillProcess() // Validate reports Endpoints.Err
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return res, fmt.Errorf("recalculate: %w", err)
	}
	if cfg.Actor == "" {
		cfg.Actor = DefaultActor()
	}
	d, _ := cfg.Catalog.Domain(cfg.Type)
	db, closeDB, err := openDB(ctx, cfg.DB, cfg.Endpoints)
	if err != nil {
		return res, fmt.Errorf("recalculate: %w", err)
	}
	defer closeDB()
	if err := operatorReady(ctx, db); err != nil {
		return res, fmt.Errorf("recalculate: %w", err)
	}
	store := cfg.Store
	if store == nil {
		if store, err = eventpipe.OpenStore(ctx, cfg.Endpoints, cfg.Catalog, cfg.Logger); err != nil {
			return res, fmt.Errorf("recalculate: %w", err)
		}
	}
	recalc, err := d.NewRecalculate(store, commands.RecalculateOptions{Retries: cfg.Retries})
	if err != nil {
		return res, fmt.Errorf("recalculate: %w", err)
	}
	run := &recalcRun{cfg: cfg, recalc: recalc, res: &res,
		log: cfg.Logger.With("component", "recalculate", "aggregate_type", cfg.Type)}
	target := cfg.Type + "/" + cfg.ID
	if cfg.All {
		target = cfg.Type + "/* after " + quoteOr(cfg.After, "the start")
	}
	action, err := startOperatorAction(ctx, db, cfg.Logger, OperatorAction{Actor: cfg.Actor, Action: ActionRecalculate, Target: target, Reason: cfg.Reason})
	if err != nil {
		return res, fmt.Errorf("recalculate: %w", err)
	}
	var runErr error
	if cfg.All {
		runErr = run.all(ctx, store)
	} else if _, runErr = run.page(ctx, []string{cfg.ID}); runErr == nil {
		res.Last = cfg.ID
	}
	result := fmt.Sprintf("%d changed, %d unchanged", res.Changed, res.Unchanged)
	if res.Indexed > 0 {
		result += fmt.Sprintf(", %d indexed", res.Indexed)
	}
	if cfg.All {
		result += ", last " + quoteOr(res.Last, "none")
	}
	if runErr != nil {
		result += "; stopped: " + runErr.Error()
	}
	action, recErr := finishOperatorAction(ctx, db, cfg.Logger, action, result)
	res.Action = action
	if runErr != nil {
		if cfg.All {
			runErr = fmt.Errorf("%w (resume with --after %s)", runErr, quoteOr(res.Last, `""`))
		}
		return res, errors.Join(fmt.Errorf("recalculate: %w", runErr), recErr)
	}
	if recErr != nil {
		return res, fmt.Errorf("recalculate: %w", recErr)
	}
	return res, nil
}

// recalcRun is one Recalculate's work: its recalculations, counted into
// res.
type recalcRun struct {
	cfg    RecalculateConfig
	recalc commands.RecalculateFunc
	res    *RecalculateResult
	log    *slog.Logger
	mu     sync.Mutex // res, Progress
}

// all recalculates every aggregate of the type above cfg.After, a page of
// ids at a time, first giving aggregates written before the by-type index
// their keys when the table was never indexed (or cfg.Reindex).
func (r *recalcRun) all(ctx context.Context, store *ddbstore.Store) error {
	indexed, at, err := store.AggregatesIndexed(ctx)
	if err != nil {
		return err
	}
	if !indexed || r.cfg.Reindex {
		r.log.InfoContext(ctx, "indexing aggregates written before the by-type index (one table scan)", "reindex", r.cfg.Reindex)
		ir, err := store.IndexAggregates(ctx, func(p ddbstore.IndexResult) {
			r.log.DebugContext(ctx, "indexing aggregates", "scanned", p.Scanned, "indexed", p.Indexed)
		})
		r.res.Indexed = ir.Indexed
		if err != nil {
			return err
		}
		r.log.InfoContext(ctx, "aggregates indexed", "scanned", ir.Scanned, "indexed", ir.Indexed)
	} else {
		r.log.DebugContext(ctx, "aggregates indexed before", "at", at)
	}
	q := eventstore.AggregateQuery{Type: r.cfg.Type, After: r.cfg.After, Limit: r.cfg.PageSize}
	for {
		page, err := store.ListAggregates(ctx, q)
		if err != nil {
			return err
		}
		done, err := r.page(ctx, page.IDs)
		if done > 0 {
			r.res.Last = page.IDs[done-1]
		}
		if err != nil || !page.More || len(page.IDs) == 0 {
			return err
		}
		q.After = page.IDs[len(page.IDs)-1]
	}
}

// page recalculates ids with cfg.Workers at once and returns how many of
// them, from the first, are done. The first error stops it from starting
// more (those in flight finish) and is returned.
func (r *recalcRun) page(ctx context.Context, ids []string) (int, error) {
	ok := make([]bool, len(ids))
	var mu sync.Mutex // next, firstErr
	next := 0
	var firstErr error
	var wg sync.WaitGroup
	for range min(r.cfg.Workers, len(ids)) {
		wg.Go(func() {
			for {
				mu.Lock()
				if firstErr == nil {
					firstErr = ctx.Err()
				}
				if firstErr != nil || next == len(ids) {
					mu.Unlock()
					return
				}
				i := next
				next++
				mu.Unlock()
				rec, err := r.recalc(ctx, ids[i])
				if err != nil {
					r.log.ErrorContext(ctx, "recalculation refused or failed", "id", ids[i], "err", err)
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				ok[i] = true
				r.done(ctx, rec)
			}
		})
	}
	wg.Wait()
	done := 0
	for done < len(ids) && ok[done] {
		done++
	}
	return done, firstErr
}

// done counts rec, keeps it for a single aggregate, and reports it.
func (r *recalcRun) done(ctx context.Context, rec commands.Recalculation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.cfg.All {
		r.res.Aggregates = append(r.res.Aggregates, rec)
	}
	if rec.Changed {
		r.res.Changed++
		r.log.InfoContext(ctx, "STATE rewritten", "id", rec.Aggregate.ID, "version", rec.Version, "was_seq", rec.WasSeq, "had_state", rec.HadState)
	} else {
		r.res.Unchanged++
	}
	if r.cfg.Progress != nil {
		r.cfg.Progress(rec)
	}
}

func quoteOr(s, empty string) string {
	if s == "" {
		return empty
	}
	return s
}
