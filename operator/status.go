package operator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/parking"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/elastic"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
	"github.com/eventpipe/eventpipe/relay"
	"github.com/eventpipe/eventpipe/sagas"
)

// StatusConfig configures Status.
type StatusConfig struct {
	// Process: the catalogue (the aggregate types, consumers and sagas to
	// look at), the endpoints (DynamoDB, the tables, Kafka, the topic
	// prefix, Postgres) and the logger (defaults: see eventpipe.Process,
	// but the logger's is none: Status reports, it does not log).
	eventpipe.Process
	// CommandGroup is the command handlers' consumer group (default
	// eventpipe.DefaultCommandGroup).
	CommandGroup string
	// DB holds the parked events (default: eventpipe.OpenPostgres(Endpoints),
	// closed before Status returns). Its search_path picks the schema
	// (see eventpipe.PostgresSchema).
	DB *pgxpool.Pool
}

// Validate reports, as an *eventstore.ValidationError, the settings from
// the environment that could not be read (eventpipe.Process.Validate) and
// a CommandGroup whose poison topic Kafka would refuse, the defaults
// filled (as Status fills them).
func (c StatusConfig) Validate() error {
	if err := validProcess(&c.Process); err != nil {
		return err
	}
	if c.CommandGroup == "" {
		c.CommandGroup = eventpipe.DefaultCommandGroup
	}
	if err := bus.ValidateTopic(bus.Topics{Prefix: c.Endpoints.TopicPrefix}.Poison(c.CommandGroup)); err != nil {
		return invalid("CommandGroup", err.Error())
	}
	return nil
}

// setDefaults fills cfg's defaults; it returns Endpoints.Err.
func (c *StatusConfig) setDefaults() error {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c.FillProcess()
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
	// Consumer and Kind: the consumer of the catalogue whose group this
	// is, and its kind; empty for the command handlers' groups.
	Consumer string
	Kind     eventpipe.ConsumerKind
	// Projection names the read or search model whose group this is; it
	// is empty for the other kinds.
	Projection string
	// Saga names the saga whose group this is (see StatusReport.Sagas).
	Saga string
	// Definition is the consumer's definition as recorded at its last
	// start, with what that start changed (nil when none is recorded:
	// never started with the read-model database, or before `eventpipe
	// migrate` brought migration 013); Declared is what the catalogue
	// says it is now (eventpipe.DefinitionOf). Declared unlike
	// Definition.Definition is a change not deployed yet.
	Definition *eventpipe.RecordedDefinition
	Declared   eventpipe.Definition
	// Model is, for a read or search model, where its build stands: the
	// version that built the rows serving reads and a rebuild under way
	// with its progress (nil for the other kinds, or when it could not
	// be read: see StatusReport.Errors).
	Model *projections.ModelState
	// Parked is, for a projection's group, how many events the
	// projection parked and for how many aggregates (package parking;
	// `eventpipe parked list` shows them). It is zero when
	// StatusReport.ParkedErr is set.
	Parked parking.Counts
}

// RelayStreamReport is one relay stream (eventpipe.RelayEvents,
// eventpipe.RelayAnalytics) as Status saw it.
type RelayStreamReport struct {
	// Name is the stream's name, as eventpipe.RelayStreams lists it.
	Name string
	// Stream and Leases: the table's stream and the relay's shard leases
	// on it (owner, checkpoint), as eventpipe.RelayStreamStatus returns
	// them; empty when Err is set.
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
	// Relays has one report per relay stream, in eventpipe.RelayStreams order.
	Relays []RelayStreamReport
	// Groups: the command handlers' groups (one per commands topic), then
	// one per consumer of the catalogue, any kind, in name order (a
	// consumer that reads the topics with a prefix, such as the analytics
	// aggregator, has the topics that exist now).
	Groups []GroupStatus
	// Sagas has one report per saga of the catalogue, in name order.
	Sagas []SagaReport
	// ParkedErr says why the projections' parked events could not be
	// counted (for example parking.ErrNoTable before `eventpipe migrate`);
	// it is among Errors too.
	ParkedErr error
	// OperatorActions are the latest operator actions (poison redrive,
	// parked reapply and skip, saga abort and retry, recalculate,
	// analytics recount), newest first, at most StatusOperatorActions;
	// OperatorActionsErr says why they could not be read (it is among
	// Errors too).
	OperatorActions    []OperatorAction
	OperatorActionsErr error
	// Errors are the parts that could not be read (for example the relay's
	// leases before `eventpipe migrate`), each saying which.
	Errors []error
	Took   time.Duration
}

// SagaReport is one saga's instances as Status saw them.
type SagaReport struct {
	Name    string
	Summary sagas.Summary
	// Err says why they could not be counted (for example no saga tables
	// before `eventpipe migrate`); it is among StatusReport.Errors too.
	Err error
}

