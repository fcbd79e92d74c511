package projections

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/components/metrics"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/bus/kafka/keyed"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/internal/pause"
	"github.com/eventpipe/eventpipe/parking"
)

// RunnerConfig configures a Runner.
type RunnerConfig struct {
	// Applier applies what arrives: an *Applier (Postgres) or any other
	// Sink, such as an Elasticsearch read model's. Required.
	Applier Sink
	// NewSubscriber returns the subscriber of each event topic, in the
	// projection's consumer group (default: key-ordered Kafka subscribers
	// on Brokers, package bus/kafka/keyed: many messages of a partition
	// in flight, each aggregate's in order).
	NewSubscriber bus.SubscriberConstructor
	// Brokers are the Kafka seed brokers: required without NewSubscriber;
	// with a Registerer they also feed the Kafka offset lag metric.
	Brokers []string
	// KafkaSecurity is the TLS and SASL of its Kafka clients.
	KafkaSecurity kafka.Security
	// Upcasters upgrade each event read from the topics to its current
	// schema version, as the store does on every read (nil: none; the
	// relay upcasts what it publishes): a message published before an
	// upcaster was added, or re-driven from a poison topic, is applied as
	// the current version.
	Upcasters *eventstore.Upcasters
	// Opener opens each event's sealed personal data before the
	// projection sees it (package privacy's Sealer; nil: none).
	Opener eventstore.Opener
	// KafkaInstanceID makes its Kafka subscribers static group members
	// (see bus/kafka.SubscriberConfig.InstanceID); empty: dynamic.
	KafkaInstanceID string
	// Topics names the event topics (and the poison topic).
	Topics bus.Topics
	// Publisher publishes poisoned messages. Required.
	Publisher message.Publisher
	// Parking, when set, parks instead of poisoning (see package
	// parking): an event that fails permanently is parked, and so is
	// every later event of its aggregate, until `eventpipe parked reapply`
	// re-applies them; the other aggregates keep flowing. Parking is keyed
	// by the Applier's name. A message that is not an event (it does not
	// decode) still goes to the poison topic. Without Parking every
	// permanent failure goes to the poison topic, and so do the
	// aggregate's later events: gap repair reads the refused event back
	// from the store and fails on it again.
	Parking *parking.Store
	// History pages the event store's events by type: with Start
	// bus.StartHistory a new projection catches up from it before it
	// consumes the live topics (see ResumeCatchUp).
	History HistoryPage
	// Start is where a projection that never started begins (default
	// bus.StartHistory when History is set, else bus.StartEarliest):
	//   - bus.StartHistory: catch up from the event store with a durable
	//     cursor kept beside the read model (Sink.CatchUpState), resumed
	//     after any crash, then follow the live topics from
	//     HandOverMargin before the catch-up began; positions skip what
	//     both saw, so nothing is applied twice or missed;
	//   - bus.StartEarliest, bus.StartLatest, bus.StartAt(t): no
	//     catch-up; the consumer group starts at the topics' oldest
	//     record, their end (the read model shows no history), or the
	//     first record at or after t.
	// The start applies once: it is recorded (the catch-up state, the
	// group's committed offsets) and a restart resumes whatever Start
	// says then. The group's start is set with Brokers (see
	// kafka.StartGroup); without Brokers the subscriber decides.
	Start bus.Start
	// HandOverMargin is how long before a catch-up began its consumer
	// group starts on the live topics (default 5 minutes): it covers the
	// event store's index lag, the relay's lag and clock skew between
	// writers, so an event the catch-up could not see yet is on the topics
	// from there.
	HandOverMargin time.Duration
	// BatchSize is the most messages applied in one transaction (default
	// 250). Messages that arrive while a transaction runs go into the
	// next one, so batches grow with the load and a lone message waits
	// for nobody. (An aggregate's next event is delivered once its
	// previous one is acked, so a batch holds at most one event per
	// aggregate; with a subscriber that holds one unacked message per
	// partition, such as watermill-kafka's, at most one per partition.)
	BatchSize int
	// Transactions is how many batches are applied at once, each in its
	// own transaction on its own connection (default 2): while one
	// commits, the next is being written. An aggregate's events are never
	// in two of them at once, since its next event is delivered only
	// after the previous one's transaction committed and it was acked;
	// with a subscriber that does deliver them together, the Applier's
	// per-aggregate locks and positions still apply each once, in order.
	Transactions int
	// Rebuild, when set, rebuilds the read model from the event store
	// beside the live one (a replay with ReplayConfig.Resume, or
	// elastic.Replay with Resume) and swaps it in when it has caught up.
	// Run calls it, beside the live consumer, when the version that built
	// the model (its catch-up state's) is not the Applier's declared one
	// (VersionOf: a Sink with a Version method); the old model keeps
	// serving reads and stays live meanwhile, and a killed rebuild
	// resumes at the next Run. ErrReplayRunning (another replica, or an
	// operator's replay, holds the lock) is waited out; other errors are
	// retried with a backoff, permanent ones (eventstore.IsPermanent)
	// returned. nil: a version change is logged, and the model keeps the
	// rows the old version built until `eventpipe replay` rebuilds it.
	Rebuild func(ctx context.Context) error
	// AggregateTypeOf names the aggregate type of an event type (the
	// catalogue's domains). With it, an event type the model gained whose
	// aggregate type it already read is told apart from one of a new
	// aggregate type: the positions are past that type's history, so
	// only a rebuild applies it (with Rebuild, Run rebuilds the model as
	// for a version change; without, each start warns). nil: every gained
	// event type is caught up beside the live consumer.
	AggregateTypeOf func(eventType string) string
	// Registerer receives the router's metrics (default: none).
	Registerer prometheus.Registerer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Validate reports the first missing field.
func (c RunnerConfig) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("projections: RunnerConfig: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch {
	case c.Applier == nil:
		return bad("Applier", "is nil")
	case c.NewSubscriber == nil && len(c.Brokers) == 0:
		return bad("Brokers", "is empty and NewSubscriber is nil: set one")
	case c.Publisher == nil:
		return bad("Publisher", "is nil")
	case c.BatchSize < 0:
		return bad("BatchSize", "is %d, want ≥ 0", c.BatchSize)
	case c.Transactions < 0:
		return bad("Transactions", "is %d, want ≥ 0", c.Transactions)
	case c.Start.IsHistory() && c.History == nil:
		return bad("History", "is nil but Start is history")
	case c.HandOverMargin < 0:
		return bad("HandOverMargin", "is %s, want ≥ 0", c.HandOverMargin)
	}
	return nil
}

