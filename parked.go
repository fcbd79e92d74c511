package eventpipe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/elastic/go-elasticsearch/v8"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/parking"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/elastic"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
)

// ParkedListConfig configures ParkedList.
type ParkedListConfig struct {
	// Catalog holds the read models (default Builtin()).
	Catalog *Catalog
	// Endpoints give Postgres (default EndpointsFromEnv()).
	Endpoints Endpoints
	// DB holds the parked events (default: OpenPostgres(Endpoints),
	// closed before ParkedList returns). Its search_path picks the schema
	// (see PostgresSchema).
	DB *pgxpool.Pool
	// Projection, when set, lists one read or search model's parked
	// events; otherwise every model's.
	Projection string
	// Aggregate, when its Type is set, lists one aggregate type's (its ID
	// too when set: one aggregate's).
	Aggregate eventstore.Ref
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// ParkedList returns the parked events cfg selects, by projection,
// aggregate and sequence (see package parking).
func ParkedList(ctx context.Context, cfg ParkedListConfig) ([]parking.Event, error) {
	if err := processDefaults(&cfg.Catalog, &cfg.Endpoints, &cfg.Logger); err != nil {
		return nil, fmt.Errorf("parked list: %w", err)
	}
	if cfg.Projection != "" {
		if err := knownModel(cfg.Catalog, cfg.Projection); err != nil {
			return nil, fmt.Errorf("parked list: %w", err)
		}
	}
	if err := validAggregate(cfg.Aggregate); err != nil {
		return nil, fmt.Errorf("parked list: %w", err)
	}
	_, store, closeDB, err := openParking(ctx, cfg.DB, cfg.Endpoints, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("parked list: %w", err)
	}
	defer closeDB()
	return store.List(ctx, parking.Filter{Consumer: cfg.Projection, Aggregate: cfg.Aggregate})
}

// ParkedReplayConfig configures ParkedReplay.
type ParkedReplayConfig struct {
	// Catalog holds the read models and upcasters (default Builtin()).
	Catalog *Catalog
	// Endpoints give DynamoDB, Postgres and Elasticsearch (default
	// EndpointsFromEnv()).
	Endpoints Endpoints
	// DB holds the parked events and the Postgres read models (default:
	// OpenPostgres(Endpoints), closed before ParkedReplay returns).
	DB *pgxpool.Pool
	// Search is the search models' Elasticsearch (default: a client of
	// Endpoints.Elasticsearch).
	Search *elasticsearch.Client
	// Projection names the read or search model whose parked aggregates
	// are re-driven. Required.
	Projection string
	// Aggregate, when its Type is set, re-drives one aggregate type's
	// parked aggregates (its ID too when set: one aggregate).
	Aggregate eventstore.Ref
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// ParkedReplay re-drives a projection's parked aggregates, once the cause
// of their failure is fixed: each aggregate's parked events are applied in
// sequence order through the projection's own applier (the Postgres
// Applier, or the search model's Elasticsearch Applier), so what was
// applied already is skipped by the positions or the document versions,
// and the aggregate is unparked when all applied; a running `eventpipe
// consume` meanwhile parks the aggregate's new events, and the replay
// applies those too. An aggregate whose event fails again stays parked,
// with the new reason; the result says which (see parking.Store.Replay).
// Run it with the fixed code: the same binary version as the consumers.
func ParkedReplay(ctx context.Context, cfg ParkedReplayConfig) (parking.ReplayResult, error) {
	if err := processDefaults(&cfg.Catalog, &cfg.Endpoints, &cfg.Logger); err != nil {
		return parking.ReplayResult{}, fmt.Errorf("parked replay: %w", err)
	}
	if cfg.Projection == "" {
		return parking.ReplayResult{}, fmt.Errorf("parked replay: name a projection (have %s)", strings.Join(cfg.Catalog.ModelNames(), ", "))
	}
	if err := knownModel(cfg.Catalog, cfg.Projection); err != nil {
		return parking.ReplayResult{}, fmt.Errorf("parked replay: %w", err)
	}
	if err := validAggregate(cfg.Aggregate); err != nil {
		return parking.ReplayResult{}, fmt.Errorf("parked replay: %w", err)
	}
	db, lot, closeDB, err := openParking(ctx, cfg.DB, cfg.Endpoints, cfg.Logger)
	if err != nil {
		return parking.ReplayResult{}, fmt.Errorf("parked replay: %w", err)
	}
	defer closeDB()
	sink, err := parkedSink(ctx, cfg, db)
	if err != nil {
		return parking.ReplayResult{}, fmt.Errorf("parked replay: %w", err)
	}
	return lot.Replay(ctx, parking.ReplayConfig{
		Consumer: cfg.Projection, Aggregate: cfg.Aggregate, Logger: cfg.Logger,
		Apply: func(ctx context.Context, events []eventstore.Envelope) (int, error) {
			out, err := sink.Apply(ctx, events)
			return out.Applied, err
		},
	})
}

// parkedSink builds the applier of cfg.Projection, as NewConsumers does.
func parkedSink(ctx context.Context, cfg ParkedReplayConfig, db *pgxpool.Pool) (projections.Sink, error) {
	store, err := OpenStore(ctx, cfg.Endpoints, cfg.Catalog, cfg.Logger)
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
func openParking(ctx context.Context, db *pgxpool.Pool, ep Endpoints, logger *slog.Logger) (*pgxpool.Pool, *parking.Store, func(), error) {
	closeDB := func() {}
	if db == nil {
		var err error
		if db, err = OpenPostgres(ctx, ep); err != nil {
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
func knownModel(c *Catalog, name string) error {
	if _, ok := c.ReadModel(name); ok {
		return nil
	}
	if _, ok := c.SearchModel(name); ok {
		return nil
	}
	return fmt.Errorf("unknown projection %q (have %s)", name, strings.Join(c.ModelNames(), ", "))
}

// validAggregate refuses an aggregate id without its type.
func validAggregate(ref eventstore.Ref) error {
	if ref.Type == "" && ref.ID != "" {
		return errors.New("an aggregate id needs its aggregate type (type/id)")
	}
	return nil
}
