package eventpipe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/eventpipe/eventpipe/projections/elastic/esclient"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/health"
	"github.com/eventpipe/eventpipe/parking"
	"github.com/eventpipe/eventpipe/projections"
)

// ConsumersConfig configures NewConsumers.
type ConsumersConfig struct {
	// Process: the catalogue (the consumers, domains and upcasters), the
	// endpoints (DynamoDB, Kafka, Postgres, Elasticsearch) and the
	// logger (defaults: see Process).
	Process
	// Names are the consumers to run, any kind alike (read and search
	// models, sagas by SagaConsumer name, AnalyticsAggregator,
	// Snapshotter, handlers): Catalog.ConsumerNames lists them.
	// Required.
	Names []string
	// Start, when not zero, is where every named consumer starts whose
	// group never committed, instead of its kind's default (see
	// ConsumerInfo.DefaultStart and bus.Start): `eventpipe consume
	// --start`. A consumer that cannot start there (history for a saga)
	// is an error.
	Start bus.Start
	// DB is the Postgres database of the read models, the parked events
	// (table parked_events) of every read and search model and the sagas'
	// state (default: OpenPostgres(Endpoints), closed by Close, when a
	// consumer needs it). Its search_path picks the schema (see
	// PostgresSchema).
	DB *pgxpool.Pool
	// Search is the search models' Elasticsearch (default: a client of
	// Endpoints.Elasticsearch). Each search model writes through its
	// alias, elastic.Alias(Endpoints.TopicPrefix, name), whose index is
	// created when missing.
	Search *esclient.Client
	// NewSubscriber replaces each kind's default Kafka subscriber (it
	// must read the Kafka of Endpoints.KafkaBrokers, where a new group's
	// start is committed, see kafka.StartGroup, unless NoKafka), and
	// Publisher the Kafka publisher of poisoned messages and the sagas'
	// commands (default: one on Endpoints.KafkaBrokers, closed by Close).
	NewSubscriber bus.SubscriberConstructor
	Publisher     message.Publisher
	// NoKafka says the bus of NewSubscriber and Publisher (both required
	// then) is not Kafka, such as Watermill's GoChannel in package
	// testkit/pipeline: no Kafka client is opened, no group's start is
	// committed (each subscriber decides where it starts) and no Kafka
	// lag is measured. The analytics aggregator, which reads Kafka
	// itself, cannot run then.
	NoKafka bool
	// Store is the event store the consumers read (gap repair, command
	// records, snapshots; default: the DynamoDB events table of
	// Endpoints, OpenStore). A read or search model catches up from its
	// history only when it implements eventstore.TypeReader. One given
	// here is the caller's, such as the in-memory
	// eventstore/memstore.Store of package testkit/pipeline.
	Store eventstore.Store
	// SnapshotEvery is the snapshot consumer's N: it snapshots an
	// aggregate whenever one of its events has a sequence that is a
	// multiple of it (default snapshots.DefaultEvery).
	SnapshotEvery int64
	// NoParking poisons permanent failures instead of parking them (the
	// pre-parking behaviour): an event a read or search model can never
	// apply goes to its poison topic, and so does each later event of its
	// aggregate whose gap repair reads the refused event back from the
	// store and fails again. By default each read and search model parks
	// the event instead, and every later event of its aggregate, in DB's
	// parked_events under the model's name, while its other aggregates
	// flow (see package parking and projections.RunnerConfig.Parking);
	// `eventpipe parked list|reapply` (operator.ParkedList, ParkedReapply)
	// show and re-apply them. Parking needs `eventpipe migrate` (Migrate):
	// a model whose database has no parked_events table fails at the start
	// of Run. It covers the live topics only: a new read model's catch-up
	// from the event store, like operator.Replay, applies without parking,
	// so an event that fails permanently there makes Run return the error.
	// The other kinds do not park.
	NoParking bool
	// NoAutoRebuild turns off the automatic rebuild of a read or search
	// model whose declared version (projections.Versioned) is not the
	// one that built it: the model then keeps its rows, a warning says
	// so at each start, `eventpipe status` shows the change, and
	// `eventpipe replay` (operator.Replay) rebuilds it. By default such a
	// model is rebuilt from the event store beside the live one, which
	// keeps serving reads and stays live, and swapped in when it has
	// caught up (see projections.RunnerConfig.Rebuild); a killed rebuild
	// resumes at the next start. `consume --no-auto-rebuild` sets it.
	NoAutoRebuild bool
	// CommandKey signs the commands the sagas send (see
	// WriteSideConfig.CommandKey; the same key as the command handlers').
	// `consume` reads it from EVENTPIPE_COMMAND_KEY_FILE or
	// EVENTPIPE_COMMAND_KEY (CommandKeyFromEnv).
	CommandKey []byte
	// Registerer receives each consumer's metrics, labelled with its name
	// (projection=, saga=, consumer=; default: none).
	Registerer prometheus.Registerer
}

