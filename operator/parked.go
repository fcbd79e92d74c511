package operator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/parking"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/elastic"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
)

// ParkedListConfig configures ParkedList.
type ParkedListConfig struct {
	// Process: the catalogue (the read and search models), the endpoints
	// (Postgres) and the logger (defaults: see eventpipe.Process).
	eventpipe.Process
	// DB holds the parked events (default: eventpipe.OpenPostgres(Endpoints),
	// closed before ParkedList returns). Its search_path picks the schema
	// (see eventpipe.PostgresSchema).
	DB *pgxpool.Pool
	// Projection, when set, lists one read or search model's parked
	// events; otherwise every model's.
	Projection string
	// Aggregate, when its Type is set, lists one aggregate type's (its ID
	// too when set: one aggregate's).
	Aggregate eventstore.Ref
}

// Validate reports, as an *eventstore.ValidationError, the settings from
// the environment that could not be read (eventpipe.Process.Validate), a
// Projection that is no read or search model of the catalogue and an
// Aggregate id without its type, the defaults filled (as ParkedList
// fills them).
func (c ParkedListConfig) Validate() error {
	if err := validProcess(&c.Process); err != nil {
		return err
	}
	if c.Projection != "" {
		if err := knownModel(c.Catalog, c.Projection); err != nil {
			return err
		}
	}
	return validAggregate(c.Aggregate)
}

// ParkedList returns the parked events cfg selects, by projection,
// aggregate and sequence (see package parking).
func ParkedList(ctx context.Context, cfg ParkedListConfig) ([]parking.Event, error) {
	_ = cfg.FillProcess() // Validate reports Endpoints.Err
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("parked list: %w", err)
	}
	_, store, closeDB, err := openParking(ctx, cfg.DB, cfg.Endpoints, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("parked list: %w", err)
	}
	defer closeDB()
	return store.List(ctx, parking.Filter{Consumer: cfg.Projection, Aggregate: cfg.Aggregate})
}

// ParkedReapplyConfig configures ParkedReapply.
type ParkedReapplyConfig struct {
	// Process: the catalogue (the read and search models, the
	// upcasters), the endpoints (DynamoDB, Postgres, Elasticsearch) and
	// the logger (defaults: see eventpipe.Process).
	eventpipe.Process
	// DB holds the parked events and the Postgres read models (default:
	// eventpipe.OpenPostgres(Endpoints), closed before ParkedReapply returns).
	DB *pgxpool.Pool
	// Search is the search models' Elasticsearch (default: a client of
	// Endpoints.Elasticsearch).
	Search *esclient.Client
	// Projection names the read or search model whose parked aggregates
	// are re-applied. Required.
	Projection string
	// Aggregate, when its Type is set, re-applies one aggregate type's
	// parked aggregates (its ID too when set: one aggregate).
	Aggregate eventstore.Ref
	// Actor is who re-applies (default DefaultActor()), and Reason why
	// (optional): the re-apply is recorded as an operator action
	// (ActionParkedReapply).
	Actor, Reason string
}

// Validate reports, as an *eventstore.ValidationError, the settings from
// the environment that could not be read (eventpipe.Process.Validate), an
// empty Projection or one that is no read or search model of the
// catalogue and an Aggregate id without its type, the defaults filled
// (as ParkedReapply fills them).
func (c ParkedReapplyConfig) Validate() error {
	if err := validProcess(&c.Process); err != nil {
		return err
	}
	if c.Projection == "" {
		return invalid("Projection", fmt.Sprintf("name a projection (have %s)", strings.Join(c.Catalog.ModelNames(), ", ")))
	}
	if err := knownModel(c.Catalog, c.Projection); err != nil {
		return err
	}
	return validAggregate(c.Aggregate)
}

