package operator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/eventstore"
)

// The operator actions eventpipe records (OperatorAction.Action).
const (
	ActionPoisonRedrive    = "poison redrive"    // PoisonRedrive
	ActionParkedReapply    = "parked reapply"    // ParkedReapply
	ActionParkedSkip       = "parked skip"       // ParkedSkip
	ActionRecalculate      = "recalculate"       // Recalculate
	ActionAnalyticsRecount = "analytics recount" // AnalyticsRecount
	ActionSagaAbort        = "saga abort"        // SagaAbort
	ActionSagaRetry        = "saga retry"        // SagaRetry
)

// actions are the Action constants, as OperatorActionsConfig.Action
// takes them.
var actions = []string{ActionPoisonRedrive, ActionParkedReapply, ActionParkedSkip, ActionRecalculate, ActionAnalyticsRecount,
	ActionSagaAbort, ActionSagaRetry, ActionForget, ActionExport}

// OperatorAction is one recorded operator action: a row of the Postgres
// table operator_actions (migrations/postgres 009).
type OperatorAction struct {
	// ID orders the actions: a later action has a higher ID.
	ID int64
	At time.Time
	// Actor is who acted (OperatorConfig's Actor, by default $USER).
	Actor string
	// Action is one of the Action constants (ActionPoisonRedrive,
	// ActionParkedReapply, ActionParkedSkip, …). A row recorded before
	// the re-apply of parked events got its name says "parked replay":
	// OperatorActions reads it as ActionParkedReapply.
	Action string
	// Target is what was acted on: a poison topic and its offsets, a
	// projection and aggregate.
	Target string
	// Reason is the operator's reason, when given.
	Reason string
	// Result is what came of it, in a line: for an action still started,
	// ResultUnfinished.
	Result string
	// State is StateStarted from before the action acts until it is
	// finished, then StateDone. A started action nobody is running any
	// more was stopped (killed) before it recorded its result: what it did
	// before that is not in Result.
	State string
	// Finished is when it was finished (zero while started, and for
	// actions recorded before migration 012).
	Finished time.Time
}

// The states of an operator action.
const (
	StateStarted = "started"
	StateDone    = "done"
)

// ResultUnfinished is the Result read for an action still started.
const ResultUnfinished = "started, not finished: no result recorded (still running, or stopped before it finished)"

// ErrNoOperatorTable is wrapped when the database's schema has no
// operator_actions table: `eventpipe migrate` creates it. The operator
// tools check for it before they act, so that no action goes unrecorded.
var ErrNoOperatorTable = errors.New("no operator_actions table in the database's schema, or one without its state column: run `eventpipe migrate` (migrations/postgres 009 and 012)")

// DefaultActor is the actor of an operator action when none is given:
// $USER, else $LOGNAME, else "unknown".
func DefaultActor() string {
	for _, v := range []string{"USER", "LOGNAME"} {
		if s := os.Getenv(v); s != "" {
			return s
		}
	}
	return "unknown"
}

// OperatorActionsConfig configures OperatorActions.
type OperatorActionsConfig struct {
	// Process: the endpoints (Postgres) and the logger (defaults: see
	// eventpipe.Process); the catalogue is not used.
	eventpipe.Process
	// DB holds operator_actions (default:
	// eventpipe.OpenPostgres(Endpoints), closed before OperatorActions
	// returns).
	DB *pgxpool.Pool
	// Action, when set, selects one kind of action.
	Action string
	// Limit is the most actions returned, newest first (default 20).
	Limit int
}

// Validate reports, as an *eventstore.ValidationError, the settings from
// the environment that could not be read (eventpipe.Process.Validate), an
// unknown Action and a negative Limit.
func (c OperatorActionsConfig) Validate() error {
	if err := validProcess(&c.Process); err != nil {
		return err
	}
	if c.Action != "" && !slices.Contains(actions, c.Action) && legacyActions[c.Action] == "" {
		return invalid("Action", fmt.Sprintf("%q is not an operator action (have %s)", c.Action, strings.Join(actions, ", ")))
	}
	if c.Limit < 0 {
		return invalid("Limit", "is negative")
	}
	return nil
}

// OperatorActions returns the latest recorded operator actions, newest
// first. Without the table it returns an error wrapping
// ErrNoOperatorTable.
func OperatorActions(ctx context.Context, cfg OperatorActionsConfig) ([]OperatorAction, error) {
	_ = cfg.FillProcess() // Validate reports Endpoints.Err
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("operator actions: %w", err)
	}
	if cfg.Limit == 0 {
		cfg.Limit = 20
	}
	db, closeDB, err := openDB(ctx, cfg.DB, cfg.Endpoints)
	if err != nil {
		return nil, fmt.Errorf("operator actions: %w", err)
	}
	defer closeDB()
	return latestOperatorActions(ctx, db, cfg.Action, cfg.Limit)
}

// legacyActions are the names some actions were recorded under before
// they got their own word, by the name they have now: rows keep what
// they were written with, and are read (and selected) as the new name.
var legacyActions = map[string]string{
	"parked replay": ActionParkedReapply, // before the re-apply of parked events was called so
}