// Relay returns the report of relay stream name (eventpipe.RelayEvents,
// eventpipe.RelayAnalytics), or false when r has none.
func (r StatusReport) Relay(name string) (RelayStreamReport, bool) {
	i := slices.IndexFunc(r.Relays, func(s RelayStreamReport) bool { return s.Name == name })
	if i < 0 {
		return RelayStreamReport{}, false
	}
	return r.Relays[i], true
}

// Status reads, once, where the pipeline stands: for each relay stream its
// leases and poisoned records, for the command handlers and every consumer
// of the catalogue their consumer group's position, lag and poisoned
// messages, for every read and search model
// what it parked, and for every saga its instances (running, finished by
// outcome), timeouts and effects not run yet. A part that cannot be read (a
// missing table, an unreachable broker or database) is reported in Errors,
// a relay stream's also in its report and the parked events' in ParkedErr;
// the rest is still returned. Kafka is read with one client, in one pass
// over every group and topic (kafka.OffsetReader): a few broker round
// trips, however many groups there are.
func Status(ctx context.Context, cfg StatusConfig) StatusReport {
	r, _, _ := readStatus(ctx, cfg, nil)
	return r
}

// readStatus is Status, and also the newest offsets of the topics
// newestOf summed over their partitions (0 for a topic that does not
// exist), read in the same pass with the same Kafka client; the error
// says why those could not be read (it is among the report's Errors too
// when the whole Kafka reading failed).
func readStatus(ctx context.Context, cfg StatusConfig, newestOf []string) (StatusReport, map[string]int64, error) {
	envErr := cfg.setDefaults()
	logger := cfg.Logger
	if cfg.CommandGroup == "" {
		cfg.CommandGroup = eventpipe.DefaultCommandGroup
	}
	start := time.Now()
	ep := cfg.Endpoints
	topics := bus.Topics{Prefix: ep.TopicPrefix}
	var r StatusReport
	if err := cfg.Validate(); err != nil {
		r.Errors = append(r.Errors, fmt.Errorf("settings: %w", err))
		if envErr == nil { // a field of cfg, not the environment: nothing to read with it
			r.Took = time.Since(start)
			return r, nil, err
		}
	}
	// One Kafka client for the whole reading: every group's committed
	// offsets, every topic's offsets and the topics found by prefix.
	offsets, kafkaErr := kafka.NewOffsetReader(kafka.Cluster{Brokers: ep.KafkaBrokers, Security: ep.Kafka})
	if kafkaErr != nil {
		kafkaErr = fmt.Errorf("kafka offsets: %w", kafkaErr)
		r.Errors = append(r.Errors, kafkaErr)
	} else {
		defer offsets.Close()
	}
	for _, name := range eventpipe.RelayStreams() {
		rel := RelayStreamReport{Name: name, PoisonTopic: topics.Poison(relay.PoisonGroupFor(name))}
		var err error
		if rel.Stream, rel.Leases, err = eventpipe.RelayStreamStatus(ctx, ep, name); err != nil {
			rel.Err = fmt.Errorf("relay %s leases: %w", name, err)
			r.Errors = append(r.Errors, rel.Err)
		}
		r.Relays = append(r.Relays, rel)
	}
	var groups []GroupStatus
	for _, t := range cfg.Catalog.AggregateTypes() {
		topic := topics.Commands(t)
		groups = append(groups, GroupStatus{Group: eventpipe.CommandGroup(cfg.CommandGroup, topic), Topics: []string{topic},
			PoisonTopic: topics.Poison(cfg.CommandGroup)})
	}
	sagaOf := map[string]string{} // consumer name → saga name
	for _, name := range cfg.Catalog.SagaNames() {
		sagaOf[eventpipe.SagaConsumer(name)] = name
	}
	for _, name := range cfg.Catalog.ConsumerNames() {
		cons, _ := cfg.Catalog.Consumer(name)
		info := cons.Describe(topics)
		g := GroupStatus{Group: info.Group, Topics: info.Topics, PoisonTopic: info.PoisonTopic, Consumer: name, Kind: info.Kind,
			Declared: eventpipe.DefinitionOf(cons, topics)}
		switch info.Kind {
		case eventpipe.KindReadModel, eventpipe.KindSearchModel:
			g.Projection = name
		case eventpipe.KindSaga:
			g.Saga = sagaOf[name]
		}
		if info.TopicPrefix != "" {
			// Every topic with the prefix, found as the consumer finds
			// them (the analytics aggregator: one topic per source).
			var err error
			if offsets == nil {
				err = kafkaErr
			} else {
				g.Topics, err = offsets.TopicsWithPrefix(ctx, info.TopicPrefix)
			}
			if err != nil {
				r.Errors = append(r.Errors, fmt.Errorf("%s topics: %w", name, err))
			}
		}
		groups = append(groups, g)
	}
	db := cfg.DB
	if db == nil {
		// eventpipe.OpenPostgres does not connect: a bad URL is its only
		// error, and the reads below report an unreachable database.
		pool, err := eventpipe.OpenPostgres(ctx, ep)
		if err != nil {
			r.ParkedErr = fmt.Errorf("postgres: %w", err)
			r.Errors = append(r.Errors, r.ParkedErr)
		} else {
			defer pool.Close()
			db = pool
		}
	}
	if db != nil {
		r.Sagas = sagaReports(ctx, db, cfg.Catalog.SagaNames())
		for _, s := range r.Sagas {
			if s.Err != nil {
				r.Errors = append(r.Errors, s.Err)
			}
		}
	}
	if db != nil { // operator actions (issue 27)
		if r.OperatorActions, r.OperatorActionsErr = statusOperatorActions(ctx, db); r.OperatorActionsErr != nil {
			r.Errors = append(r.Errors, r.OperatorActionsErr)
		}
	}
	if db != nil { // consumer definitions and the models' builds (issue 38)
		r.Errors = append(r.Errors, readDefinitions(ctx, db, ep, groups)...)
	}
	if len(cfg.Catalog.ModelNames()) > 0 && db != nil {
		parked, err := parkedCounts(ctx, db, ep, logger)
		if err != nil {
			r.ParkedErr = fmt.Errorf("parked events: %w", err)
			r.Errors = append(r.Errors, r.ParkedErr)
		}
		for i := range groups {
			if groups[i].Projection != "" {
				groups[i].Parked = parked[groups[i].Projection]
			}
		}
	}

	// Every group's position and every poison topic's records, in one
	// pass (kafka.OffsetReader).
	q := kafka.OffsetsRequest{Newest: newestOf}
	for _, rel := range r.Relays {
		q.Count = append(q.Count, rel.PoisonTopic)
	}
	for _, g := range groups {
		q.Count = append(q.Count, g.PoisonTopic)
		if len(g.Topics) > 0 { // no analytics topic yet: nothing to measure
			q.Groups = append(q.Groups, kafka.GroupTopics{Group: g.Group, Topics: g.Topics})
		}
	}
	var read kafka.Offsets
	if offsets != nil {
		var err error
		if read, err = offsets.Read(ctx, q); err != nil {
			kafkaErr = fmt.Errorf("kafka offsets: %w", err)
			r.Errors = append(r.Errors, kafkaErr)
		}
	}
	if kafkaErr == nil {
		var poisonErrs []error
		for _, t := range q.Count {
			if err := read.TopicErrs[t]; err != nil && !slices.ContainsFunc(poisonErrs, func(e error) bool { return e == err }) {
				poisonErrs = append(poisonErrs, err)
			}
		}
		if len(poisonErrs) > 0 {
			r.Errors = append(r.Errors, fmt.Errorf("poison topics: %w", errors.Join(poisonErrs...)))
		}
	}
	for i := range r.Relays {
		r.Relays[i].Poisoned = read.Messages[r.Relays[i].PoisonTopic]
	}
	measured := read.Groups
	for _, g := range groups {
		g.Poisoned = read.Messages[g.PoisonTopic]
		if len(g.Topics) == 0 || kafkaErr != nil {
			r.Groups = append(r.Groups, g)
			continue
		}
		gl := measured[0]
		measured = measured[1:]
		if gl.Err != nil {
			r.Errors = append(r.Errors, fmt.Errorf("group %s: %w", g.Group, gl.Err))
		}
		for _, row := range gl.Rows {
			g.Newest += row.Newest
			g.Lag += row.Lag
			g.Committed += max(row.Committed, 0)
		}
		r.Groups = append(r.Groups, g)
	}
	r.Took = time.Since(start)
	if kafkaErr != nil && len(newestOf) > 0 {
		return r, nil, kafkaErr
	}
	var newestErrs []error
	for _, t := range newestOf {
		if err := read.TopicErrs[t]; err != nil {
			newestErrs = append(newestErrs, err)
		}
	}
	return r, read.Newest, errors.Join(newestErrs...)
}