// ParkedReapply re-applies a projection's parked aggregates, once the cause
// of their failure is fixed: each aggregate's parked events are applied in
// sequence order through the projection's own applier (the Postgres
// Applier, or the search model's Elasticsearch Applier), so what was
// applied already is skipped by the positions or the document versions,
// and the aggregate is unparked when all applied; a running `eventpipe
// consume` meanwhile parks the aggregate's new events, and the re-apply
// applies those too. An aggregate whose event fails again stays parked,
// with the new reason; the result says which (see parking.Store.Reapply).
// Run it with the fixed code: the same binary version as the consumers.
// The re-apply is recorded in operator_actions (ActionParkedReapply; see
// OperatorActions), whose table is checked for before anything is
// re-applied.
func ParkedReapply(ctx context.Context, cfg ParkedReapplyConfig) (parking.ReapplyResult, error) {
	_ = cfg.FillProcess() // Validate reports Endpoints.Err
	if err := cfg.Validate(); err != nil {
		return parking.ReapplyResult{}, fmt.Errorf("parked reapply: %w", err)
	}
	db, lot, closeDB, err := openParking(ctx, cfg.DB, cfg.Endpoints, cfg.Logger)
	if err != nil {
		return parking.ReapplyResult{}, fmt.Errorf("parked reapply: %w", err)
	}
	defer closeDB()
	if err := operatorReady(ctx, db); err != nil {
		return parking.ReapplyResult{}, fmt.Errorf("parked reapply: %w", err)
	}
	if cfg.Actor == "" {
		cfg.Actor = DefaultActor()
	}
	sink, err := parkedSink(ctx, cfg, db)
	if err != nil {
		return parking.ReapplyResult{}, fmt.Errorf("parked reapply: %w", err)
	}
	target := cfg.Projection
	if cfg.Aggregate.Type != "" {
		target += " " + cfg.Aggregate.String()
	}
	action, err := startOperatorAction(ctx, db, cfg.Logger, OperatorAction{Actor: cfg.Actor, Action: ActionParkedReapply, Target: target, Reason: cfg.Reason})
	if err != nil {
		return parking.ReapplyResult{}, fmt.Errorf("parked reapply: %w", err)
	}
	res, err := reapplyParked(ctx, lot, sink, cfg)
	result := reapplySummary(res, err)
	if _, rerr := finishOperatorAction(ctx, db, cfg.Logger, action, result); rerr != nil {
		return res, fmt.Errorf("parked reapply: %w", errors.Join(err, rerr))
	}
	return res, err
}

// reapplyParked re-applies cfg's parked aggregates through sink.
func reapplyParked(ctx context.Context, lot *parking.Store, sink projections.Sink, cfg ParkedReapplyConfig) (parking.ReapplyResult, error) {
	return lot.Reapply(ctx, parking.ReapplyConfig{
		Consumer: cfg.Projection, Aggregate: cfg.Aggregate, Logger: cfg.Logger,
		Apply: func(ctx context.Context, events []eventstore.Envelope) (int, error) {
			// Parked as read then: upgraded to the current schema, as the
			// store and the live consumer upgrade what they read.
			up := make([]eventstore.Envelope, len(events))
			for i, e := range events {
				var err error
				if up[i], err = cfg.Catalog.Upcasters().Upcast(e); err != nil {
					return 0, err
				}
			}
			out, err := sink.Apply(ctx, up)
			return out.Applied, err
		},
	})
}

// reapplySummary says in a line what a re-apply did.
func reapplySummary(res parking.ReapplyResult, err error) string {
	if err != nil {
		return "failed: " + err.Error()
	}
	if len(res.Aggregates) == 0 {
		return "nothing parked"
	}
	reapplied, applied := 0, 0
	for _, a := range res.Aggregates {
		reapplied += a.Reapplied
		applied += a.Applied
	}
	return fmt.Sprintf("%d aggregates unparked, %d still parked; %d events re-applied, %d applied",
		len(res.Aggregates)-res.StillParked(), res.StillParked(), reapplied, applied)
}

// ParkedSkipConfig configures ParkedSkip.
type ParkedSkipConfig struct {
	// Process: the catalogue (the read models, the upcasters), the
	// endpoints (DynamoDB, Postgres) and the logger (defaults: see
	// eventpipe.Process).
	eventpipe.Process
	// DB holds the parked events, the read model and operator_actions
	// (default: eventpipe.OpenPostgres(Endpoints), closed before ParkedSkip
	// returns).
	DB *pgxpool.Pool
	// Projection is the Postgres read model that parked the aggregate.
	// Required. (A search model's documents carry the last applied
	// sequence as their version, which a skip cannot move without
	// writing the document: skip is refused for them; fix the model and
	// use `parked reapply`, or replay it with `eventpipe replay`.)
	Projection string
	// Aggregate is the parked aggregate, type and id. Required.
	Aggregate eventstore.Ref
	// Reason says why the event is skipped. Required.
	Reason string
	// Actor is who skips (default DefaultActor()).
	Actor string
}

// Validate reports, as an *eventstore.ValidationError, the settings from
// the environment that could not be read (eventpipe.Process.Validate), a
// Projection that is no Postgres read model of the catalogue, an
// Aggregate without its type or id and an empty Reason, the defaults
// filled (as ParkedSkip fills them).
func (c ParkedSkipConfig) Validate() error {
	if err := validProcess(&c.Process); err != nil {
		return err
	}
	if _, ok := c.Catalog.ReadModel(c.Projection); !ok {
		reason := fmt.Sprintf("%q is not a Postgres read model (have %s)", c.Projection, strings.Join(c.Catalog.ReadModelNames(), ", "))
		if _, search := c.Catalog.SearchModel(c.Projection); search {
			reason = fmt.Sprintf("%q is a search model: skip is for Postgres read models (use parked reapply after a fix, or eventpipe replay)", c.Projection)
		}
		return invalid("Projection", reason)
	}
	if c.Aggregate.Type == "" || c.Aggregate.ID == "" {
		return invalid("Aggregate", "want <type>/<id>")
	}
	if strings.TrimSpace(c.Reason) == "" {
		return invalid("Reason", "say why the event is skipped")
	}
	return nil
}

