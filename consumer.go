package eventpipe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/parking"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
)

// ConsumerKind says what a consumer is; status and the CLI show it.
type ConsumerKind string

// The consumer kinds eventpipe brings. A user's own Consumer may name
// another.
const (
	KindReadModel   ConsumerKind = "read model"   // a Postgres read model (Catalog.AddReadModel)
	KindSearchModel ConsumerKind = "search model" // an Elasticsearch read model (Catalog.AddSearchModel)
	KindSaga        ConsumerKind = "saga"         // a process manager (Catalog.AddSaga)
	KindAggregator  ConsumerKind = "aggregator"   // the analytics aggregation consumer (AnalyticsAggregator)
	KindSnapshotter ConsumerKind = "snapshotter"  // the snapshot consumer (Snapshotter)
	KindHandler     ConsumerKind = "handler"      // a plain Watermill handler (Handler)
)

// Consumer is anything NewConsumers runs in a consumer group of its own:
// a read model, a search model, a saga, the analytics aggregator, the
// snapshotter, or a plain Watermill handler (Handler). Every kind is
// registered the same way (Catalog.AddConsumer; AddReadModel and the
// others wrap it), under a name unique across kinds, and gets the same
// treatment: its own group, its poison topic, eventpipe's middlewares
// (poison, retries, tracing), metrics on ConsumersConfig.Registerer, a
// start position for a group that never committed, and a row in
// operator.Status.
type Consumer interface {
	// Name identifies the consumer: `eventpipe consume <name>` runs it.
	Name() string
	// Describe says, without I/O, what the consumer is and reads in the
	// topic namespace t.
	Describe(t bus.Topics) ConsumerInfo
	// Build builds the consumer on the shared resources r, which hold
	// what Describe's Needs asked for.
	Build(ctx context.Context, r Resources) (Runnable, error)
}

// ConsumerInfo describes a Consumer.
type ConsumerInfo struct {
	Kind ConsumerKind
	// Group is its consumer group and PoisonTopic where the messages it
	// can never handle go.
	Group, PoisonTopic string
	// Topics are the topics it reads. A consumer that reads every topic
	// whose name starts with a prefix (the analytics aggregator) gives
	// TopicPrefix instead.
	Topics      []string
	TopicPrefix string
	// EventTypes are the event types it applies, for a consumer that
	// names them (a read or search model); Version is its declared
	// version (projections.Versioned; 0 for a kind without one) and
	// Fingerprint a hash of its schema (a read model's tables and
	// migrations, a search model's index settings and mappings). They
	// are recorded with Topics each time it starts (RecordDefinitions).
	EventTypes  []string
	Version     int
	Fingerprint string
	// DefaultStart is where its group starts when it never committed and
	// ConsumersConfig.Start does not say (see bus.Start).
	DefaultStart bus.Start
	// Needs are the shared resources Build uses.
	Needs Needs
}

// Needs are the shared resources a Consumer's Build uses; NewConsumers
// opens each once for all the consumers it runs.
type Needs struct {
	// Postgres: Resources.DB.
	Postgres bool
	// Elasticsearch: Resources.Search.
	Elasticsearch bool
	// Parking: Resources.Parking, unless ConsumersConfig.NoParking (it
	// lives in Postgres).
	Parking bool
}

// Runnable is a built Consumer.
type Runnable interface {
	// Run consumes until ctx ends (then it returns nil) or it fails.
	Run(ctx context.Context) error
}

// RunFunc makes a function a Runnable.
type RunFunc func(ctx context.Context) error

// Run calls f.
func (f RunFunc) Run(ctx context.Context) error { return f(ctx) }

