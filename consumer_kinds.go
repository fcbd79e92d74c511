package eventpipe

import (
	"context"
	"fmt"
	"slices"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/eventpipe/eventpipe/analytics/aggregator"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/internal/dynamoclient"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/elastic"
	"github.com/eventpipe/eventpipe/sagas"
	"github.com/eventpipe/eventpipe/snapshots"
)

// ReadModel is the Consumer of a Postgres read model: a
// projections.Runner in the group <prefix>projection.<name>, parking its
// permanent failures. It starts from the event store's history by default
// (bus.StartHistory) when the projection names its event types
// (projections.EventTyper), else from the topics' oldest records.
func ReadModel(p projections.Projection) Consumer { return readModel{p} }

type readModel struct{ p projections.Projection }

func (m readModel) Name() string { return m.p.Name() }

func (m readModel) Describe(t bus.Topics) ConsumerInfo {
	info := projectionInfo(t, KindReadModel, m.p.Name(), m.p.AggregateTypes(), canCatchUp(m.p), Needs{Postgres: true, Parking: true})
	if et, ok := m.p.(projections.EventTyper); ok {
		info.EventTypes = et.EventTypes()
	}
	info.Version, info.Fingerprint = projections.VersionOf(m.p), readModelFingerprint(m.p)
	return info
}

func (m readModel) Build(ctx context.Context, r Resources) (Runnable, error) {
	a, err := projections.NewApplier(projections.ApplierConfig{DB: r.DB, Store: r.Store, Projection: m.p, Logger: r.Logger})
	if err != nil {
		return nil, err
	}
	var rebuild func(context.Context) error
	if _, ok := m.p.(projections.Rebuildable); ok && r.History != nil && !r.NoAutoRebuild {
		// Into a shadow schema beside the live one, resumed after a
		// kill, swapped in when caught up (projections.Replay).
		rebuild = func(ctx context.Context) error {
			_, err := projections.Replay(ctx, projections.ReplayConfig{DB: r.DB, Store: r.Store, History: r.History, Projection: m.p, Resume: true,
				CreateTables: func(ctx context.Context, schema string) error {
					_, _, err := MigratePostgres(ctx, r.DB.Config().ConnConfig, schema, r.Logger, m.p)
					return err
				}, Logger: r.Logger})
			return err
		}
	}
	return newProjectionRunner(r, a, m.Describe(r.Topics), rebuild)
}

// canCatchUp reports whether p names its event types.
func canCatchUp(p projections.Projection) bool {
	t, ok := p.(projections.EventTyper)
	return ok && len(t.EventTypes()) > 0
}

// projectionInfo describes a read or search model.
func projectionInfo(t bus.Topics, kind ConsumerKind, name string, aggTypes []string, catchUp bool, needs Needs) ConsumerInfo {
	info := ConsumerInfo{Kind: kind, Group: projections.ConsumerGroup(t, name), PoisonTopic: projections.PoisonTopic(t, name),
		DefaultStart: bus.StartEarliest, Needs: needs}
	if catchUp {
		info.DefaultStart = bus.StartHistory
	}
	for _, at := range aggTypes {
		if topic := t.Events(at); !slices.Contains(info.Topics, topic) {
			info.Topics = append(info.Topics, topic)
		}
	}
	return info
}

// newProjectionRunner builds the Runner of a read or search model.
func newProjectionRunner(r Resources, a projections.Sink, info ConsumerInfo, rebuild func(context.Context) error) (Runnable, error) {
	start := r.Start.Or(info.DefaultStart)
	if start.IsHistory() && !info.DefaultStart.IsHistory() {
		return nil, fmt.Errorf("eventpipe: %s %s: start history: it does not name its event types, so it cannot catch up from the event store", info.Kind, a.Name())
	}
	return projections.NewRunner(projections.RunnerConfig{Applier: a, NewSubscriber: r.NewSubscriber, Brokers: r.Endpoints.KafkaBrokers, KafkaSecurity: r.Endpoints.Kafka, KafkaInstanceID: r.Endpoints.KafkaInstanceID,
		Topics: r.Topics, Publisher: r.Publisher, Parking: r.Parking, History: r.History, Start: start, Upcasters: r.upcasters(), Opener: r.Opener, Rebuild: rebuild,
		AggregateTypeOf: r.Catalog.aggregateTypeOfEvent,
		Registerer:      r.registerer("projection", a.Name()), Logger: r.Logger})
}

// SearchModel is the Consumer of an Elasticsearch read model: a
// projections.Runner in the group <prefix>projection.<name> writing
// through the alias elastic.Alias(prefix, name), whose index it creates
// when missing. It starts from the event store's history by default.
func SearchModel(p elastic.Projection) Consumer { return searchModel{p} }

type searchModel struct{ p elastic.Projection }