// Runner consumes a projection's event topics on a Watermill Router, in
// its own consumer group ("projection.<name>" in the topic namespace), and
// applies the events through the Applier, many messages (of different
// partitions) per transaction. A message is acked only after its
// transaction committed; a redelivery is skipped by the positions. When a
// batch fails, its messages are applied one by one, so that a permanent
// apply error parks only its own event and its aggregate (with Parking),
// or sends only its own message to poison.projection.<name> (without);
// an undecodable message is always poisoned; transient errors are
// retried in order.
//
// With Parking, each batch first asks which of its aggregates are parked:
// their events (from the first parked sequence on) are parked behind,
// durably, before their messages are acked, and never reach the Applier,
// so its gap repair never reads a parked aggregate's events back from the
// store either.
type Runner struct {
	cfg     RunnerConfig
	age     prometheus.Gauge
	applied prometheus.Counter
	parked  prometheus.Counter
	batches prometheus.Histogram
	queue   chan pending
}

// pending is a delivered event waiting for its transaction.
type pending struct {
	e    eventstore.Envelope
	done chan error
}

// NewRunner validates cfg and returns a Runner.
func NewRunner(cfg RunnerConfig) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 250
	}
	if cfg.Transactions == 0 {
		cfg.Transactions = 2
	}
	if cfg.Start.IsDefault() {
		cfg.Start = bus.StartEarliest
		if cfg.History != nil {
			cfg.Start = bus.StartHistory
		}
	}
	if cfg.HandOverMargin == 0 {
		cfg.HandOverMargin = DefaultHandOverMargin
	}
	if cfg.NewSubscriber == nil {
		// Key-ordered: many messages of a partition in flight, one
		// aggregate's in order, so a batch can fill up to BatchSize.
		cfg.NewSubscriber = keyed.Subscribers(keyed.Config{Brokers: cfg.Brokers, Security: cfg.KafkaSecurity, InstanceID: cfg.KafkaInstanceID, ClientID: "eventpipe-consume",
			Logger: watermill.NewSlogLogger(cfg.Logger)})
	}
	r := &Runner{cfg: cfg, queue: make(chan pending, cfg.BatchSize),
		batches: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "eventpipe_projection_batch_messages",
			Help:    "Messages applied per transaction.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 8),
		}),
		age: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eventpipe_projection_last_event_age_seconds",
			Help: "Now minus the occurred-at of the last event applied (the projection's lag behind the write side).",
		}),
		applied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventpipe_projection_events_applied_total",
			Help: "Events applied (duplicates skipped by the positions not counted).",
		}),
		parked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventpipe_projection_events_parked_total",
			Help: "Deliveries parked: events that failed permanently and events parked behind them (see eventpipe parked list).",
		}),
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(r.age); err != nil {
			return nil, fmt.Errorf("projections: register metrics: %w", err)
		}
		if err := cfg.Registerer.Register(r.applied); err != nil {
			return nil, fmt.Errorf("projections: register metrics: %w", err)
		}
		if err := cfg.Registerer.Register(r.batches); err != nil {
			return nil, fmt.Errorf("projections: register metrics: %w", err)
		}
		if cfg.Parking != nil {
			if err := cfg.Registerer.Register(r.parked); err != nil {
				return nil, fmt.Errorf("projections: register metrics: %w", err)
			}
		}
	}
	return r, nil
}

