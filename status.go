package eventpipe

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventpipe/eventpipe/analytics/aggregator"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/relay"
)

// StatusConfig configures Status.
type StatusConfig struct {
	// Catalog names the aggregate types and read models to look at
	// (default Builtin()).
	Catalog *Catalog
	// Endpoints give DynamoDB, the tables, Kafka and the topic prefix
	// (default EndpointsFromEnv()).
	Endpoints Endpoints
	// CommandGroup is the command handlers' consumer group (default
	// DefaultCommandGroup).
	CommandGroup string
}

// GroupStatus is one consumer group's position on its topics.
type GroupStatus struct {
	Group  string
	Topics []string
	// Committed sums the group's committed offsets; Newest the topics'
	// newest offsets; Lag the records not yet committed.
	Committed, Newest, Lag int64
	// PoisonTopic and Poisoned: the group's poison topic and how many
	// messages it holds.
	PoisonTopic string
	Poisoned    int64
}

// RelayStreamReport is one relay stream (RelayEvents, RelayAnalytics) as
// Status saw it.
type RelayStreamReport struct {
	// Name is the stream's name, as RelayStreams lists it.
	Name string
	// Stream and Leases: the table's stream and the relay's shard leases
	// on it (owner, checkpoint), as RelayStreamStatus returns them; empty
	// when Err is set.
	Stream string
	Leases []relay.Lease
	// PoisonTopic and Poisoned: the stream's poison topic
	// (relay.PoisonGroupFor) and how many records it holds.
	PoisonTopic string
	Poisoned    int64
	// Err says why the leases could not be read (for example a table that
	// does not exist); it is among StatusReport.Errors too.
	Err error
}

// StatusReport is what Status saw.
type StatusReport struct {
	// Relays has one report per relay stream, in RelayStreams order.
	Relays []RelayStreamReport
	// Groups: the command handlers' groups (one per commands topic), then
	// one per read model, then the analytics aggregation consumer's
	// (AnalyticsAggregator), whose topics are the analytics topics that
	// exist now.
	Groups []GroupStatus
	// Errors are the parts that could not be read (for example the relay's
	// leases before `eventpipe migrate`), each saying which.
	Errors []error
	Took   time.Duration
}

// Relay returns the report of relay stream name (RelayEvents,
// RelayAnalytics), or false when r has none.
func (r StatusReport) Relay(name string) (RelayStreamReport, bool) {
	i := slices.IndexFunc(r.Relays, func(s RelayStreamReport) bool { return s.Name == name })
	if i < 0 {
		return RelayStreamReport{}, false
	}
	return r.Relays[i], true
}

// Status reads, once, where the pipeline stands: for each relay stream its
// leases and poisoned records, and for the command handlers, every read
// model of the catalogue and the analytics aggregation consumer their
// consumer group's position, lag and poisoned messages. A part that cannot
// be read (a missing table, an unreachable broker) is reported in Errors,
// and a relay stream's also in its report; the rest is still returned.
func Status(ctx context.Context, cfg StatusConfig) StatusReport {
	logger := slog.New(slog.DiscardHandler)
	processDefaults(&cfg.Catalog, &cfg.Endpoints, &logger)
	if cfg.CommandGroup == "" {
		cfg.CommandGroup = DefaultCommandGroup
	}
	start := time.Now()
	ep := cfg.Endpoints
	topics := bus.Topics{Prefix: ep.TopicPrefix}
	var r StatusReport
	for _, name := range RelayStreams() {
		rel := RelayStreamReport{Name: name, PoisonTopic: topics.Poison(relay.PoisonGroupFor(name))}
		var err error
		if rel.Stream, rel.Leases, err = RelayStreamStatus(ctx, ep, name); err != nil {
			rel.Err = fmt.Errorf("relay %s leases: %w", name, err)
			r.Errors = append(r.Errors, rel.Err)
		}
		r.Relays = append(r.Relays, rel)
	}
	var groups []GroupStatus
	for _, t := range cfg.Catalog.AggregateTypes() {
		topic := topics.Commands(t)
		groups = append(groups, GroupStatus{Group: commandGroup(cfg.CommandGroup, topic), Topics: []string{topic},
			PoisonTopic: topics.Poison(cfg.CommandGroup)})
	}
	for _, name := range cfg.Catalog.ModelNames() {
		aggTypes, _ := cfg.Catalog.modelAggregateTypes(name)
		g := GroupStatus{Group: projections.ConsumerGroup(topics, name), PoisonTopic: projections.PoisonTopic(topics, name)}
		for _, t := range aggTypes {
			g.Topics = append(g.Topics, topics.Events(t))
		}
		groups = append(groups, g)
	}
	// The aggregation consumer's group, as NewConsumers runs it: every
	// analytics topic, one per source, found by prefix as it does.
	agg := GroupStatus{Group: topics.Prefix + aggregator.DefaultGroup, PoisonTopic: topics.Poison(aggregator.DefaultGroup)}
	var err error
	if agg.Topics, err = topicsWithPrefix(ctx, ep.KafkaBrokers, topics.Prefix+bus.AnalyticsPrefix); err != nil {
		r.Errors = append(r.Errors, fmt.Errorf("analytics topics: %w", err))
	}
	groups = append(groups, agg)

	var poisonTopics []string
	for _, rel := range r.Relays {
		poisonTopics = append(poisonTopics, rel.PoisonTopic)
	}
	for _, g := range groups {
		poisonTopics = append(poisonTopics, g.PoisonTopic)
	}
	counts, err := kafka.TopicMessages(ctx, ep.KafkaBrokers, poisonTopics)
	if err != nil {
		r.Errors = append(r.Errors, fmt.Errorf("poison topics: %w", err))
	}
	for i := range r.Relays {
		r.Relays[i].Poisoned = counts[r.Relays[i].PoisonTopic]
	}
	for _, g := range groups {
		g.Poisoned = counts[g.PoisonTopic]
		if len(g.Topics) == 0 {
			r.Groups = append(r.Groups, g) // no analytics topic yet: nothing to measure
			continue
		}
		rows, err := kafka.ConsumerLag(ctx, ep.KafkaBrokers, g.Group, g.Topics)
		if err != nil {
			r.Errors = append(r.Errors, fmt.Errorf("group %s: %w", g.Group, err))
		}
		for _, row := range rows {
			g.Newest += row.Newest
			g.Lag += row.Lag
			g.Committed += max(row.Committed, 0)
		}
		r.Groups = append(r.Groups, g)
	}
	r.Took = time.Since(start)
	return r
}

// topicsWithPrefix lists the topics whose name is prefix followed by at
// least one character, sorted: what the aggregation consumer subscribes
// to. It does not create topics.
func topicsWithPrefix(ctx context.Context, brokers []string, prefix string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sc := sarama.NewConfig()
	sc.Version = kafka.KafkaVersion
	sc.ClientID = "eventpipe-status"
	sc.Metadata.AllowAutoTopicCreation = false
	sc.Metadata.Retry.Max = 1
	sc.Metadata.Retry.Backoff = 100 * time.Millisecond
	client, err := sarama.NewClient(brokers, sc)
	if err != nil {
		return nil, fmt.Errorf("kafka client on %v: %w", brokers, err)
	}
	defer client.Close()
	all, err := client.Topics()
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	var out []string
	for _, t := range all {
		if strings.HasPrefix(t, prefix) && len(t) > len(prefix) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out, nil
}