// ParkedSkipResult is what ParkedSkip did.
type ParkedSkipResult struct {
	// Skipped is the event released without being applied.
	Skipped parking.Skipped
	// Reapply is the re-apply of the aggregate's later parked events: it
	// is unparked when they all applied, or none was parked behind.
	Reapply parking.AggregateReapply
	// Action is the operator action recorded (ActionParkedSkip).
	Action OperatorAction
}

// ParkedSkip releases a parked aggregate past its first parked event
// without applying it, for an event that can never apply (a payload the
// fixed read model still refuses, by design). In one Postgres
// transaction the event is moved from parked_events to skipped_events
// with the actor and reason, and the read model's position for the
// aggregate (projection_positions) is moved to its sequence, so that the
// aggregate's next event does not repair the gap with it. That needs the
// read model to have applied every event before it (the position at its
// sequence - 1); otherwise nothing changes and ParkedSkip returns an
// *eventstore.ValidationError. Then the aggregate's later parked events
// are re-applied in order as ParkedReapply does, and the aggregate is
// unparked when they applied (a live consumer parks its new events until
// then, and the re-apply applies those too); one that fails again stays
// parked, as the result says. The skip is recorded in operator_actions
// (ActionParkedSkip), whose table is checked for first: started before it
// acts, finished with its result, or with its refusal. An aggregate
// with nothing parked is an error wrapping parking.ErrNotParked.
func ParkedSkip(ctx context.Context, cfg ParkedSkipConfig) (ParkedSkipResult, error) {
	_ = cfg.FillProcess() // Validate reports Endpoints.Err
	if err := cfg.Validate(); err != nil {
		return ParkedSkipResult{}, fmt.Errorf("parked skip: %w", err)
	}
	if cfg.Actor == "" {
		cfg.Actor = DefaultActor()
	}
	db, lot, closeDB, err := openParking(ctx, cfg.DB, cfg.Endpoints, cfg.Logger)
	if err != nil {
		return ParkedSkipResult{}, fmt.Errorf("parked skip: %w", err)
	}
	defer closeDB()
	if err := operatorReady(ctx, db); err != nil {
		return ParkedSkipResult{}, fmt.Errorf("parked skip: %w", err)
	}
	rcfg := ParkedReapplyConfig{Process: cfg.Process, DB: db, Projection: cfg.Projection, Aggregate: cfg.Aggregate, Actor: cfg.Actor}
	sink, err := parkedSink(ctx, rcfg, db)
	if err != nil {
		return ParkedSkipResult{}, fmt.Errorf("parked skip: %w", err)
	}
	var out ParkedSkipResult
	if out.Action, err = startOperatorAction(ctx, db, cfg.Logger, OperatorAction{Actor: cfg.Actor, Action: ActionParkedSkip,
		Target: cfg.Projection + " " + cfg.Aggregate.String(), Reason: cfg.Reason}); err != nil {
		return ParkedSkipResult{}, fmt.Errorf("parked skip: %w", err)
	}
	out.Skipped, err = lot.Skip(ctx, parking.SkipConfig{Consumer: cfg.Projection, Aggregate: cfg.Aggregate,
		Actor: cfg.Actor, Reason: cfg.Reason, Advance: advancePosition(cfg.Projection)})
	if err != nil {
		_, rerr := finishOperatorAction(ctx, db, cfg.Logger, out.Action, "refused: "+err.Error())
		return ParkedSkipResult{}, fmt.Errorf("parked skip: %w", errors.Join(err, rerr))
	}
	res, rerr := reapplyParked(ctx, lot, sink, rcfg)
	out.Reapply = parking.AggregateReapply{Aggregate: cfg.Aggregate, Unparked: true}
	if len(res.Aggregates) > 0 {
		out.Reapply = res.Aggregates[0]
	}
	if rerr != nil {
		out.Reapply = parking.AggregateReapply{Aggregate: cfg.Aggregate, Err: rerr}
	}
	e := out.Skipped.Envelope
	result := fmt.Sprintf("skipped %s #%d (%s, %s)", e.Aggregate(), e.Sequence, e.EventType, e.EventID)
	if out.Reapply.Unparked {
		result += fmt.Sprintf("; unparked, %d later events re-applied, %d applied", out.Reapply.Reapplied, out.Reapply.Applied)
	} else {
		result += fmt.Sprintf("; still parked after %d re-applied: %v", out.Reapply.Reapplied, out.Reapply.Err)
	}
	out.Action, err = finishOperatorAction(ctx, db, cfg.Logger, out.Action, result)
	if err != nil {
		return out, fmt.Errorf("parked skip: %w", err)
	}
	return out, nil
}

