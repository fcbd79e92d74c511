package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"

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
	// All recalculates every aggregate of Type, in id order, from the
	// first id above After ("" for the start). A run that stops (an
	// error, a refused log, ctx ending) reports the last id done
	// (RecalculateResult.Last): run again with After set to it to resume.
	All   bool
	After string
	// Actor is who recalculates (default DefaultActor()); Reason why
	// (optional). Both are recorded with the operator action.
	Actor  string
	Reason string
	// Retries bounds the retries of one aggregate after a command
	// appended to it meanwhile (default 3).
	Retries int
	// Progress, when set, is called after each aggregate (for the CLI).
	Progress func(commands.Recalculation)
}

// Validate reports, as an *eventstore.ValidationError, the settings from
// the environment that could not be read (eventpipe.Process.Validate), a
// Type that is no domain of the catalogue or keeps no STATE, ID and All
// both or neither given, After without All and an invalid aggregate id,
// the defaults filled (as Recalculate fills them).
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
	// Aggregates are the recalculations done, in order: each says what
	// STATE was and is now, and whether it changed.
	Aggregates []commands.Recalculation
	// Changed and Unchanged count them.
	Changed, Unchanged int
	// Last is the id of the last aggregate done ("" before the first):
	// With All, RecalculateConfig.After of a run that resumes.
	Last string
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
// No event is appended and nothing is published.
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
	target := cfg.Type + "/" + cfg.ID
	ids := []string{cfg.ID}
	if cfg.All {
		target = cfg.Type + "/* after " + quoteOr(cfg.After, "the start")
		if ids, err = store.AggregateIDs(ctx, cfg.Type, cfg.After); err != nil {
			return res, fmt.Errorf("recalculate: %w", err)
		}
	}
	action, err := startOperatorAction(ctx, db, cfg.Logger, OperatorAction{Actor: cfg.Actor, Action: ActionRecalculate, Target: target, Reason: cfg.Reason})
	if err != nil {
		return res, fmt.Errorf("recalculate: %w", err)
	}
	log := cfg.Logger.With("component", "recalculate", "aggregate_type", cfg.Type)
	var runErr error
	for _, id := range ids {
		if runErr = ctx.Err(); runErr != nil {
			break
		}
		rec, err := recalc(ctx, id)
		if err != nil {
			runErr = err
			log.ErrorContext(ctx, "recalculation refused or failed", "id", id, "err", err)
			break
		}
		res.Aggregates = append(res.Aggregates, rec)
		res.Last = id
		if rec.Changed {
			res.Changed++
			log.InfoContext(ctx, "STATE rewritten", "id", id, "version", rec.Version, "was_seq", rec.WasSeq, "had_state", rec.HadState)
		} else {
			res.Unchanged++
		}
		if cfg.Progress != nil {
			cfg.Progress(rec)
		}
	}
	result := fmt.Sprintf("%d changed, %d unchanged", res.Changed, res.Unchanged)
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

func quoteOr(s, empty string) string {
	if s == "" {
		return empty
	}
	return s
}
