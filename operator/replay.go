package operator

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	ddbstore "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/elastic"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
)

// ReplayConfig configures Replay.
type ReplayConfig struct {
	// Process: the catalogue (the read models and upcasters), the
	// endpoints (DynamoDB, Postgres, Elasticsearch) and the logger
	// (defaults: see eventpipe.Process). The search_path of
	// Endpoints.Postgres picks the schema of the live read models
	// (default "public"; see eventpipe.PostgresSchema); the shadow tables
	// go to <schema>_replay_<name>.
	eventpipe.Process
	// ReadModel names the read model to rebuild: a Postgres read model or
	// an Elasticsearch search model. Required.
	ReadModel string
	// DB, when set, is the live read models' database, used instead of
	// eventpipe.OpenPostgres(Endpoints) and not closed by Replay; the
	// schema its connections use (current_schema()) holds the live tables.
	DB *pgxpool.Pool
	// Search, when set, is the search models' Elasticsearch, used instead
	// of a client of Endpoints.Elasticsearch.
	Search *esclient.Client
	// Store, when set, is the event store, used instead of one opened on
	// Endpoints with the catalogue's schema (eventpipe.OpenStore); give it
	// the same schema (upcasters).
	Store *ddbstore.Store
	// History pages the stored events by type (default: the store's
	// events by type, eventpipe.StoreHistory); Count counts them for the
	// progress total (default: the store's count by type).
	History projections.HistoryPage
	Count   func(ctx context.Context, eventType string) (int, error)
	// Progress, when set, is called as the rebuild advances.
	Progress func(projections.ReplayProgress)
}

func (c *ReplayConfig) setDefaults() {
	_ = c.FillProcess() // Validate reports Endpoints.Err
}

// Validate reports, as an *eventstore.ValidationError, the settings from
// the environment that could not be read (eventpipe.Process.Validate) and
// a ReadModel that is no read or search model of the catalogue (one that
// is no consumer at all also wraps eventpipe.ErrUnknownConsumer), the
// defaults filled (as Replay fills them).
func (c ReplayConfig) Validate() error {
	c.setDefaults()
	if err := c.Process.Validate(); err != nil {
		return err
	}
	have := strings.Join(c.Catalog.ModelNames(), ", ")
	if c.ReadModel == "" {
		return invalid("ReadModel", fmt.Sprintf("name the read or search model to rebuild (have %s)", have))
	}
	if _, ok := c.Catalog.SearchModel(c.ReadModel); ok {
		return nil
	}
	if _, ok := c.Catalog.ReadModel(c.ReadModel); ok {
		return nil
	}
	if cons, ok := c.Catalog.Consumer(c.ReadModel); ok {
		return invalid("ReadModel", fmt.Sprintf("%s is a %s; only read and search models are rebuilt from the store (have %s)",
			c.ReadModel, cons.Describe(bus.Topics{}).Kind, have))
	}
	return fmt.Errorf("%w %q: %w", eventpipe.ErrUnknownConsumer, c.ReadModel, invalid("ReadModel", fmt.Sprintf("%q is no read or search model (have %s)", c.ReadModel, have)))
}

// ErrReplayRunning is returned (wrapped) by Replay when another replay of
// the same read model holds its lock.
var ErrReplayRunning = projections.ErrReplayRunning

// Replay rebuilds one read model from the event store without taking it
// away from its readers. A Postgres read model is rebuilt into shadow
// tables that are swapped in atomically (see projections.Replay); Replay
// first brings the live schema to the newest migration (eventpipe's own
// and, for a projections.Migrator, the read model's), like the shadow
// tables that will replace its tables. A search model is rebuilt into a
// new Elasticsearch index and its alias is moved to it atomically (see
// elastic.Replay).
func Replay(ctx context.Context, cfg ReplayConfig) (projections.ReplayResult, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return projections.ReplayResult{}, fmt.Errorf("replay: %w", err)
	}
	if sp, ok := cfg.Catalog.SearchModel(cfg.ReadModel); ok {
		return replaySearchModel(ctx, cfg, sp)
	}
	p, _ := cfg.Catalog.ReadModel(cfg.ReadModel)
	db, live, closeDB, err := eventpipe.ReadModelDB(ctx, cfg.DB, cfg.Endpoints)
	if err != nil {
		return projections.ReplayResult{}, fmt.Errorf("replay: %w", err)
	}
	defer closeDB()
	migrate := func(ctx context.Context, schema string) error {
		_, _, err := eventpipe.MigratePostgres(ctx, db.Config().ConnConfig, schema, cfg.Logger, p)
		return err
	}
	if err := migrate(ctx, live); err != nil {
		return projections.ReplayResult{}, err
	}
	store, err := cfg.openHistory(ctx)
	if err != nil {
		return projections.ReplayResult{}, err
	}
	return projections.Replay(ctx, projections.ReplayConfig{
		DB: db, Store: store, History: cfg.History, Count: cfg.Count, Projection: p,
		CreateTables: migrate, Progress: cfg.Progress, Logger: cfg.Logger,
	})
}

// openHistory opens the store (unless c.Store is set) and defaults
// History and Count to it.
func (c *ReplayConfig) openHistory(ctx context.Context) (*ddbstore.Store, error) {
	store := c.Store
	if store == nil {
		var err error
		if store, err = eventpipe.OpenStore(ctx, c.Endpoints, c.Catalog, c.Logger); err != nil {
			return nil, err
		}
	}
	if c.History == nil {
		c.History = eventpipe.StoreHistory(store)
	}
	if c.Count == nil {
		c.Count = store.CountByType
	}
	return store, nil
}

// replaySearchModel is Replay of a search model.
func replaySearchModel(ctx context.Context, cfg ReplayConfig, p elastic.Projection) (projections.ReplayResult, error) {
	store, err := cfg.openHistory(ctx)
	if err != nil {
		return projections.ReplayResult{}, err
	}
	es := cfg.Search
	if es == nil {
		if es, err = esclient.NewClient(cfg.Endpoints.Elasticsearch, cfg.Endpoints.ElasticsearchSecurity); err != nil {
			return projections.ReplayResult{}, err
		}
	}
	return elastic.Replay(ctx, elastic.ReplayConfig{
		Client: es, Store: store, History: cfg.History, Count: cfg.Count, Projection: p,
		Alias: elastic.Alias(cfg.Endpoints.TopicPrefix, p.Name()), CatchUpIndex: elastic.Alias(cfg.Endpoints.TopicPrefix, elastic.DefaultCatchUpIndex),
		Progress: cfg.Progress, Logger: cfg.Logger,
	})
}