// ConsumerGroup is the projection's consumer group:
// <prefix>projection.<name>, so namespaces sharing a cluster keep apart.
func (r *Runner) ConsumerGroup() string {
	return ConsumerGroup(r.cfg.Topics, r.cfg.Applier.Name())
}

// PoisonTopic is where the projection parks events that can never apply:
// <prefix>poison.projection.<name>.
func (r *Runner) PoisonTopic() string {
	return PoisonTopic(r.cfg.Topics, r.cfg.Applier.Name())
}

// ConsumerGroup is the consumer group of the projection called name in
// the namespace t: <prefix>projection.<name>.
func ConsumerGroup(t bus.Topics, name string) string { return t.Prefix + "projection." + name }

// PoisonTopic is the poison topic of the projection called name in the
// namespace t: <prefix>poison.projection.<name>.
func PoisonTopic(t bus.Topics, name string) string { return t.Poison("projection." + name) }

// DefaultHandOverMargin is RunnerConfig.HandOverMargin's default.
const DefaultHandOverMargin = 5 * time.Minute

// Topics are the event topics the projection consumes.
func (r *Runner) Topics() []string {
	var topics []string
	for _, aggType := range distinct(r.cfg.Applier.AggregateTypes()) {
		topics = append(topics, r.cfg.Topics.Events(aggType))
	}
	return topics
}