func (c *ConsumersConfig) setDefaults() {
	_ = c.FillProcess() // Validate reports Endpoints.Err
}

// ErrUnknownConsumer is wrapped when a name is not a consumer of the
// catalogue.
var ErrUnknownConsumer = errors.New("unknown consumer")

// Validate reports the first unusable field, an
// *eventstore.ValidationError (a name that is no consumer of the
// catalogue also wraps ErrUnknownConsumer), the defaults filled (as
// NewConsumers fills them).
func (c ConsumersConfig) Validate() error {
	c.setDefaults()
	if err := c.Process.Validate(); err != nil {
		return err
	}
	have := strings.Join(c.Catalog.ConsumerNames(), ", ")
	if len(c.Names) == 0 {
		return invalid("Names", fmt.Sprintf("no consumer named (have %s)", have))
	}
	seen := map[string]bool{}
	for _, name := range c.Names {
		if _, ok := c.Catalog.Consumer(name); !ok {
			return fmt.Errorf("%w %q: %w", ErrUnknownConsumer, name, invalid("Names", fmt.Sprintf("%q is not a consumer of the catalogue (have %s)", name, have)))
		}
		if seen[name] {
			return invalid("Names", fmt.Sprintf("consumer %q named twice", name))
		}
		seen[name] = true
	}
	if err := validCommandKey(c.CommandKey); err != nil {
		return err
	}
	if c.SnapshotEvery < 0 {
		return invalid("SnapshotEvery", "is negative")
	}
	if c.NoKafka {
		if c.NewSubscriber == nil || c.Publisher == nil {
			return invalid("NoKafka", "needs NewSubscriber and Publisher")
		}
		for _, name := range c.Names {
			if cons, _ := c.Catalog.Consumer(name); cons.Describe(bus.Topics{}).Kind == KindAggregator {
				return invalid("NoKafka", fmt.Sprintf("consumer %q reads Kafka itself and cannot run with NoKafka", name))
			}
		}
	}
	return nil
}

// Consumers runs consumers of a catalogue, each in its own consumer
// group, on one store, database, Elasticsearch and publisher.
type Consumers struct {
	runs    []Runnable
	closers []func() error
	// ready are the readiness checks of AddChecks; running is true while
	// Run runs.
	ready   map[string]health.Check
	running atomic.Bool
}

// NewConsumers opens the shared resources the named consumers need (the
// store, the database, Elasticsearch, the publisher) unless cfg gives
// them, and builds each consumer (Consumer.Build). With the read-model
// database (any consumer but the analytics aggregator, the snapshotter
// and plain handlers run alone needs it), it records each consumer's
// definition (RecordDefinitions), logging what changed since its last
// start. Run them with Run;
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
	topics := bus.Topics{Prefix: cfg.Endpoints.TopicPrefix}
	var needs Needs
	for _, name := range cfg.Names {
		cons, _ := cfg.Catalog.Consumer(name)
		n := cons.Describe(topics).Needs
		needs.Postgres = needs.Postgres || n.Postgres || (n.Parking && !cfg.NoParking)
		needs.Elasticsearch = needs.Elasticsearch || n.Elasticsearch
		needs.Parking = needs.Parking || (n.Parking && !cfg.NoParking)
	}
	store, err := storeOr(ctx, cfg.Store, cfg.Endpoints, cfg.Catalog, cfg.Logger, DefaultCommandRetention)
	if err != nil {
		return nil, err
	}
	ep := cfg.Endpoints
	if cfg.NoKafka {
		ep.KafkaBrokers = nil // every Kafka client and group start is skipped without brokers
	}
	var history projections.HistoryPage
	if tr, ok := store.(eventstore.TypeReader); ok {
		history = StoreHistory(tr)
	}
	res := Resources{Catalog: cfg.Catalog, Endpoints: ep, Topics: topics, Store: store, History: history, Opener: openerOf(store),
		DB: cfg.DB, Search: cfg.Search, NewSubscriber: cfg.NewSubscriber, Start: cfg.Start, SnapshotEvery: cfg.SnapshotEvery, CommandKey: cfg.CommandKey, NoAutoRebuild: cfg.NoAutoRebuild,
		Registerer: cfg.Registerer, Logger: cfg.Logger}
	if needs.Elasticsearch && res.Search == nil {
		if res.Search, err = esclient.NewClient(cfg.Endpoints.Elasticsearch, cfg.Endpoints.ElasticsearchSecurity); err != nil {
			return fail(err)
		}
	}
	if needs.Postgres && res.DB == nil {
		pool, err := OpenPostgres(ctx, cfg.Endpoints)
		if err != nil {
			return fail(fmt.Errorf("read-model database: %w", err))
		}
		c.closers = append(c.closers, func() error { pool.Close(); return nil })
		res.DB = pool
	}
	if needs.Parking {
		// Shared: each read and search model parks under its own name.
		if res.Parking, err = parking.New(parking.Config{DB: res.DB, Logger: cfg.Logger}); err != nil {
			return fail(err)
		}
	}
	pub, closePub, err := publisher(cfg.Publisher, cfg.Endpoints, "eventpipe-consume", cfg.Logger)
	if err != nil {
		return fail(err)
	}
	c.closers = append(c.closers, closePub)
	res.Publisher = pub
	for _, name := range cfg.Names {
		cons, _ := cfg.Catalog.Consumer(name)
		run, err := cons.Build(ctx, res)
		if err != nil {
			return fail(fmt.Errorf("consumer %s: %w", name, err))
		}
		c.runs = append(c.runs, run)
	}
	if err := c.buildChecks(ctx, cfg, store, res.DB, res.Search, topics); err != nil {
		return fail(err)
	}
	if res.DB != nil {
		// What each consumer is now, against what it was at its last
		// start (`eventpipe status` shows the changes).
		if err := RecordDefinitions(ctx, res.DB, cfg.Catalog, topics, cfg.Names, cfg.Logger); err != nil {
			if !isUndefinedTable(err) {
				return fail(err)
			}
			cfg.Logger.WarnContext(ctx, "consumer definitions not recorded: the database lacks consumer_definitions; run `eventpipe migrate`", "err", err)
		}
	}
	return c, nil
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