// BuildState says, in words, where a read or search model's build stands
// (g.Model): "current", its first catch-up's progress, a rebuild's
// progress, or a version change waiting for a rebuild; "" for the other
// kinds.
func (g GroupStatus) BuildState() string {
	m := g.Model
	switch {
	case m == nil:
		return ""
	case m.Built.Started.IsZero():
		return "not started"
	case !m.Rebuild.Started.IsZero():
		phase := "rebuilding"
		if !m.Rebuild.Done.IsZero() {
			phase = "rebuilt, swapping"
		}
		return fmt.Sprintf("%s at version %d: %d events since %s", phase, m.Rebuild.ModelVersion(), m.Rebuild.Events, m.Rebuild.Started.Format(time.RFC3339))
	case m.Built.Done.IsZero():
		return fmt.Sprintf("catching up: %d events since %s", m.Built.Events, m.Built.Started.Format(time.RFC3339))
	case g.Declared.Version != 0 && m.Built.ModelVersion() != g.Declared.Version:
		return fmt.Sprintf("built by version %d, declared %d: rebuilt at the consumer's next start (or by eventpipe replay)", m.Built.ModelVersion(), g.Declared.Version)
	}
	return "current"
}

// DefinitionChanges says, in words, what the consumer's last start
// changed in its definition and what the catalogue declares that its
// last start did not have yet (a change not deployed); none when neither.
func (g GroupStatus) DefinitionChanges() []string {
	d := g.Definition
	if d == nil {
		return nil
	}
	var out []string
	if c := d.Changes(); len(c) > 0 {
		out = append(out, fmt.Sprintf("changed at its start of %s: %s", d.ChangedAt.Format(time.RFC3339), strings.Join(c, "; ")))
	}
	if c := g.Declared.Changes(d.Definition); len(c) > 0 {
		out = append(out, fmt.Sprintf("not deployed yet (it last started %s): %s", d.RecordedAt.Format(time.RFC3339), strings.Join(c, "; ")))
	}
	return out
}