func (m searchModel) Name() string { return m.p.Name() }

func (m searchModel) Describe(t bus.Topics) ConsumerInfo {
	info := projectionInfo(t, KindSearchModel, m.p.Name(), m.p.AggregateTypes(), len(m.p.EventTypes()) > 0, Needs{Elasticsearch: true, Parking: true})
	info.EventTypes, info.Version, info.Fingerprint = m.p.EventTypes(), projections.VersionOf(m.p), jsonFingerprint(m.p.IndexBody())
	return info
}

func (m searchModel) Build(ctx context.Context, r Resources) (Runnable, error) {
	alias := elastic.Alias(r.Topics.Prefix, m.p.Name())
	if err := elastic.EnsureIndex(ctx, r.Search, m.p, alias); err != nil {
		return nil, err
	}
	catchUpIndex := elastic.Alias(r.Topics.Prefix, elastic.DefaultCatchUpIndex)
	a, err := elastic.NewApplier(elastic.ApplierConfig{Client: r.Search, Store: r.Store, Projection: m.p, Index: alias,
		CatchUpIndex: catchUpIndex, Logger: r.Logger})
	if err != nil {
		return nil, err
	}
	var rebuild func(context.Context) error
	if len(m.p.EventTypes()) > 0 && r.History != nil && !r.NoAutoRebuild {
		// Into a new index beside the alias's, resumed after a kill,
		// the alias moved to it when caught up (elastic.Replay).
		rebuild = func(ctx context.Context) error {
			_, err := elastic.Replay(ctx, elastic.ReplayConfig{Client: r.Search, Store: r.Store, History: r.History, Projection: m.p,
				Alias: alias, CatchUpIndex: catchUpIndex, Resume: true, Logger: r.Logger})
			return err
		}
	}
	return newProjectionRunner(r, a, m.Describe(r.Topics), rebuild)
}

// Saga is the Consumer of the saga d (package sagas), named
// SagaConsumer(d.SagaName()): a sagas.Runner in the group
// <prefix>saga.<name>, its state in Postgres. It acts on nothing
// published before its group first started (bus.StartLatest) unless
// told otherwise.
func Saga(d sagas.Definition) Consumer { return saga{d} }

type saga struct{ d sagas.Definition }

func (s saga) Name() string { return SagaConsumer(s.d.SagaName()) }

func (s saga) Describe(t bus.Topics) ConsumerInfo {
	return ConsumerInfo{Kind: KindSaga, Group: sagas.ConsumerGroup(t, s.d.SagaName()), PoisonTopic: sagas.PoisonTopic(t, s.d.SagaName()),
		Topics: s.d.Topics(t), DefaultStart: bus.StartLatest, Needs: Needs{Postgres: true}}
}

func (s saga) Build(ctx context.Context, r Resources) (Runnable, error) {
	info := s.Describe(r.Topics)
	start, err := sideEffectStart(info.Kind, s.Name(), r.Start.Or(info.DefaultStart))
	if err != nil {
		return nil, err
	}
	if len(r.CommandKey) == 0 {
		r.Logger.Warn("no command key: the saga's commands are not signed, and any client can send one under its ids (set EVENTPIPE_COMMAND_KEY_FILE)", "saga", s.d.SagaName())
	}
	sc := sagas.Config{Saga: s.d, DB: r.DB, Publisher: r.Publisher, Outcomes: r.Store, CommandKey: r.CommandKey, NewSubscriber: r.NewSubscriber,
		Brokers: r.Endpoints.KafkaBrokers, KafkaSecurity: r.Endpoints.Kafka, KafkaInstanceID: r.Endpoints.KafkaInstanceID, Topics: r.Topics, Upcasters: r.upcasters(), Opener: r.Opener, Registerer: r.registerer("saga", s.d.SagaName()), Logger: r.Logger}
	runner, err := sagas.New(sc)
	if err != nil {
		return nil, err
	}
	return r.startThenRun(info.Group, fixedTopics(info.Topics), start, runner.Run), nil
}

// AnalyticsAggregator names the analytics aggregation consumer
// (analytics/aggregator) among the consumers NewConsumers runs: it keeps
// the sessions and the hourly and daily aggregations of the analytics
// table from the analytics.<source> topics.
const AnalyticsAggregator = "analytics"

// Aggregator is the Consumer of the analytics aggregation consumer, named
// AnalyticsAggregator, in the group <prefix>analytics-aggregator on every
// analytics topic. Its aggregations are a read model of the topics: it
// starts at their oldest records by default.
func Aggregator() Consumer { return aggregatorConsumer{} }

type aggregatorConsumer struct{}

func (aggregatorConsumer) Name() string { return AnalyticsAggregator }

