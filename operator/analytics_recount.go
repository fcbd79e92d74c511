package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/analytics/aggregator"
)

// AnalyticsRecountConfig configures AnalyticsRecount.
type AnalyticsRecountConfig struct {
	// Process: the endpoints (DynamoDB and its analytics table, Postgres)
	// and the logger (defaults: see eventpipe.Process); the catalogue is
	// not used.
	eventpipe.Process
	// DB holds operator_actions (default:
	// eventpipe.OpenPostgres(Endpoints), closed before AnalyticsRecount
	// returns).
	DB *pgxpool.Pool
	// Source, From and To are the source and its range [From, To), on
	// whole UTC hours, ended at least Settle ago (default
	// aggregator.DefaultSettle). Required.
	Source   string
	From, To time.Time
	Settle   time.Duration
	// Margin is how far outside [From, To) the raw events are read, for
	// the sessions crossing its edges (default aggregator.DefaultMargin;
	// see aggregator.RecountConfig.Margin).
	Margin time.Duration
	// Actor is who recounts (default DefaultActor()); Reason why
	// (optional). Both are recorded with the operator action.
	Actor  string
	Reason string
}

// Validate reports, as an *eventstore.ValidationError, the settings from
// the environment that could not be read (eventpipe.Process.Validate), a
// Source that is no source id, From or To not on a whole hour, To not
// after From, a negative Settle and a range that ended less than Settle
// ago, the defaults filled (as AnalyticsRecount fills them). Whether the
// raw events of From may have expired is checked against the analytics
// table's TTL once AnalyticsRecount opened it.
func (c AnalyticsRecountConfig) Validate() error {
	if err := validProcess(&c.Process); err != nil {
		return err
	}
	settle := c.Settle
	if settle == 0 {
		settle = aggregator.DefaultSettle
	}
	hour := func(t time.Time) bool { return !t.IsZero() && t.Equal(t.Truncate(time.Hour)) }
	switch {
	case c.Source == "" || strings.Contains(c.Source, "#"):
		return invalid("Source", fmt.Sprintf("%q is not a source id", c.Source))
	case !hour(c.From):
		return invalid("From", fmt.Sprintf("%v is not a whole UTC hour", c.From))
	case !hour(c.To):
		return invalid("To", fmt.Sprintf("%v is not a whole UTC hour", c.To))
	case !c.From.Before(c.To):
		return invalid("To", fmt.Sprintf("%v is not after From %v", c.To, c.From))
	case c.Settle < 0:
		return invalid("Settle", fmt.Sprintf("%v is negative", c.Settle))
	case c.Margin < 0:
		return invalid("Margin", fmt.Sprintf("%v is negative", c.Margin))
	case c.To.After(time.Now().Add(-settle)):
		return invalid("To", fmt.Sprintf("%v is less than %v ago: the range is still open to live events (recount closed hours only)", c.To.UTC(), settle))
	}
	return nil
}

// AnalyticsRecountResult is what AnalyticsRecount did.
type AnalyticsRecountResult struct {
	aggregator.RecountResult
	// Action is the operator action recorded (ActionAnalyticsRecount).
	Action OperatorAction `json:"action"`
}

// AnalyticsRecount recounts a source's sessions and aggregations of a
// closed time range from its raw events, beside the running aggregation
// consumer (aggregator.Recount says what is rewritten, how it is fenced
// against the consumer's writes, and the exact guarantee). Bad input is a
// *eventstore.ValidationError; a missing operator_actions table is
// ErrNoOperatorTable, checked before anything is read. Every run, also one
// that failed part-way, is recorded as one operator action
// (ActionAnalyticsRecount) whose result counts what changed.
func AnalyticsRecount(ctx context.Context, cfg AnalyticsRecountConfig) (AnalyticsRecountResult, error) {
	var out AnalyticsRecountResult
	_ = cfg.FillProcess() // Validate reports Endpoints.Err
	if err := cfg.Validate(); err != nil {
		return out, fmt.Errorf("analytics recount: %w", err)
	}
	if cfg.Actor == "" {
		cfg.Actor = DefaultActor()
	}
	store, err := eventpipe.OpenAnalytics(ctx, cfg.Endpoints, cfg.Logger)
	if err != nil {
		return out, fmt.Errorf("analytics recount: %w", err)
	}
	client, err := eventpipe.OpenDynamoDB(ctx, cfg.Endpoints)
	if err != nil {
		return out, fmt.Errorf("analytics recount: %w", err)
	}
	rc := aggregator.RecountConfig{Client: client, Table: cfg.Endpoints.AnalyticsTable, Events: store, Source: cfg.Source,
		From: cfg.From, To: cfg.To, Settle: cfg.Settle, Margin: cfg.Margin, Logger: cfg.Logger}
	if err := validRecount(rc); err != nil {
		return out, fmt.Errorf("analytics recount: %w", err)
	}
	db, closeDB, err := openDB(ctx, cfg.DB, cfg.Endpoints)
	if err != nil {
		return out, fmt.Errorf("analytics recount: %w", err)
	}
	defer closeDB()
	if err := operatorReady(ctx, db); err != nil {
		return out, fmt.Errorf("analytics recount: %w", err)
	}
	target := fmt.Sprintf("analytics %s from %s to %s", cfg.Source, cfg.From.UTC().Format(time.RFC3339), cfg.To.UTC().Format(time.RFC3339))
	action, err := startOperatorAction(ctx, db, cfg.Logger, OperatorAction{Actor: cfg.Actor, Action: ActionAnalyticsRecount, Target: target, Reason: cfg.Reason})
	if err != nil {
		return out, fmt.Errorf("analytics recount: %w", err)
	}
	res, runErr := aggregator.Recount(ctx, rc)
	out.RecountResult = res
	result := fmt.Sprintf("%d raw events; %d of %d aggregations and %d of %d sessions rewritten",
		res.Events, res.BucketsChanged, len(res.Buckets), res.SessionsChanged, len(res.Sessions))
	if runErr != nil {
		result += "; stopped: " + runErr.Error()
	}
	action, recErr := finishOperatorAction(ctx, db, cfg.Logger, action, result)
	out.Action = action
	if runErr != nil {
		return out, errors.Join(fmt.Errorf("analytics recount: %w", runErr), recErr)
	}
	if recErr != nil {
		return out, fmt.Errorf("analytics recount: %w", recErr)
	}
	return out, nil
}

// validRecount checks cfg as Recount will, before anything is recorded.
func validRecount(cfg aggregator.RecountConfig) error {
	if cfg.Settle == 0 {
		cfg.Settle = aggregator.DefaultSettle
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.RecentEvents, cfg.SessionTTL, cfg.ConflictRetries = aggregator.DefaultRecentEvents, aggregator.DefaultSessionTTL, 1
	return cfg.Validate()
}