// Run starts a new projection where Start says (catching up from the
// event store first, for bus.StartHistory, resuming a catch-up a crash
// interrupted) and then consumes until ctx ends. With Parking, it first
// checks that the parked events' table exists.
func (r *Runner) Run(ctx context.Context) error {
	if r.cfg.Parking != nil {
		if err := r.cfg.Parking.Ready(ctx); err != nil {
			return fmt.Errorf("projections: %s: %w", r.cfg.Applier.Name(), err)
		}
	}
	groupStart, extending, rebuilding, err := r.begin(ctx)
	if err != nil {
		return err
	}
	group := r.ConsumerGroup()
	if len(r.cfg.Brokers) > 0 {
		if _, err := kafka.StartGroup(ctx, kafka.GroupStartConfig{Brokers: r.cfg.Brokers, Security: r.cfg.KafkaSecurity, Group: group, Topics: r.Topics(),
			Start: groupStart, NoWait: true, Logger: r.cfg.Logger}); err != nil {
			return fmt.Errorf("projections: %s: %w", r.cfg.Applier.Name(), err)
		}
	}
	if !extending && !rebuilding {
		return r.consume(ctx)
	}
	// The types the read model gained catch up beside the live consumer
	// (the positions decide between the two, as they do for a replay); a
	// new version is rebuilt beside it.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return r.consume(gctx) })
	g.Go(func() error {
		if rebuilding {
			return r.rebuild(gctx)
		}
		_, err := r.catchUp(gctx)
		return err
	})
	return g.Wait()
}

// rebuild runs RunnerConfig.Rebuild until the read model is at its
// declared version: waiting while another rebuild holds the lock,
// retrying transient failures with a backoff.
func (r *Runner) rebuild(ctx context.Context) error {
	name, want := r.cfg.Applier.Name(), VersionOf(r.cfg.Applier)
	for attempt := 1; ; attempt++ {
		st, err := r.cfg.Applier.CatchUpState(ctx)
		if err == nil && r.rebuildReason(st) == "" {
			r.cfg.Logger.InfoContext(ctx, "read model rebuilt", "projection", name, "version", want, "events", st.Events)
			return nil
		}
		if err == nil {
			err = r.cfg.Rebuild(ctx)
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil:
			attempt = 0
			continue
		case errors.Is(err, ErrReplayRunning):
			r.cfg.Logger.InfoContext(ctx, "another rebuild of the read model is running; waiting for it", "projection", name, "err", err)
			attempt = 0
		case eventstore.IsPermanent(err):
			return fmt.Errorf("projections: %s: rebuild at version %d: %w", name, want, err)
		default:
			r.cfg.Logger.WarnContext(ctx, "rebuild failed; retrying", "projection", name, "version", want, "attempt", attempt, "err", err)
		}
		if err := pause.Sleep(ctx, pause.Jittered(pause.Backoff(attempt, 5*time.Second, time.Minute))); err != nil {
			return nil
		}
	}
}

// begin reads (or records) how the projection started and returns where
// its consumer group starts, catching up from the store first when Start
// is bus.StartHistory and the catch-up is not done. When the read model
// reads event types its finished catch-up did not cover (it gained an
// aggregate type), begin records a catch-up of those types and reports
// extending: Run catches them up while the live consumer runs. When the
// version that built the model is not its declared one, begin reports
// rebuilding (with RunnerConfig.Rebuild; without, it logs the change):
// Run rebuilds it beside the live consumer.
func (r *Runner) begin(ctx context.Context) (start bus.Start, extending, rebuilding bool, err error) {
	start, extending, err = r.beginCatchUp(ctx)
	if err != nil || extending {
		return start, extending, false, err
	}
	st, err := r.cfg.Applier.CatchUpState(ctx)
	if err != nil {
		return bus.Start{}, false, false, err
	}
	why := r.rebuildReason(st)
	if why == "" {
		return start, false, false, nil
	}
	name := r.cfg.Applier.Name()
	if r.cfg.Rebuild == nil {
		r.cfg.Logger.WarnContext(ctx, "read model needs a rebuild and automatic rebuilds are off: run `eventpipe replay` to rebuild it",
			"projection", name, "why", why)
		return start, false, false, nil
	}
	r.cfg.Logger.InfoContext(ctx, "read model needs a rebuild: rebuilding it beside the live one", "projection", name, "why", why)
	return start, false, true, nil
}