// buildChecks prepares AddChecks' readiness checks: the consumer groups
// (unless NoKafka), the events table (the default store), the
// read-model database and the search cluster (when a consumer needs
// them).
func (c *Consumers) buildChecks(ctx context.Context, cfg ConsumersConfig, store eventstore.Store, db *pgxpool.Pool, search *esclient.Client, topics bus.Topics) error {
	c.ready = map[string]health.Check{}
	if !cfg.NoKafka {
		var groups []readyGroup
		for _, name := range cfg.Names {
			cons, _ := cfg.Catalog.Consumer(name)
			info := cons.Describe(topics)
			groups = append(groups, readyGroup{group: info.Group, topicPrefix: info.TopicPrefix})
		}
		reader, err := kafka.NewOffsetReader(kafka.Cluster{Brokers: cfg.Endpoints.KafkaBrokers, Security: cfg.Endpoints.Kafka})
		if err != nil {
			return err
		}
		c.closers = append(c.closers, func() error { reader.Close(); return nil })
		c.ready[CheckKafka] = groupsCheck(reader, groups)
	}
	if cfg.Store == nil && store != nil {
		ddb, err := OpenDynamoDB(ctx, cfg.Endpoints)
		if err != nil {
			return err
		}
		c.ready[CheckDynamoDB] = tableCheck(ddb, cfg.Endpoints.EventsTable)
	}
	if db != nil {
		c.ready[CheckPostgres] = func(ctx context.Context) error { return db.Ping(ctx) }
	}
	if search != nil {
		c.ready[CheckSearch] = searchCheck(search)
	}
	return nil
}

// AddChecks adds the consumers' checks to p: live from the start of Run
// until it fails (a clean stop stays live); ready
// while every consumer group is Stable with members (the brokers
// answer and the groups have formed), the events table answers, the
// read-model database answers a ping and the search cluster's health is
// not red (those the consumers use).
func (c *Consumers) AddChecks(p *health.Probes) {
	p.AddLive(CheckRunning, func(context.Context) error {
		if !c.running.Load() {
			return errors.New("the consumers do not run")
		}
		return nil
	})
	for _, name := range sortedKeys(c.ready) {
		p.AddReady(name, c.ready[name])
	}
}

// Run runs every consumer until ctx ends or one of them fails.
func (c *Consumers) Run(ctx context.Context) error {
	c.running.Store(true)
	g, ctx := errgroup.WithContext(ctx)
	for _, run := range c.runs {
		g.Go(func() error { return run.Run(ctx) })
	}
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		c.running.Store(false) // a clean stop (a drain) stays live to its end
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
// id order), for a new read model's catch-up and for replay. The
// DynamoDB store and eventstore/memstore implement eventstore.TypeReader.
func StoreHistory(store eventstore.TypeReader) projections.HistoryPage {
	return func(ctx context.Context, eventType, after, cursor string) ([]eventstore.Envelope, string, error) {
		p, err := store.ListByType(ctx, eventstore.TypeQuery{EventType: eventType, After: after, Cursor: cursor, Limit: 1000})
		return p.Events, p.Next, err
	}
}