// advancePosition moves projection's position for the skipped event's
// aggregate to its sequence, in tx: from sequence - 1 (or from none, for
// the aggregate's first event). A position already at or past it is left
// (the event was applied after all); one further behind is refused, as
// the events before the skipped one would then never be applied.
func advancePosition(projection string) func(ctx context.Context, tx pgx.Tx, e eventstore.Envelope) error {
	return func(ctx context.Context, tx pgx.Tx, e eventstore.Envelope) error {
		ref := e.Aggregate()
		// The applier's lock on (projection, aggregate): no apply of the
		// aggregate runs meanwhile.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, projection+"/"+ref.Type+"/"+ref.ID); err != nil {
			return err
		}
		var pos int64
		err := tx.QueryRow(ctx, `SELECT seq FROM projection_positions WHERE projection = $1 AND aggregate_type = $2 AND aggregate_id = $3`,
			projection, ref.Type, ref.ID).Scan(&pos)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		switch {
		case pos >= e.Sequence:
			return nil
		case pos != e.Sequence-1:
			return &eventstore.ValidationError{Field: "Aggregate", Reason: fmt.Sprintf(
				"%s has applied %s up to sequence %d only: the events before sequence %d must apply first (parked reapply)", projection, ref, pos, e.Sequence)}
		}
		_, err = tx.Exec(ctx, `INSERT INTO projection_positions (projection, aggregate_type, aggregate_id, seq) VALUES ($1, $2, $3, $4)
			ON CONFLICT (projection, aggregate_type, aggregate_id) DO UPDATE SET seq = EXCLUDED.seq, updated_at = now()`,
			projection, ref.Type, ref.ID, e.Sequence)
		return err
	}
}

// parkedSink builds the applier of cfg.Projection, as
// eventpipe.NewConsumers does.
func parkedSink(ctx context.Context, cfg ParkedReapplyConfig, db *pgxpool.Pool) (projections.Sink, error) {
	store, err := eventpipe.OpenStore(ctx, cfg.Endpoints, cfg.Catalog, cfg.Logger)
	if err != nil {
		return nil, err
	}
	if p, ok := cfg.Catalog.ReadModel(cfg.Projection); ok {
		return projections.NewApplier(projections.ApplierConfig{DB: db, Store: store, Projection: p, Logger: cfg.Logger})
	}
	p, _ := cfg.Catalog.SearchModel(cfg.Projection)
	es := cfg.Search
	if es == nil {
		if es, err = esclient.NewClient(cfg.Endpoints.Elasticsearch, cfg.Endpoints.ElasticsearchSecurity); err != nil {
			return nil, err
		}
	}
	return elastic.NewApplier(elastic.ApplierConfig{Client: es, Store: store, Projection: p,
		Index: elastic.Alias(cfg.Endpoints.TopicPrefix, p.Name()), CacheSize: -1, Logger: cfg.Logger})
}

// openParking returns db, or a pool of ep.Postgres that the returned
// func closes, and a parking store on it.
func openParking(ctx context.Context, db *pgxpool.Pool, ep eventpipe.Endpoints, logger *slog.Logger) (*pgxpool.Pool, *parking.Store, func(), error) {
	closeDB := func() {}
	if db == nil {
		var err error
		if db, err = eventpipe.OpenPostgres(ctx, ep); err != nil {
			return nil, nil, nil, fmt.Errorf("postgres: %w", err)
		}
		closeDB = db.Close
	}
	lot, err := parking.New(parking.Config{DB: db, Logger: logger})
	if err != nil {
		closeDB()
		return nil, nil, nil, err
	}
	return db, lot, closeDB, nil
}

// knownModel reports a name that is neither a read model nor a search
// model of c.
func knownModel(c *eventpipe.Catalog, name string) error {
	if _, ok := c.ReadModel(name); ok {
		return nil
	}
	if _, ok := c.SearchModel(name); ok {
		return nil
	}
	return invalid("Projection", fmt.Sprintf("unknown projection %q (have %s)", name, strings.Join(c.ModelNames(), ", ")))
}

// validAggregate refuses an aggregate id without its type.
func validAggregate(ref eventstore.Ref) error {
	if ref.Type == "" && ref.ID != "" {
		return invalid("Aggregate", "an aggregate id needs its aggregate type (type/id)")
	}
	return nil
}