// rebuildReason says why the model a finished catch-up st built needs a
// rebuild: it was built by another version than the declared one, or
// the model gained event types of aggregate types it already read (see
// RunnerConfig.AggregateTypeOf). "" when it needs none.
func (r *Runner) rebuildReason(st CatchUpState) string {
	if st.Done.IsZero() {
		return ""
	}
	if want := VersionOf(r.cfg.Applier); st.ModelVersion() != want {
		return fmt.Sprintf("built by version %d, declared %d", st.ModelVersion(), want)
	}
	if late := r.lateTypes(st); len(late) > 0 {
		return fmt.Sprintf("event types %v of aggregate types it already read: their history is behind its positions", late)
	}
	return ""
}

// lateTypes are the event types the model reads that st's catch-up did
// not cover although it covered their aggregate type.
func (r *Runner) lateTypes(st CatchUpState) []string {
	if r.cfg.AggregateTypeOf == nil || len(st.Types) == 0 {
		return nil
	}
	read := map[string]bool{}
	for _, t := range st.Types {
		read[r.cfg.AggregateTypeOf(t)] = true
	}
	var late []string
	delete(read, "") // an event type no domain names: nothing to tell
	for _, t := range r.cfg.Applier.EventTypes() {
		if !slices.Contains(st.Types, t) && read[r.cfg.AggregateTypeOf(t)] {
			late = append(late, t)
		}
	}
	return late
}

// beginCatchUp is begin's catch-up part.
func (r *Runner) beginCatchUp(ctx context.Context) (start bus.Start, extending bool, err error) {
	a, name := r.cfg.Applier, r.cfg.Applier.Name()
	st, err := a.CatchUpState(ctx)
	if err != nil {
		return bus.Start{}, false, err
	}
	if st.Started.IsZero() {
		has, err := a.HasPositions(ctx)
		if err != nil {
			return bus.Start{}, false, err
		}
		if has || !r.cfg.Start.IsHistory() {
			// Positions without a catch-up state: a projection that
			// started before catch-ups were recorded, or one that started
			// from the topics alone. Either way it never catches up now.
			now := time.Now().UTC().Truncate(time.Microsecond)
			st = CatchUpState{Started: now, Done: now, Types: a.EventTypes(), Version: VersionOf(a)}
			if _, err := a.ApplyCatchUp(ctx, nil, st); err != nil {
				return bus.Start{}, false, err
			}
			if has {
				r.cfg.Logger.InfoContext(ctx, "projection has positions but no catch-up record: taken as caught up", "projection", name)
			}
			if r.cfg.Start.IsHistory() {
				// Built without a recorded catch-up (by a replay, or
				// before catch-ups were recorded): the topics' oldest
				// records, which the positions skip where applied.
				return bus.StartEarliest, false, nil
			}
			return r.cfg.Start, false, nil
		}
	}
	rebuilds := r.cfg.Rebuild != nil && r.rebuildReason(st) != ""
	if !st.Done.IsZero() && r.cfg.Start.IsHistory() && !rebuilds { // a rebuild reads every type
		if st, err = r.gained(ctx, st); err != nil {
			return bus.Start{}, false, err
		}
	}
	if st.Extending() {
		if r.cfg.History == nil {
			return bus.Start{}, false, fmt.Errorf("projections: %s: a catch-up of the event types %v from the event store is not finished, and RunnerConfig.History is nil", name, st.Reading(nil))
		}
		extending = true
	} else if st.Done.IsZero() {
		if r.cfg.History == nil {
			return bus.Start{}, false, fmt.Errorf("projections: %s: a catch-up from the event store is not finished, and RunnerConfig.History is nil", name)
		}
		if st.Started.IsZero() {
			r.cfg.Logger.InfoContext(ctx, "new projection: catching up from the event store", "projection", name)
		} else {
			r.cfg.Logger.InfoContext(ctx, "resuming the catch-up from the event store", "projection", name, "after", st.After, "events", st.Events)
		}
		if st, err = r.catchUp(ctx); err != nil {
			return bus.Start{}, false, err
		}
		r.cfg.Logger.InfoContext(ctx, "caught up; switching to the live topics", "projection", name, "events", st.Events)
	}
	if r.cfg.Start.IsHistory() {
		return bus.StartAt(st.Started.Add(-r.cfg.HandOverMargin)), extending, nil
	}
	return r.cfg.Start, extending, nil
}

