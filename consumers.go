package eventpipe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/eventpipe/eventpipe/projections/elastic/esclient"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/elastic/go-elasticsearch/v8"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/eventpipe/eventpipe/analytics/aggregator"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
	ddbstore "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	"github.com/eventpipe/eventpipe/internal/dynamoclient"
	"github.com/eventpipe/eventpipe/parking"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/elastic"
	"github.com/eventpipe/eventpipe/snapshots"
)

// ConsumersConfig configures NewConsumers.
type ConsumersConfig struct {
	// Catalog holds the read models and upcasters (default Builtin()).
	Catalog *Catalog
	// Endpoints give DynamoDB, Kafka, Postgres and Elasticsearch (default
	// EndpointsFromEnv()).
	Endpoints Endpoints
	// ReadModels names the consumers to run: Postgres read models and
	// Elasticsearch search models alike, AnalyticsAggregator for the
	// analytics aggregation consumer, Snapshotter for the snapshot
	// consumer, and SagaConsumer(name) for a saga of the catalogue.
	// Required.
	ReadModels []string
	// DB is the Postgres read models' database, which also holds the
	// parked events (table parked_events) of every read and search model
	// and the sagas' state (default: a pool on Endpoints.Postgres, closed
	// by Close, when a Postgres read model or a saga is named, or a search
	// model with parking on).
	// Its search_path picks the schema of the tables.
	DB *pgxpool.Pool
	// Search is the search models' Elasticsearch (default: a client of
	// Endpoints.Elasticsearch). Each search model writes through its
	// alias, elastic.Alias(Endpoints.TopicPrefix, name), whose index is
	// created when missing.
	Search *elasticsearch.Client
	// NewSubscriber and Publisher: see projections.RunnerConfig (default:
	// Kafka on Endpoints.KafkaBrokers; a publisher opened here is closed
	// by Close).
	NewSubscriber bus.SubscriberConstructor
	Publisher     message.Publisher
	// SnapshotEvery is the snapshot consumer's N: it snapshots an
	// aggregate whenever one of its events has a sequence that is a
	// multiple of it (default snapshots.DefaultEvery).
	SnapshotEvery int64
	// SkipCatchUp starts a read model that has applied nothing yet from
	// the topics alone, instead of first catching up from the event store.
	SkipCatchUp bool
	// NoParking poisons permanent failures instead of parking them (the
	// pre-parking behaviour): an event a read or search model can never
	// apply goes to its poison topic, and so does each later event of its
	// aggregate whose gap repair reads the refused event back from the
	// store and fails again. By default each read and search model parks
	// the event instead, and every later event of its aggregate, in DB's
	// parked_events under the model's name, while its other aggregates
	// flow (see package parking and projections.RunnerConfig.Parking);
	// `eventpipe parked list|replay` (ParkedList, ParkedReplay) show and
	// re-drive them. Parking needs `eventpipe migrate` (Migrate): a model
	// whose database has no parked_events table fails at the start of
	// Run. It covers the live topics only: a new read model's catch-up
	// from the event store (see SkipCatchUp), like Replay, applies
	// without parking, so an event that fails permanently there makes
	// Run return the error. The analytics aggregation consumer and the
	// snapshot consumer do not park either way.
	NoParking bool
	// Registerer receives each read model's metrics, labelled
	// projection=<name> (default: none).
	Registerer prometheus.Registerer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *ConsumersConfig) setDefaults() {
	processDefaults(&c.Catalog, &c.Endpoints, &c.Logger)
}

// Validate reports the first unusable field.
func (c ConsumersConfig) Validate() error {
	have := strings.Join(ConsumerNames(c.Catalog), ", ")
	if len(c.ReadModels) == 0 {
		return fmt.Errorf("no read model named (have %s)", have)
	}
	for _, name := range c.ReadModels {
		_, saga := c.Catalog.sagaByConsumer(name)
		if _, ok := c.Catalog.modelAggregateTypes(name); !ok && !saga && name != AnalyticsAggregator && name != Snapshotter {
			return fmt.Errorf("unknown read model %q (have %s)", name, have)
		}
	}
	return nil
}

// AnalyticsAggregator names the analytics aggregation consumer
// (analytics/aggregator) among the consumers NewConsumers runs: it keeps
// the sessions and the hourly and daily aggregations of the analytics
// table from the analytics.<source> topics.
const AnalyticsAggregator = "analytics"