func (aggregatorConsumer) Describe(t bus.Topics) ConsumerInfo {
	return ConsumerInfo{Kind: KindAggregator, Group: t.Prefix + aggregator.DefaultGroup, PoisonTopic: t.Poison(aggregator.DefaultGroup),
		TopicPrefix: t.Prefix + bus.AnalyticsPrefix, DefaultStart: bus.StartEarliest}
}

func (a aggregatorConsumer) Build(ctx context.Context, r Resources) (Runnable, error) {
	info := a.Describe(r.Topics)
	start, err := sideEffectStart(info.Kind, AnalyticsAggregator, r.Start.Or(info.DefaultStart))
	if err != nil {
		return nil, err
	}
	agg, err := newAggregator(ctx, r)
	if err != nil {
		return nil, err
	}
	topics := func(ctx context.Context) ([]string, error) {
		return topicsWithPrefix(ctx, kafka.Cluster{Brokers: r.Endpoints.KafkaBrokers, Security: r.Endpoints.Kafka}, info.TopicPrefix)
	}
	return r.startThenRun(info.Group, topics, start, agg.Run), nil
}

// Snapshotter names the snapshot consumer (package snapshots) among the
// consumers NewConsumers runs: in its own consumer group
// (<prefix>snapshots) it reads the events topics of every domain of the
// catalogue that can be snapshotted and writes an aggregate's #SNAPSHOT
// every ConsumersConfig.SnapshotEvery events, off the write path.
const Snapshotter = "snapshots"

// SnapshotConsumer is the Consumer of the snapshot consumer of the
// domains of c, named Snapshotter. It starts at the topics' oldest
// records by default.
func SnapshotConsumer(c *Catalog) Consumer { return snapshotter{c} }

type snapshotter struct{ c *Catalog }

func (snapshotter) Name() string { return Snapshotter }

func (s snapshotter) Describe(t bus.Topics) ConsumerInfo {
	info := ConsumerInfo{Kind: KindSnapshotter, Group: t.Prefix + snapshots.DefaultGroup, PoisonTopic: t.Poison(snapshots.DefaultGroup),
		DefaultStart: bus.StartEarliest}
	for _, at := range s.c.AggregateTypes() {
		if s.c.domains[at].NewSnapshot != nil {
			info.Topics = append(info.Topics, t.Events(at))
		}
	}
	return info
}

func (s snapshotter) Build(ctx context.Context, r Resources) (Runnable, error) {
	info := s.Describe(r.Topics)
	start, err := sideEffectStart(info.Kind, Snapshotter, r.Start.Or(info.DefaultStart))
	if err != nil {
		return nil, err
	}
	aggs, err := snapshotFuncs(s.c, r.Store)
	if err != nil {
		return nil, err
	}
	snap, err := snapshots.New(snapshots.Config{Aggregates: aggs, Every: r.SnapshotEvery, NewSubscriber: r.NewSubscriber,
		Brokers: r.Endpoints.KafkaBrokers, KafkaSecurity: r.Endpoints.Kafka, KafkaInstanceID: r.Endpoints.KafkaInstanceID, Topics: r.Topics, Publisher: r.Publisher, Registerer: r.registerer("projection", Snapshotter), Logger: r.Logger})
	if err != nil {
		return nil, err
	}
	return r.startThenRun(info.Group, fixedTopics(info.Topics), start, snap.Run), nil
}

// topicsWithPrefix lists the topics of cluster whose name is prefix
// followed by at least one character, sorted: what the aggregation
// consumer subscribes to. It does not create topics.
func topicsWithPrefix(ctx context.Context, cluster kafka.Cluster, prefix string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	offsets, err := kafka.NewOffsetReader(cluster)
	if err != nil {
		return nil, err
	}
	defer offsets.Close()
	return offsets.TopicsWithPrefix(ctx, prefix)
}

// newAggregator builds the analytics aggregation consumer on r.
func newAggregator(ctx context.Context, r Resources) (*aggregator.Consumer, error) {
	ep := r.Endpoints
	db, err := dynamoclient.New(ctx, dynamoConfig(ep))
	if err != nil {
		return nil, err
	}
	return aggregator.New(aggregator.Config{
		Kafka:  kafka.SubscriberConfig{Brokers: ep.KafkaBrokers, Security: ep.Kafka, InstanceID: ep.KafkaInstanceID, ClientID: "eventpipe-analytics", Logger: watermill.NewSlogLogger(r.Logger)},
		Topics: r.Topics, Client: db, Table: ep.AnalyticsTable, Poison: r.Publisher,
		Registerer: r.registerer("projection", AnalyticsAggregator), Logger: r.Logger,
	})
}

// upcasters is the catalogue's upcaster registry, nil without a catalogue.
func (r Resources) upcasters() *eventstore.Upcasters {
	if r.Catalog == nil {
		return nil
	}
	return r.Catalog.Upcasters()
}