// gained compares the event types of st, a finished catch-up, with the
// read model's: a state that names none (recorded before types were)
// gets the read model's; types the read model gained start a catch-up of
// their own (recorded, so that a kill resumes it), returned.
func (r *Runner) gained(ctx context.Context, st CatchUpState) (CatchUpState, error) {
	a, name := r.cfg.Applier, r.cfg.Applier.Name()
	types := a.EventTypes()
	if len(st.Types) == 0 {
		st.Types = types
		_, err := a.ApplyCatchUp(ctx, nil, st)
		return st, err
	}
	late := r.lateTypes(st) // left to a rebuild (rebuildReason)
	var added, kept []string
	for _, t := range types {
		switch {
		case slices.Contains(st.Types, t):
			kept = append(kept, t)
		case !slices.Contains(late, t):
			added = append(added, t)
		}
	}
	if len(added) == 0 {
		return st, nil
	}
	types = append(slices.Clone(kept), added...)
	r.cfg.Logger.InfoContext(ctx, "projection reads event types its catch-up did not cover: catching up their history beside the live topics", "projection", name, "types", added)
	// With no type kept, nothing of the read model is worth serving: the
	// catch-up runs before the live topics, as a first one does.
	next := CatchUpState{Started: time.Now().UTC().Truncate(time.Microsecond), Types: types, Skip: kept, Version: st.Version}
	if _, err := a.ApplyCatchUp(ctx, nil, next); err != nil {
		return st, err
	}
	return next, nil
}

// catchUp runs (or resumes) the recorded catch-up, logging its progress
// every 5 s.
func (r *Runner) catchUp(ctx context.Context) (CatchUpState, error) {
	name := r.cfg.Applier.Name()
	last := time.Now()
	st, err := ResumeCatchUp(ctx, r.cfg.Applier, r.cfg.History, func(st CatchUpState) {
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			r.cfg.Logger.InfoContext(ctx, "catching up", "projection", name, "events", st.Events, "after", st.After, "types", st.Reading(nil))
		}
	})
	if err != nil {
		return st, fmt.Errorf("projections: %s: catch up from the event store: %w", name, err)
	}
	if len(st.Skip) > 0 {
		r.cfg.Logger.InfoContext(ctx, "caught up the event types the projection gained", "projection", name, "events", st.Events, "types", st.Reading(nil))
	}
	return st, nil
}