// Snapshotter names the snapshot consumer (package snapshots) among the
// consumers NewConsumers runs: in its own consumer group
// (<prefix>snapshots) it reads the events topics of every domain of the
// catalogue that can be snapshotted and writes an aggregate's #SNAPSHOT
// every ConsumersConfig.SnapshotEvery events, off the write path.
const Snapshotter = "snapshots"

// ConsumerNames lists what NewConsumers can run: the catalog's read and
// search models, AnalyticsAggregator, Snapshotter and the catalog's sagas
// (SagaConsumer of each name).
func ConsumerNames(c *Catalog) []string {
	names := append(c.ModelNames(), AnalyticsAggregator, Snapshotter)
	for _, s := range c.SagaNames() {
		names = append(names, SagaConsumer(s))
	}
	return names
}

// Consumers runs read models, each a projections.Runner in its own
// consumer group, the analytics aggregation consumer, the snapshot
// consumer and sagas (each a sagas.Runner in its own group), on one
// store, database, Elasticsearch and publisher.
type Consumers struct {
	runs    []func(context.Context) error
	closers []func() error
}

// NewConsumers opens the store, the database and the publisher cfg does
// not give, and builds one Runner per read model, each parking its
// permanent failures unless cfg.NoParking is set. Run them with Run;
// Close releases what NewConsumers opened (when NewConsumers fails, it
// has released it already).
func NewConsumers(ctx context.Context, cfg ConsumersConfig) (*Consumers, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Consumers{}
	fail := func(err error) (*Consumers, error) {
		_ = c.Close()
		return nil, err
	}
	store, err := OpenStore(ctx, cfg.Endpoints, cfg.Catalog, cfg.Logger)
	if err != nil {
		return nil, err
	}
	db, es := cfg.DB, cfg.Search
	needDB := false // a Postgres read model, a saga, or parking of a search model
	for _, name := range cfg.ReadModels {
		_, read := cfg.Catalog.ReadModel(name)
		_, search := cfg.Catalog.SearchModel(name)
		_, saga := cfg.Catalog.sagaByConsumer(name)
		needDB = needDB || read || saga || (search && !cfg.NoParking)
		if search && es == nil {
			if es, err = esclient.NewClient(cfg.Endpoints.Elasticsearch); err != nil {
				return fail(err)
			}
		}
	}
	if needDB && db == nil {
		pool, err := pgxpool.New(ctx, cfg.Endpoints.Postgres)
		if err != nil {
			return fail(fmt.Errorf("read-model database: %w", err))
		}
		c.closers = append(c.closers, func() error { pool.Close(); return nil })
		db = pool
	}
	var lot *parking.Store // shared: each Runner parks under its model's name
	if needDB && !cfg.NoParking {
		if lot, err = parking.New(parking.Config{DB: db, Logger: cfg.Logger}); err != nil {
			return fail(err)
		}
	}
	pub, closePub, err := publisher(cfg.Publisher, cfg.Endpoints, "eventpipe-consume", cfg.Logger)
	if err != nil {
		return fail(err)
	}
	c.closers = append(c.closers, closePub)
	var history projections.HistoryPage
	if !cfg.SkipCatchUp {
		history = StoreHistory(store)
	}
	for _, name := range cfg.ReadModels {
		if name == AnalyticsAggregator {
			agg, err := newAggregator(ctx, cfg, pub)
			if err != nil {
				return fail(err)
			}
			c.runs = append(c.runs, agg.Run)
			continue
		}
		if name == Snapshotter {
			snap, err := newSnapshotter(cfg, store, pub)
			if err != nil {
				return fail(err)
			}
			c.runs = append(c.runs, snap.Run)
			continue
		}
		if d, ok := cfg.Catalog.sagaByConsumer(name); ok {
			runner, err := newSagaRunner(cfg, d, db, store, pub)
			if err != nil {
				return fail(err)
			}
			c.runs = append(c.runs, runner.Run)
			continue
		}
		var applier projections.Sink
		if p, ok := cfg.Catalog.ReadModel(name); ok {
			if applier, err = projections.NewApplier(projections.ApplierConfig{DB: db, Store: store, Projection: p, Logger: cfg.Logger}); err != nil {
				return fail(err)
			}
		} else {
			p, _ := cfg.Catalog.SearchModel(name)
			alias := elastic.Alias(cfg.Endpoints.TopicPrefix, name)
			if err := elastic.EnsureIndex(ctx, es, p, alias); err != nil {
				return fail(err)
			}
			if applier, err = elastic.NewApplier(elastic.ApplierConfig{Client: es, Store: store, Projection: p, Index: alias, Logger: cfg.Logger}); err != nil {
				return fail(err)
			}
		}
		rc := projections.RunnerConfig{Applier: applier, NewSubscriber: cfg.NewSubscriber, Brokers: cfg.Endpoints.KafkaBrokers,
			Topics: bus.Topics{Prefix: cfg.Endpoints.TopicPrefix}, Publisher: pub, Parking: lot, History: history, Logger: cfg.Logger}
		if cfg.Registerer != nil {
			rc.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"projection": name}, cfg.Registerer)
		}
		runner, err := projections.NewRunner(rc)
		if err != nil {
			return fail(err)
		}
		c.runs = append(c.runs, runner.Run)
	}
	return c, nil
}

