package eventpipe

import (
	"context"
	"fmt"
	"log/slog"
	"time"

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

// StatusReport is what Status saw.
type StatusReport struct {
	// Stream and Leases: the events table's stream and the relay's shard
	// leases (owner, checkpoint), as RelayStatus returns them.
	Stream string
	Leases []relay.Lease
	// RelayPoisoned counts the records on the relay's poison topic.
	RelayPoisoned int64
	// Groups: the command handlers' groups (one per commands topic), then
	// one per read model.
	Groups []GroupStatus
	// Errors are the parts that could not be read (for example the relay's
	// leases before `eventpipe migrate`), each saying which.
	Errors []error
	Took   time.Duration
}

// Status reads, once, where the pipeline stands: the relay's leases, and
// for the command handlers and every read model of the catalogue their
// consumer group's position, lag and poisoned messages. A part that cannot
// be read is reported in Errors; the rest is still returned.
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
	var err error
	if r.Stream, r.Leases, err = RelayStatus(ctx, ep); err != nil {
		r.Errors = append(r.Errors, fmt.Errorf("relay leases: %w", err))
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
	poisonTopics := []string{topics.Poison(relay.DefaultPoisonGroup)}
	for _, g := range groups {
		poisonTopics = append(poisonTopics, g.PoisonTopic)
	}
	counts, err := kafka.TopicMessages(ctx, ep.KafkaBrokers, poisonTopics)
	if err != nil {
		r.Errors = append(r.Errors, fmt.Errorf("poison topics: %w", err))
	}
	r.RelayPoisoned = counts[topics.Poison(relay.DefaultPoisonGroup)]
	for _, g := range groups {
		g.Poisoned = counts[g.PoisonTopic]
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