// consume runs the live consumer until ctx ends.
func (r *Runner) consume(ctx context.Context) error {
	logger := watermill.NewSlogLogger(r.cfg.Logger)
	router, err := message.NewRouter(message.RouterConfig{}, logger)
	if err != nil {
		return err
	}
	group := r.ConsumerGroup()
	mws, err := bus.Middlewares(bus.MiddlewareConfig{PoisonPublisher: r.cfg.Publisher, PoisonTopic: r.PoisonTopic(), Logger: r.cfg.Logger})
	if err != nil {
		return err
	}
	router.AddMiddleware(mws...)
	if r.cfg.Registerer != nil {
		metrics.NewPrometheusMetricsBuilder(r.cfg.Registerer, "eventpipe", "projection").AddPrometheusRouterMetrics(router)
	}
	topics := r.Topics()
	if r.cfg.Registerer != nil && len(r.cfg.Brokers) > 0 {
		// Kafka offset lag of the projection's group, beside the last
		// applied event's age.
		lag, err := kafka.NewLagMonitor(kafka.LagConfig{Brokers: r.cfg.Brokers, Security: r.cfg.KafkaSecurity, ConsumerGroup: group, Topics: topics, Registerer: r.cfg.Registerer, Logger: r.cfg.Logger})
		if err != nil {
			return err
		}
		lagCtx, stopLag := context.WithCancel(ctx)
		lagDone := make(chan struct{})
		go func() { defer close(lagDone); _ = lag.Run(lagCtx) }()
		defer func() { stopLag(); <-lagDone }()
	}
	var subs []message.Subscriber
	defer func() {
		for _, sub := range subs {
			_ = sub.Close()
		}
	}()
	for _, aggType := range distinct(r.cfg.Applier.AggregateTypes()) {
		topic := r.cfg.Topics.Events(aggType)
		sub, err := r.cfg.NewSubscriber(group)
		if err != nil {
			return fmt.Errorf("projections: %s: subscriber for %s: %w", group, topic, err)
		}
		subs = append(subs, sub)
		router.AddConsumerHandler(group+":"+topic, topic, sub, r.handle)
	}
	// The batcher outlives the router: handlers still waiting for their
	// transaction when ctx ends get their answer.
	batchCtx, stopBatcher := context.WithCancel(context.WithoutCancel(ctx))
	batcherDone := make(chan struct{})
	go func() {
		defer close(batcherDone)
		var wg sync.WaitGroup
		for range r.cfg.Transactions {
			wg.Go(func() { r.batch(batchCtx) })
		}
		wg.Wait()
	}()
	defer func() { stopBatcher(); <-batcherDone }()
	if err := router.Run(ctx); err != nil {
		return fmt.Errorf("projections: %s: router: %w", group, err)
	}
	return nil
}

// handle hands the message's event to the batcher and returns the result
// of the transaction it was applied in.
func (r *Runner) handle(msg *message.Message) error {
	e, err := bus.OpenedEventFromMessage(msg, r.cfg.Upcasters, r.cfg.Opener)
	if err != nil {
		return err
	}
	p := pending{e: e, done: make(chan error, 1)}
	select {
	case r.queue <- p:
	case <-msg.Context().Done():
		return msg.Context().Err()
	}
	return <-p.done
}

// batch applies what the handlers queue: it takes every event already
// waiting (up to BatchSize) and applies them in one transaction, until
// ctx ends. Transactions of them run at once.
func (r *Runner) batch(ctx context.Context) {
	for {
		var batch []pending
		select {
		case p := <-r.queue:
			batch = append(batch, p)
		case <-ctx.Done():
			return
		}
	more:
		for len(batch) < r.cfg.BatchSize {
			select {
			case p := <-r.queue:
				batch = append(batch, p)
			default:
				break more
			}
		}
		r.applyBatch(ctx, batch)
	}
}

// applyBatch applies batch in one transaction and answers every handler;
// when that fails it applies each event alone so each gets its own error.
// With Parking, the events of parked aggregates are parked first and the
// rest applied; an event that fails permanently alone is parked, with the
// later events of its aggregate in the batch.
func (r *Runner) applyBatch(ctx context.Context, batch []pending) {
	if r.cfg.Parking != nil {
		batch = r.parkBehind(ctx, batch)
		if len(batch) == 0 {
			return
		}
	}
	events := make([]eventstore.Envelope, len(batch))
	for i, p := range batch {
		events[i] = p.e
	}
	out, err := r.cfg.Applier.Apply(ctx, events)
	if err == nil || len(batch) == 1 {
		r.observe(out, events)
		r.batches.Observe(float64(len(batch)))
		if err != nil && r.cfg.Parking != nil && eventstore.IsPermanent(err) {
			err = r.park(ctx, batch[0].e, err)
		}
		for _, p := range batch {
			p.done <- err
		}
		return
	}
	r.cfg.Logger.WarnContext(ctx, "a batch failed; applying its events one by one", "projection", r.cfg.Applier.Name(), "events", len(batch), "err", err)
	// blocked holds the aggregates an event of this batch parked (or
	// failed to park): their later events are parked behind it (or
	// fail), never applied past it.
	type block struct {
		seq int64
		err error // the park error; nil when parked
	}
	blocked := map[eventstore.Ref]block{}
	for _, p := range batch {
		ref := p.e.Aggregate()
		if b, ok := blocked[ref]; ok && p.e.Sequence >= b.seq {
			if b.err != nil {
				p.done <- fmt.Errorf("projections: %s: %s waits behind sequence %d, which could not be parked: %w", r.cfg.Applier.Name(), p.e, b.seq, b.err)
				continue
			}
			p.done <- r.parkOne(ctx, p.e, parking.BehindReason(b.seq))
			continue
		}
		out, err := r.cfg.Applier.Apply(ctx, []eventstore.Envelope{p.e})
		r.observe(out, []eventstore.Envelope{p.e})
		r.batches.Observe(1)
		if err != nil && r.cfg.Parking != nil && eventstore.IsPermanent(err) {
			err = r.park(ctx, p.e, err)
			blocked[ref] = block{seq: p.e.Sequence, err: err}
		}
		p.done <- err
	}
}