// Resources are what the consumers NewConsumers runs share, opened once.
type Resources struct {
	Catalog   *Catalog
	Endpoints Endpoints
	Topics    bus.Topics
	// Store is the event store (gap repair, outcomes, snapshots) and
	// History its events by type (catch-up; nil when Store is not an
	// eventstore.TypeReader).
	Store   eventstore.Store
	History projections.HistoryPage
	// Opener opens the sealed personal data of what consumers read from
	// the bus: the Store's sealer (nil when it seals nothing).
	Opener eventstore.Opener
	// DB and Search: set when a consumer's Needs asked for them.
	DB     *pgxpool.Pool
	Search *esclient.Client
	// Publisher publishes poisoned messages and the sagas' commands.
	Publisher message.Publisher
	// NewSubscriber, when set, replaces each kind's default Kafka
	// subscriber (tests hand out Watermill's GoChannel).
	NewSubscriber bus.SubscriberConstructor
	// Parking parks a read or search model's permanent failures; nil:
	// they are poisoned.
	Parking *parking.Store
	// Start overrides the consumer's DefaultStart when not zero.
	Start bus.Start
	// SnapshotEvery is the snapshotter's N (ConsumersConfig).
	SnapshotEvery int64
	// NoAutoRebuild: a read or search model whose version changed is
	// not rebuilt by its consumer (ConsumersConfig.NoAutoRebuild).
	NoAutoRebuild bool
	// CommandKey signs the sagas' commands (ConsumersConfig).
	CommandKey []byte
	// Registerer receives metrics (nil: none); each kind labels its own
	// (projection=, saga=, consumer=<name>).
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// registerer is r.Registerer labelled with label=name, or nil.
func (r Resources) registerer(label, name string) prometheus.Registerer {
	if r.Registerer == nil {
		return nil
	}
	return prometheus.WrapRegistererWith(prometheus.Labels{label: name}, r.Registerer)
}

// ErrNameTaken is wrapped by a *NameTakenError.
var ErrNameTaken = errors.New("name already registered")

// NameTakenError is returned when a consumer, a domain or an HTTP
// resource is registered under a name the catalogue already holds.
// errors.Is(err, ErrNameTaken) matches it.
type NameTakenError struct {
	Name string
	// Kind is what was being registered, Holder what holds the name.
	Kind, Holder string
}

func (e *NameTakenError) Error() string {
	if e.Kind == e.Holder {
		return fmt.Sprintf("eventpipe: %s %q registered twice", e.Kind, e.Name)
	}
	return fmt.Sprintf("eventpipe: %s %q: the name is taken by a %s", e.Kind, e.Name, e.Holder)
}

// Unwrap returns ErrNameTaken.
func (e *NameTakenError) Unwrap() error { return ErrNameTaken }

// AddConsumer registers c under its name, which must be a valid name
// (eventstore.ValidateName) not taken by another consumer of any kind
// (a *NameTakenError).
func (c *Catalog) AddConsumer(cons Consumer) error {
	if cons == nil {
		return errors.New("eventpipe: consumer is nil")
	}
	name := cons.Name()
	kind := cons.Describe(bus.Topics{}).Kind
	if err := eventstore.ValidateName("consumer", name); err != nil {
		return fmt.Errorf("eventpipe: %s: %w", kind, err)
	}
	if held, dup := c.consumers[name]; dup {
		return &NameTakenError{Name: name, Kind: string(kind), Holder: string(held.Describe(bus.Topics{}).Kind)}
	}
	c.consumers[name] = cons
	return nil
}

// Consumer returns the consumer registered under name.
func (c *Catalog) Consumer(name string) (Consumer, bool) {
	cons, ok := c.consumers[name]
	return cons, ok
}

// ConsumerNames returns the names of every registered consumer, sorted:
// what NewConsumers and `eventpipe consume` take.
func (c *Catalog) ConsumerNames() []string { return sortedKeys(c.consumers) }

// ConsumerNames lists what NewConsumers can run: every consumer of c.
func ConsumerNames(c *Catalog) []string { return c.ConsumerNames() }

// startGroup sets a group that never committed at start (see
// kafka.StartGroup) on r's brokers: nothing without brokers or topics.
func (r Resources) startGroup(ctx context.Context, group string, topics []string, start bus.Start) error {
	if len(r.Endpoints.KafkaBrokers) == 0 || len(topics) == 0 {
		return nil
	}
	_, err := kafka.StartGroup(ctx, kafka.GroupStartConfig{Brokers: r.Endpoints.KafkaBrokers, Security: r.Endpoints.Kafka, Group: group, Topics: topics, Start: start, Logger: r.Logger})
	return err
}

// startThenRun is a Runnable that starts the group at start, then runs.
func (r Resources) startThenRun(group string, topics func(context.Context) ([]string, error), start bus.Start, run func(context.Context) error) Runnable {
	return RunFunc(func(ctx context.Context) error {
		ts, err := topics(ctx)
		if err != nil {
			return err
		}
		if err := r.startGroup(ctx, group, ts, start); err != nil {
			return err
		}
		return run(ctx)
	})
}

// fixedTopics returns ts.
func fixedTopics(ts []string) func(context.Context) ([]string, error) {
	return func(context.Context) ([]string, error) { return ts, nil }
}

// sideEffectStart is the start of a consumer with side effects: history
// is refused (it cannot read the store's history).
func sideEffectStart(kind ConsumerKind, name string, s bus.Start) (bus.Start, error) {
	if s.IsHistory() {
		return s, fmt.Errorf("eventpipe: %s %s: %w", kind, name, &eventstore.ValidationError{Field: "start",
			Reason: "history is for read and search models (they catch up from the event store); use earliest, latest or a time"})
	}
	return s, nil
}