// actionNames returns action and the legacy names recorded for it.
func actionNames(action string) []string {
	names := []string{action}
	for old, now := range legacyActions {
		if now == action {
			names = append(names, old)
		}
	}
	return names
}

// latestOperatorActions reads up to limit actions of db, newest first
// (action, when set, selects one kind, under its legacy names too).
func latestOperatorActions(ctx context.Context, db *pgxpool.Pool, action string, limit int) ([]OperatorAction, error) {
	rows, err := db.Query(ctx, `SELECT id, at, actor, action, target, reason, result, state, finished_at FROM operator_actions
		WHERE $1 = '' OR action = ANY($2) ORDER BY id DESC LIMIT $3`, action, actionNames(action), limit)
	if err != nil {
		return nil, fmt.Errorf("operator actions: %w", operatorTableErr(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (OperatorAction, error) {
		var a OperatorAction
		var finished *time.Time
		err := row.Scan(&a.ID, &a.At, &a.Actor, &a.Action, &a.Target, &a.Reason, &a.Result, &a.State, &finished)
		if now, ok := legacyActions[a.Action]; ok {
			a.Action = now
		}
		if finished != nil {
			a.Finished = *finished
		}
		if a.State == StateStarted && a.Result == "" {
			a.Result = ResultUnfinished
		}
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("operator actions: %w", operatorTableErr(err))
	}
	return out, nil
}

// operatorReady fails with ErrNoOperatorTable when db has no
// operator_actions table, or one without migration 012's state column.
func operatorReady(ctx context.Context, db *pgxpool.Pool) error {
	var ok bool
	if err := db.QueryRow(ctx, `SELECT to_regclass('operator_actions') IS NOT NULL`).Scan(&ok); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if !ok {
		return ErrNoOperatorTable
	}
	if _, err := db.Exec(ctx, `SELECT state, finished_at FROM operator_actions LIMIT 0`); err != nil {
		return fmt.Errorf("postgres: %w", operatorTableErr(err))
	}
	return nil
}

// startOperatorAction records a as started, before the action acts, and
// returns it with its ID and time: a tool killed before it finishes the
// record leaves it started, which status shows. Record nothing and act
// not at all when it fails.
func startOperatorAction(ctx context.Context, db *pgxpool.Pool, logger *slog.Logger, a OperatorAction) (OperatorAction, error) {
	a.State, a.Result = StateStarted, ""
	err := db.QueryRow(ctx, `INSERT INTO operator_actions (actor, action, target, reason, result, state)
		VALUES ($1, $2, $3, $4, '', 'started') RETURNING id, at`, a.Actor, a.Action, a.Target, a.Reason).Scan(&a.ID, &a.At)
	if err != nil {
		return a, fmt.Errorf("record operator action %s on %s: %w", a.Action, a.Target, operatorTableErr(err))
	}
	logger.InfoContext(ctx, "operator action started", "id", a.ID, "actor", a.Actor, "action", a.Action, "target", a.Target, "reason", a.Reason)
	return a, nil
}

// finishOperatorAction records the result of a, started by
// startOperatorAction, and marks it done. The context is detached from
// ctx's cancellation: an action that was done is recorded even when the
// caller gave up meanwhile.
func finishOperatorAction(ctx context.Context, db *pgxpool.Pool, logger *slog.Logger, a OperatorAction, result string) (OperatorAction, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	a.Result, a.State = result, StateDone
	err := db.QueryRow(ctx, `UPDATE operator_actions SET result = $2, state = 'done', finished_at = now() WHERE id = $1 RETURNING finished_at`,
		a.ID, result).Scan(&a.Finished)
	if err != nil {
		return a, fmt.Errorf("record the result of operator action %d (%s on %s): %w", a.ID, a.Action, a.Target, operatorTableErr(err))
	}
	logger.InfoContext(ctx, "operator action", "id", a.ID, "actor", a.Actor, "action", a.Action, "target", a.Target, "reason", a.Reason, "result", a.Result)
	return a, nil
}

// operatorTableErr turns Postgres' undefined table (or column: a table
// before migration 012) into ErrNoOperatorTable.
func operatorTableErr(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "42703") { // undefined table, undefined column
		return fmt.Errorf("%w (%v)", ErrNoOperatorTable, err)
	}
	return err
}

// validProcess fills p's defaults (p is a Validate's copy: what the tool
// will use) and validates it.
func validProcess(p *eventpipe.Process) error {
	_ = p.FillProcess() // Validate reports Endpoints.Err
	return p.Validate()
}

// invalid is an *eventstore.ValidationError of field saying reason.
func invalid(field, reason string) error {
	return &eventstore.ValidationError{Field: field, Reason: reason}
}

// openDB returns db, or a pool of ep.Postgres that the returned func
// closes.
func openDB(ctx context.Context, db *pgxpool.Pool, ep eventpipe.Endpoints) (*pgxpool.Pool, func(), error) {
	if db != nil {
		return db, func() {}, nil
	}
	pool, err := eventpipe.OpenPostgres(ctx, ep)
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: %w", err)
	}
	return pool, pool.Close, nil
}