// readDefinitions fills each group's recorded definition and, for a read
// or search model, its ModelState; it returns what could not be read.
func readDefinitions(ctx context.Context, db *pgxpool.Pool, ep eventpipe.Endpoints, groups []GroupStatus) []error {
	ctx, cancel := context.WithTimeout(ctx, parkedTimeout)
	defer cancel()
	var errs []error
	defs, err := eventpipe.ReadDefinitions(ctx, db)
	if err != nil {
		errs = append(errs, err)
	}
	var es *esclient.Client
	for i := range groups {
		g := &groups[i]
		if d, ok := defs[g.Consumer]; ok {
			g.Definition = &d
		}
		var st projections.ModelState
		var err error
		switch g.Kind {
		case eventpipe.KindReadModel:
			st, err = projections.ReadModelState(ctx, db, g.Consumer)
		case eventpipe.KindSearchModel:
			if es == nil {
				if es, err = esclient.NewClient(ep.Elasticsearch, ep.ElasticsearchSecurity); err != nil {
					errs = append(errs, fmt.Errorf("elasticsearch: %w", err))
					continue
				}
			}
			prefix := bus.Topics{Prefix: ep.TopicPrefix}.Prefix
			st, err = elastic.ReadModelState(ctx, es, elastic.Alias(prefix, g.Consumer), elastic.Alias(prefix, elastic.DefaultCatchUpIndex))
		default:
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		g.Model = &st
	}
	return errs
}

// parkedTimeout bounds the parked events' count (and the sagas'), so that
// an unreachable database does not hold Status up.
const parkedTimeout = 10 * time.Second

// sagaReports counts the instances of each saga in names.
func sagaReports(ctx context.Context, db *pgxpool.Pool, names []string) []SagaReport {
	ctx, cancel := context.WithTimeout(ctx, parkedTimeout)
	defer cancel()
	var out []SagaReport
	for _, name := range names {
		rep := SagaReport{Name: name}
		err := sagas.Ready(ctx, db)
		if err == nil {
			rep.Summary, err = sagas.Summarize(ctx, db, name)
		}
		if err != nil {
			rep.Err = fmt.Errorf("saga %s: %w", name, err)
		}
		out = append(out, rep)
	}
	return out
}

// parkedCounts counts the parked events by consumer in db, or in a pool
// of ep.Postgres that it closes.
func parkedCounts(ctx context.Context, db *pgxpool.Pool, ep eventpipe.Endpoints, logger *slog.Logger) (map[string]parking.Counts, error) {
	ctx, cancel := context.WithTimeout(ctx, parkedTimeout)
	defer cancel()
	_, lot, closeDB, err := openParking(ctx, db, ep, logger)
	if err != nil {
		return nil, err
	}
	defer closeDB()
	return lot.Counts(ctx)
}

// StatusOperatorActions is how many of the latest operator actions Status
// reports.
const StatusOperatorActions = 5

// statusOperatorActions reads the latest operator actions, within
// parkedTimeout.
func statusOperatorActions(ctx context.Context, db *pgxpool.Pool) ([]OperatorAction, error) {
	ctx, cancel := context.WithTimeout(ctx, parkedTimeout)
	defer cancel()
	return latestOperatorActions(ctx, db, "", StatusOperatorActions)
}
