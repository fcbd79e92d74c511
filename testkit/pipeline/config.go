package pipeline

import (
	"fmt"
	"log/slog"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/eventstore/memstore"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
)

// DefaultBuffer was Config.Buffer's default.
//
// Deprecated: Config.Buffer is unused.
const DefaultBuffer = 256

// Config configures a Pipeline. The zero Config is usable: the built-in
// catalogue's command handlers and the relay, with no consumers.
type Config struct {
	// Catalog holds the domains, consumers and upcasters (default
	// eventpipe.Builtin()).
	Catalog *eventpipe.Catalog
	// TopicPrefix namespaces the topics as EVENTPIPE_TOPIC_PREFIX does
	// (default: that variable, as for every eventpipe.Endpoints; the
	// bus is the Pipeline's own, so it only changes the names).
	// Pipeline.Topics gives the namespace in use.
	TopicPrefix string
	// Store is the event store (default: a new memstore.Store with the
	// catalogue's schema). Give one to start from events of your own
	// (appended before Start, they are relayed too).
	Store *memstore.Store
	// Consumers names the catalogue's consumers to run
	// (Catalog.ConsumerNames), each in the way `eventpipe consume` runs
	// it, through eventpipe.NewConsumers, on the pipeline's Bus. Default:
	// none. The analytics aggregator cannot run here.
	Consumers []string
	// DB is the Postgres database of the consumers that need one (read
	// models, sagas, parking unless NoParking). Required when one of
	// Consumers does; it must be migrated (eventpipe.Migrate, or
	// migrations/postgres). The caller closes it.
	DB *pgxpool.Pool
	// Search is the Elasticsearch of the search models among Consumers.
	// Required when one of them is.
	Search *esclient.Client
	// NoParking poisons the read and search models' permanent failures
	// instead of parking them in DB (see eventpipe.ConsumersConfig).
	NoParking bool
	// SnapshotEvery is the snapshot consumer's N (default
	// snapshots.DefaultEvery).
	SnapshotEvery int64
	// CommandKey, when set, signs the sagas' commands and makes the
	// command handlers check them (see eventpipe.WriteSideConfig).
	CommandKey []byte
	// Middlewares wrap the command handlers' dispatcher (see
	// eventpipe.WriteSideConfig.Middlewares).
	Middlewares []message.HandlerMiddleware
	// Buffer was the GoChannel's buffer of messages per subscriber.
	//
	// Deprecated: unused; the Bus hands each subscriber one message at
	// a time. A negative Buffer is still refused.
	Buffer int64
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Catalog == nil {
		c.Catalog = eventpipe.Builtin()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first unusable field: an unknown or repeated
// consumer, one that cannot run in one process (the analytics
// aggregator), one without the database or Elasticsearch it needs, a
// short CommandKey or a negative Buffer or SnapshotEvery.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("pipeline: Config: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if c.Catalog == nil {
		return bad("Catalog", "is nil")
	}
	if c.Buffer < 0 {
		return bad("Buffer", "is %d, want ≥ 0", c.Buffer)
	}
	if c.SnapshotEvery < 0 {
		return bad("SnapshotEvery", "is %d, want ≥ 0", c.SnapshotEvery)
	}
	if n := len(c.CommandKey); n > 0 && n < commands.MinKeyLength {
		return bad("CommandKey", "has %d bytes, want at least %d", n, commands.MinKeyLength)
	}
	seen := map[string]bool{}
	for _, name := range c.Consumers {
		cons, ok := c.Catalog.Consumer(name)
		if !ok {
			return fmt.Errorf("pipeline: %w %q: %w", eventpipe.ErrUnknownConsumer, name,
				&eventstore.ValidationError{Field: "Consumers", Reason: fmt.Sprintf("%q is not in the catalog (have %v)", name, c.Catalog.ConsumerNames())})
		}
		if seen[name] {
			return bad("Consumers", "consumer %q named twice", name)
		}
		seen[name] = true
		info := cons.Describe(bus.Topics{Prefix: c.TopicPrefix})
		switch {
		case info.Kind == eventpipe.KindAggregator:
			return bad("Consumers", "consumer %q (%s) needs DynamoDB and Kafka and cannot run in the pipeline", name, info.Kind)
		case info.Needs.Postgres && c.DB == nil:
			return bad("DB", "is nil: consumer %q (%s) needs Postgres", name, info.Kind)
		case info.Needs.Parking && !c.NoParking && c.DB == nil:
			return bad("DB", "is nil: consumer %q (%s) parks its failures in Postgres: set DB, or NoParking", name, info.Kind)
		case info.Needs.Elasticsearch && c.Search == nil:
			return bad("Search", "is nil: consumer %q (%s) needs Elasticsearch", name, info.Kind)
		}
	}
	return nil
}