// parkBehind parks the events of batch whose aggregate is parked (at or
// below their sequence), answers their handlers, and returns the rest.
// When it cannot tell or park, it answers every event with the error
// (transient: they are retried) and returns none.
func (r *Runner) parkBehind(ctx context.Context, batch []pending) []pending {
	name := r.cfg.Applier.Name()
	var refs []eventstore.Ref
	seen := map[eventstore.Ref]bool{}
	for _, p := range batch {
		if ref := p.e.Aggregate(); !seen[ref] {
			seen[ref] = true
			refs = append(refs, ref)
		}
	}
	first, err := r.cfg.Parking.Parked(ctx, name, refs)
	if err != nil {
		for _, p := range batch {
			p.done <- err
		}
		return nil
	}
	if len(first) == 0 {
		return batch // the usual case: nothing parked
	}
	var behind []pending
	for _, p := range batch {
		if seq, ok := first[p.e.Aggregate()]; ok && p.e.Sequence >= seq {
			behind = append(behind, p)
		}
	}
	if len(behind) == 0 {
		return batch
	}
	events := make([]eventstore.Envelope, len(behind))
	for i, p := range behind {
		events[i] = p.e
	}
	parked, err := r.cfg.Parking.ParkBehind(ctx, name, events)
	if err != nil {
		for _, p := range batch {
			p.done <- err
		}
		return nil
	}
	done := map[chan error]bool{}
	for i, p := range behind {
		if parked[i] {
			r.parked.Inc()
			done[p.done] = true
			p.done <- nil
		} // else a replay unparked the aggregate meanwhile: apply it
	}
	var live []pending // in the batch's order
	for _, p := range batch {
		if !done[p.done] {
			live = append(live, p)
		}
	}
	return live
}

// park parks e, which failed permanently with cause; it returns nil when
// e is parked (its message is acked) and the park error otherwise (the
// message is retried, and fails and parks again).
func (r *Runner) park(ctx context.Context, e eventstore.Envelope, cause error) error {
	return r.parkOne(ctx, e, cause.Error())
}

// parkOne parks e with reason.
func (r *Runner) parkOne(ctx context.Context, e eventstore.Envelope, reason string) error {
	if err := r.cfg.Parking.Park(ctx, r.cfg.Applier.Name(), e, reason); err != nil {
		return err
	}
	r.parked.Inc()
	return nil
}

// observe updates the metrics after a committed transaction.
func (r *Runner) observe(out Outcome, events []eventstore.Envelope) {
	if n := out.Applied + out.Repaired; n > 0 {
		r.applied.Add(float64(n))
		latest := events[0].OccurredAt
		for _, e := range events[1:] {
			if e.OccurredAt.After(latest) {
				latest = e.OccurredAt
			}
		}
		r.age.Set(max(0, time.Since(latest).Seconds()))
	}
}

// distinct returns s without repeats, in order of first appearance: a
// projection made of others may list a type twice (two read models that
// both scrub forgotten subjects list subjects.AggregateType).
func distinct(s []string) []string {
	out := make([]string, 0, len(s))
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