// newAggregator builds the analytics aggregation consumer of cfg.
func newAggregator(ctx context.Context, cfg ConsumersConfig, poison message.Publisher) (*aggregator.Consumer, error) {
	ep := cfg.Endpoints
	db, err := dynamoclient.New(ctx, dynamoclient.Config{Endpoint: ep.DynamoDB})
	if err != nil {
		return nil, err
	}
	ac := aggregator.Config{
		Kafka:  kafka.SubscriberConfig{Brokers: ep.KafkaBrokers, ClientID: "eventpipe-analytics", Logger: watermill.NewSlogLogger(cfg.Logger)},
		Topics: bus.Topics{Prefix: ep.TopicPrefix}, Client: db, Table: ep.AnalyticsTable, Poison: poison, Logger: cfg.Logger,
	}
	if cfg.Registerer != nil {
		ac.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"projection": AnalyticsAggregator}, cfg.Registerer)
	}
	return aggregator.New(ac)
}

// newSnapshotter builds the snapshot consumer of cfg: every domain of the
// catalogue with a snapshot function, built on store.
func newSnapshotter(cfg ConsumersConfig, store eventstore.Store, poison message.Publisher) (*snapshots.Consumer, error) {
	aggs, err := snapshotFuncs(cfg.Catalog, store)
	if err != nil {
		return nil, err
	}
	ep := cfg.Endpoints
	sc := snapshots.Config{Aggregates: aggs, Every: cfg.SnapshotEvery, NewSubscriber: cfg.NewSubscriber, Brokers: ep.KafkaBrokers,
		Topics: bus.Topics{Prefix: ep.TopicPrefix}, Publisher: poison, Logger: cfg.Logger}
	if cfg.Registerer != nil {
		sc.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"projection": Snapshotter}, cfg.Registerer)
	}
	return snapshots.New(sc)
}

// snapshotFuncs builds, on store with the catalogue's upcasters, the
// snapshot function of every domain of c that has one, by aggregate type.
func snapshotFuncs(c *Catalog, store eventstore.Store) (map[string]commands.SnapshotFunc, error) {
	out := map[string]commands.SnapshotFunc{}
	for _, t := range c.AggregateTypes() {
		d := c.domains[t]
		if d.NewSnapshot == nil {
			continue
		}
		fn, err := d.NewSnapshot(store, &c.upcasters)
		if err != nil {
			return nil, fmt.Errorf("eventpipe: snapshots of %s: %w", t, err)
		}
		out[t] = fn
	}
	if len(out) == 0 {
		return nil, errors.New("eventpipe: no domain of the catalogue can be snapshotted")
	}
	return out, nil
}

// Run runs every read model until ctx ends or one of them fails.
func (c *Consumers) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, run := range c.runs {
		g.Go(func() error { return run(ctx) })
	}
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// Close releases what NewConsumers opened (call it after Run).
func (c *Consumers) Close() error {
	var errs []error
	for i := len(c.closers) - 1; i >= 0; i-- {
		errs = append(errs, c.closers[i]())
	}
	return errors.Join(errs...)
}

// StoreHistory pages store's events by type (the by-type index, in event
// id order), for a new read model's catch-up and for replay.
func StoreHistory(store *ddbstore.Store) projections.HistoryPage {
	return func(ctx context.Context, eventType, cursor string) ([]eventstore.Envelope, string, error) {
		p, err := store.ListByType(ctx, ddbstore.TypeQuery{EventType: eventType, Cursor: cursor, Limit: 1000})
		return p.Events, p.Next, err
	}
}
