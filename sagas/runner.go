package sagas

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/components/metrics"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/privacy"
	"github.com/eventpipe/eventpipe/tracing"
)

// Config configures a Runner.
type Config struct {
	// Saga is the process manager to run (a Saga[S]). Required.
	Saga Definition
	// DB holds the saga tables (migration 006); its search_path picks the
	// schema. Required.
	DB *pgxpool.Pool
	// Publisher publishes the commands the saga sends, the answers of
	// cancelled commands (on the saga's replies topic) and poisoned
	// inputs.
	// Required.
	Publisher message.Publisher
	// Outcomes is the command handlers' event store: it records the
	// refusals of cancelled commands, and the saga checks every reply
	// against the answer it recorded for the command. Required.
	Outcomes Outcomes
	// CommandKey, when set (at least commands.MinKeyLength bytes), signs
	// every command the saga sends over everything that gives it meaning,
	// its reply topic included (commands.Signer with key id
	// commands.DeploymentKeyID): command handlers holding the same key
	// refuse a command under the saga's id form that is not so signed,
	// so no client can take a step's command id first. The saga then
	// takes only replies signed as the answer to the command it sent
	// (commands.VerifyResult): a reply with the right id but another
	// command's signature, or none, is ignored.
	CommandKey []byte
	// NewSubscriber returns the subscriber of each topic the saga reads,
	// in its consumer group (default: Kafka subscribers on Brokers).
	NewSubscriber bus.SubscriberConstructor
	// Brokers are the Kafka seed brokers (required without NewSubscriber).
	Brokers []string
	// KafkaSecurity is the TLS and SASL of its Kafka clients.
	KafkaSecurity kafka.Security
	// Upcasters upgrade each event read from the events topics to its
	// current schema version before the saga sees it (nil: none; see
	// projections.RunnerConfig.Upcasters).
	Upcasters *eventstore.Upcasters
	// Opener opens the sealed personal data of each event and outbound
	// payload before the saga sees it (package privacy's Sealer; nil:
	// none). When it is an eventstore.CommandSealer too (privacy's
	// Sealer is), the commands the saga sends are sealed with it
	// (commands.Seal).
	Opener eventstore.Opener
	// KafkaInstanceID makes its Kafka subscribers static group members
	// (see bus/kafka.SubscriberConfig.InstanceID); empty: dynamic.
	KafkaInstanceID string
	// Topics is the topic namespace.
	Topics bus.Topics
	// PollInterval is how often due timeouts and left-over outbox rows
	// are looked for (default 500ms).
	PollInterval time.Duration
	// SweepAfter is how old an outbox row must be before a sweep runs it:
	// the handler that queued it runs it right after its commit, so an
	// older row was left by a crash (default 5s).
	SweepAfter time.Duration
	// KeepInputs is how long the ids of a finished instance's inputs are
	// kept after it finished (default 24h): a finished instance skips
	// every input anyway, so its ids only matter while a redelivery of
	// one could race its last transaction. A running instance's are kept.
	KeepInputs time.Duration
	// Registerer receives the saga's metrics (default: none).
	Registerer prometheus.Registerer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.PollInterval == 0 {
		c.PollInterval = 500 * time.Millisecond
	}
	if c.SweepAfter == 0 {
		c.SweepAfter = 5 * time.Second
	}
	if c.KeepInputs == 0 {
		c.KeepInputs = 24 * time.Hour
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.NewSubscriber == nil && len(c.Brokers) > 0 {
		c.NewSubscriber = kafka.Subscribers(kafka.SubscriberConfig{Brokers: c.Brokers, Security: c.KafkaSecurity, InstanceID: c.KafkaInstanceID, ClientID: "eventpipe-saga", Logger: watermill.NewSlogLogger(c.Logger)})
	}
}

// Validate reports the first missing or invalid field.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("sagas: Config: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch {
	case c.Saga == nil:
		return bad("Saga", "is nil")
	case c.DB == nil:
		return bad("DB", "is nil")
	case c.Publisher == nil:
		return bad("Publisher", "is nil")
	case c.Outcomes == nil:
		return bad("Outcomes", "is nil")
	case len(c.CommandKey) > 0 && len(c.CommandKey) < commands.MinKeyLength:
		return bad("CommandKey", "has %d bytes, want at least %d", len(c.CommandKey), commands.MinKeyLength)
	case c.NewSubscriber == nil:
		return bad("Brokers", "is empty and NewSubscriber is nil: set one")
	case c.PollInterval < 0:
		return bad("PollInterval", "%v is negative", c.PollInterval)
	case c.SweepAfter < 0:
		return bad("SweepAfter", "%v is negative", c.SweepAfter)
	case c.KeepInputs < 0:
		return bad("KeepInputs", "%v is negative", c.KeepInputs)
	}
	return nil
}

// Runner runs one saga: it consumes the saga's events and outbound
// topics and its replies topic in the saga's consumer group, polls its
// due timeouts, and runs each instance's effects (see the package doc).
// Several Runners of one saga (processes) share the work safely.
type Runner struct {
	cfg     Config
	saga    compiled
	inputs  *prometheus.CounterVec
	effects *prometheus.CounterVec
}

// New validates cfg and returns a Runner.
func New(cfg Config) (*Runner, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	saga, err := cfg.Saga.compile()
	if err != nil {
		return nil, err
	}
	r := newRunner(cfg, saga)
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{r.inputs, r.effects} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("sagas: register metrics: %w", err)
			}
		}
	}
	return r, nil
}

// newRunner returns the Runner of saga with cfg (defaults set) and its
// metrics, not registered.
func newRunner(cfg Config, saga compiled) *Runner {
	r := &Runner{cfg: cfg, saga: saga,
		inputs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "eventpipe", Subsystem: "saga", Name: "inputs_total",
			Help: "Saga inputs by kind and what became of them: handled, duplicate (handled before), skipped (no instance, or finished), unverified (a reply the event store does not confirm: ignored).",
		}, []string{"kind", "result"}),
		effects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "eventpipe", Subsystem: "saga", Name: "effects_total",
			Help: "Saga effects run: commands sent and commands cancelled (a sweep may run one again after a crash).",
		}, []string{"kind"}),
	}
	// Handled timeouts exist from the start at 0, so that an alert on
	// their increase sees the first one (a series born at 1 has none).
	r.inputs.WithLabelValues(string(KindTimeout), "handled")
	return r
}

// Name is the saga's name.
func (r *Runner) Name() string { return r.saga.name }

// ConsumerGroup is the saga's consumer group: <prefix>saga.<name>.
func (r *Runner) ConsumerGroup() string { return ConsumerGroup(r.cfg.Topics, r.saga.name) }

// ConsumerGroup is the consumer group of the saga called name in the
// namespace t.
func ConsumerGroup(t bus.Topics, name string) string { return t.Prefix + "saga." + name }

// PoisonTopic is where the saga puts inputs it can never handle:
// <prefix>poison.saga.<name>.
func (r *Runner) PoisonTopic() string { return PoisonTopic(r.cfg.Topics, r.saga.name) }

// PoisonTopic is the poison topic of the saga called name in the
// namespace t.
func PoisonTopic(t bus.Topics, name string) string { return t.Poison("saga." + name) }

// Ready reports whether the saga tables exist, with an error that says to
// migrate when they do not.
func Ready(ctx context.Context, db *pgxpool.Pool) error {
	var exists bool
	if err := db.QueryRow(ctx, `SELECT to_regclass('saga_instances') IS NOT NULL AND to_regclass('saga_outbox') IS NOT NULL AND to_regclass('saga_commands') IS NOT NULL
		AND EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('saga_commands') AND attname = 'body' AND NOT attisdropped)
		AND EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('saga_instances') AND attname = 'aborted_at' AND NOT attisdropped)`).Scan(&exists); err != nil {
		return fmt.Errorf("sagas: %w", err)
	}
	if !exists {
		return errors.New("sagas: no saga tables (or not all) in the database's schema: run `eventpipe migrate` (migrations/postgres 006, 008 and 010)")
	}
	return nil
}

// Run consumes and polls until ctx ends.
func (r *Runner) Run(ctx context.Context) error {
	if err := Ready(ctx, r.cfg.DB); err != nil {
		return fmt.Errorf("sagas: %s: %w", r.saga.name, err)
	}
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NewSlogLogger(r.cfg.Logger))
	if err != nil {
		return err
	}
	mws, err := bus.Middlewares(bus.MiddlewareConfig{PoisonPublisher: r.cfg.Publisher, PoisonTopic: r.PoisonTopic(), Logger: r.cfg.Logger})
	if err != nil {
		return err
	}
	router.AddMiddleware(mws...)
	if r.cfg.Registerer != nil {
		metrics.NewPrometheusMetricsBuilder(r.cfg.Registerer, "eventpipe", "saga").AddPrometheusRouterMetrics(router)
	}
	group := r.ConsumerGroup()
	var subs []message.Subscriber
	defer func() {
		for _, sub := range subs {
			_ = sub.Close()
		}
	}()
	add := func(topic string, h message.NoPublishHandlerFunc) error {
		sub, err := r.cfg.NewSubscriber(group)
		if err != nil {
			return fmt.Errorf("sagas: %s: subscriber for %s: %w", group, topic, err)
		}
		subs = append(subs, sub)
		router.AddConsumerHandler(group+":"+topic, topic, sub, h)
		return nil
	}
	for _, t := range r.saga.events {
		if err := add(r.cfg.Topics.Events(t), r.handleEvent); err != nil {
			return err
		}
	}
	for _, name := range r.saga.outbound {
		if err := add(r.cfg.Topics.Outbound(name), r.handleOutbound); err != nil {
			return err
		}
	}
	if err := add(ReplyTopic(r.cfg.Topics, r.saga.name), r.handleResult); err != nil {
		return err
	}
	pollCtx, stopPoll := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() { defer close(polled); r.poll(pollCtx) }()
	defer func() { stopPoll(); <-polled }()
	if err := router.Run(ctx); err != nil {
		return fmt.Errorf("sagas: %s: router: %w", group, err)
	}
	return nil
}

func (r *Runner) handleEvent(msg *message.Message) error {
	e, err := bus.OpenedEventFromMessage(msg, r.cfg.Upcasters, r.cfg.Opener)
	if err != nil {
		return err
	}
	in := Input{ID: "event:" + e.EventID, Kind: KindEvent, Event: e, CorrelationID: e.Metadata.CorrelationID}
	return r.routed(msg.Context(), in)
}

func (r *Runner) handleOutbound(msg *message.Message) error {
	var o eventstore.OutboundRecord
	if err := json.Unmarshal(msg.Payload, &o); err != nil || o.ID == "" {
		reason := "no id"
		if err != nil {
			reason = err.Error()
		}
		return &eventstore.DecodeError{What: "outbound message " + msg.UUID, Reason: reason}
	}
	if r.cfg.Opener != nil {
		opened, err := r.cfg.Opener.OpenOutbound(msg.Context(), o)
		if err != nil {
			return fmt.Errorf("outbound message %s: %w", msg.UUID, err)
		}
		o = opened
	}
	in := Input{ID: "outbound:" + o.ID, Kind: KindOutbound, Outbound: o, CorrelationID: o.Metadata.CorrelationID}
	return r.routed(msg.Context(), in)
}

// routed hands an event or outbound input to the instance Route names.
func (r *Runner) routed(ctx context.Context, in Input) error {
	instance, start := r.saga.route(in)
	if instance == "" {
		r.inputs.WithLabelValues(string(in.Kind), "skipped").Inc()
		return nil
	}
	if err := eventstore.ValidateName("saga instance", instance); err != nil {
		return fmt.Errorf("sagas: %s: route of %s: %w", r.saga.name, in.ID, err)
	}
	return r.handle(ctx, instance, start, in)
}

// Outcomes is what a saga needs of the event store's command records
// (eventstore/dynamodb.Store has both methods).
type Outcomes interface {
	commands.OutcomeRecorder
	// CommandResult returns the answer recorded for commandID on ref:
	// the append's result, *eventstore.RefusedCommandError, or
	// eventstore.ErrCommandNotFound.
	CommandResult(ctx context.Context, ref eventstore.Ref, commandID string) (eventstore.AppendResult, error)
}

// handleResult hands the answer to a command of this saga to its
// instance; answers to other commands are skipped. A reply is taken only
// for a command the saga recorded sending (saga_commands) and only when
// the event store's record of that command, on the aggregate the saga
// sent it to, gives the same answer: the replies topic is open to any
// client, so a reply with a saga-shaped command id is otherwise ignored.
func (r *Runner) handleResult(msg *message.Message) error {
	res, err := commands.ResultFromMessage(msg)
	if err != nil {
		return err
	}
	instance, step, ok := ParseCommandID(r.saga.name, res.CommandID)
	if !ok {
		return nil
	}
	ctx := msg.Context()
	verified, why, err := r.verify(ctx, res)
	if err != nil {
		return fmt.Errorf("sagas: %s: check the reply to %s: %w", r.saga.name, res.CommandID, err)
	}
	if why != "" {
		r.cfg.Logger.WarnContext(ctx, "saga reply ignored", "saga", r.saga.name, "command", res.CommandID, "status", res.Status, "why", why)
		r.inputs.WithLabelValues(string(KindResult), "unverified").Inc()
		return nil
	}
	in := Input{ID: "result:" + res.CommandID, Kind: KindResult, Result: verified, Step: step}
	return r.handle(ctx, instance, false, in)
}

// verify checks res against what the saga sent and the event store
// recorded. It returns the recorded answer, or why res is not taken.
func (r *Runner) verify(ctx context.Context, res commands.Result) (commands.Result, string, error) {
	var ref eventstore.Ref
	err := r.cfg.DB.QueryRow(ctx, `SELECT aggregate_type, aggregate_id FROM saga_commands WHERE saga = $1 AND command_id = $2`,
		r.saga.name, res.CommandID).Scan(&ref.Type, &ref.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return res, "the saga sent no command with this id", nil
	}
	if err != nil {
		return res, "", err
	}
	if res.AggregateType != ref.Type || res.AggregateID != ref.ID {
		return res, fmt.Sprintf("the reply names %s/%s, the command went to %s", res.AggregateType, res.AggregateID, ref), nil
	}
	if len(r.cfg.CommandKey) > 0 {
		sig, err := r.commandSignature(ctx, res.CommandID)
		if err != nil {
			return res, "", err
		}
		if !commands.VerifyResult(r.cfg.CommandKey, sig, res) {
			return res, "the reply is not signed as the answer to the command the saga sent", nil
		}
	}
	recorded, err := r.cfg.Outcomes.CommandResult(ctx, ref, res.CommandID)
	var refused *eventstore.RefusedCommandError
	switch {
	case errors.Is(err, eventstore.ErrCommandNotFound):
		return res, "the event store holds no answer to this command", nil
	case errors.As(err, &refused):
		if string(res.Status) != refused.Refusal.Status {
			return res, fmt.Sprintf("the reply says %s, the event store recorded %s", res.Status, refused.Refusal.Status), nil
		}
		res.Reason, res.Version, res.EventIDs = refused.Refusal.Reason, refused.Refusal.Version, nil
	case err != nil:
		return res, "", err
	default:
		if res.Status != commands.StatusAccepted {
			return res, fmt.Sprintf("the reply says %s, the event store recorded the command accepted", res.Status), nil
		}
		res.Version = recorded.LastSeq
	}
	return res, "", nil
}

// commandSignature is the signature of the command the saga sent under
// commandID (as runOne signs it), the one its answer is bound to; "" for
// a command it only cancelled (saga_commands holds no body), whose answer
// the saga itself signs.
func (r *Runner) commandSignature(ctx context.Context, commandID string) (string, error) {
	var body []byte
	err := r.cfg.DB.QueryRow(ctx, `SELECT body FROM saga_commands WHERE saga = $1 AND command_id = $2`, r.saga.name, commandID).Scan(&body)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", err
	}
	if body == nil {
		return "", nil
	}
	var cmd commands.Command
	if err := json.Unmarshal(body, &cmd); err != nil {
		return "", fmt.Errorf("saga command %s: %w", commandID, err)
	}
	cmd, err = sortedPayload(cmd)
	if err != nil {
		return "", fmt.Errorf("saga command %s: %w", commandID, err)
	}
	return commands.SignCommand(r.cfg.CommandKey, cmd, ReplyTopic(r.cfg.Topics, r.saga.name)), nil
}

// sortedPayload returns cmd with its payload's object keys in sorted
// order (numbers as written). A command's signature covers its payload's
// bytes, and the saga's tables (jsonb) give a stored command back with
// its keys in their own order: a command is sent, and its signature
// computed again to check an answer, from this one form.
func sortedPayload(cmd commands.Command) (commands.Command, error) {
	dec := json.NewDecoder(bytes.NewReader(cmd.Payload))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return cmd, fmt.Errorf("payload: %w", err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return cmd, fmt.Errorf("payload: %w", err)
	}
	cmd.Payload = b
	return cmd, nil
}

// outboxRow is an effect waiting to run.
type outboxRow struct {
	seq  int64
	kind string
	body []byte
}

// Outbox row kinds.
const (
	outboxCommand = "command"
	outboxCancel  = "cancel"
)

// handle handles in for instance in one transaction and then runs the
// effects it queued.
func (r *Runner) handle(ctx context.Context, instance string, start bool, in Input) error {
	rows, result, err := r.transact(ctx, instance, start, in)
	if err != nil {
		return fmt.Errorf("sagas: %s: instance %s: %s: %w", r.saga.name, instance, in.ID, err)
	}
	r.inputs.WithLabelValues(string(in.Kind), result).Inc()
	if len(rows) > 0 {
		// The effects are committed: if running them fails here, the
		// sweep runs them later. The input is done either way.
		if err := r.run(ctx, rows); err != nil {
			r.cfg.Logger.WarnContext(ctx, "saga effects failed; the sweep retries them", "saga", r.saga.name, "instance", instance, "err", err)
		}
	}
	return nil
}

// transact is handle's transaction. It returns the outbox rows it queued
// and what became of the input (handled, duplicate, skipped).
func (r *Runner) transact(ctx context.Context, instance string, start bool, in Input) ([]outboxRow, string, error) {
	tx, err := r.cfg.DB.Begin(ctx)
	if err != nil {
		return nil, "", err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	name := r.saga.name
	tag, err := tx.Exec(ctx, `INSERT INTO saga_inputs (saga, input_id, instance) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, name, in.ID, instance)
	if err != nil {
		return nil, "", err
	}
	if tag.RowsAffected() == 0 {
		return nil, "duplicate", nil
	}
	if start {
		initial, err := r.saga.initial(instance)
		if err != nil {
			return nil, "", err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO saga_instances (saga, instance, state) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, name, instance, initial); err != nil {
			return nil, "", err
		}
	}
	var (
		state   []byte
		outcome string
	)
	err = tx.QueryRow(ctx, `SELECT state, outcome FROM saga_instances WHERE saga = $1 AND instance = $2 FOR UPDATE`, name, instance).Scan(&state, &outcome)
	if errors.Is(err, pgx.ErrNoRows) {
		r.cfg.Logger.DebugContext(ctx, "saga input for no instance", "saga", name, "instance", instance, "input", in.ID)
		return nil, "skipped", nil
	}
	if err != nil {
		return nil, "", err
	}
	if outcome != "" {
		return nil, "skipped", tx.Commit(ctx)
	}
	if in.Kind == KindAbort {
		if _, err := tx.Exec(ctx, `UPDATE saga_instances SET aborted_by = $3, abort_reason = $4, aborted_at = now() WHERE saga = $1 AND instance = $2`,
			name, instance, in.Actor, in.Reason); err != nil {
			return nil, "", err
		}
	}
	// The instance is locked first, its timeouts after, as every input
	// does: no two transactions wait for each other.
	if in.Kind == KindTimeout {
		tag, err := tx.Exec(ctx, `DELETE FROM saga_timeouts WHERE saga = $1 AND instance = $2 AND name = $3 AND due_at = $4`, name, instance, in.Timeout, in.Due)
		if err != nil {
			return nil, "", err
		}
		if tag.RowsAffected() == 0 {
			return nil, "skipped", nil // cleared or set again meanwhile: not due any more
		}
	}
	next, fx, err := handleInput(r.saga, instance, state, in, time.Now().UTC())
	if err != nil {
		return nil, "", err
	}
	if _, err := tx.Exec(ctx, `UPDATE saga_instances SET state = $3, outcome = $4, version = version + 1, updated_at = now() WHERE saga = $1 AND instance = $2`,
		name, instance, next, fx.outcome); err != nil {
		return nil, "", err
	}
	if err := r.writeTimeouts(ctx, tx, instance, fx); err != nil {
		return nil, "", err
	}
	rows, err := r.queue(ctx, tx, instance, fx)
	if err != nil {
		return nil, "", err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, "", err
	}
	return rows, "handled", nil
}

// writeTimeouts stores fx's timeouts: set, cleared, or all removed when
// the instance finished.
func (r *Runner) writeTimeouts(ctx context.Context, tx pgx.Tx, instance string, fx *Effects) error {
	name := r.saga.name
	if fx.outcome != "" {
		_, err := tx.Exec(ctx, `DELETE FROM saga_timeouts WHERE saga = $1 AND instance = $2`, name, instance)
		return err
	}
	for t := range fx.cleared {
		if _, err := tx.Exec(ctx, `DELETE FROM saga_timeouts WHERE saga = $1 AND instance = $2 AND name = $3`, name, instance, t); err != nil {
			return err
		}
	}
	for t, due := range fx.timeouts {
		if _, err := tx.Exec(ctx, `INSERT INTO saga_timeouts (saga, instance, name, due_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (saga, instance, name) DO UPDATE SET due_at = EXCLUDED.due_at`, name, instance, t, due); err != nil {
			return err
		}
	}
	return nil
}

// queue writes fx's commands and cancels to the outbox, in order. Each
// command is sealed first (commands.Seal, with the Opener when it is an
// eventstore.CommandSealer), so that the outbox, saga_commands and every
// send of it hold the same sealed bytes, signed alike; a command whose
// aggregate's subject was forgotten is queued as its own refusal
// (Cancellation with privacy.CodeForgotten) instead.
func (r *Runner) queue(ctx context.Context, tx pgx.Tx, instance string, fx *Effects) ([]outboxRow, error) {
	var rows []outboxRow
	add := func(kind string, v any) error {
		body, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode %s: %w", kind, err)
		}
		row := outboxRow{kind: kind, body: body}
		if err := tx.QueryRow(ctx, `INSERT INTO saga_outbox (saga, instance, kind, body) VALUES ($1, $2, $3, $4) RETURNING seq`,
			r.saga.name, instance, kind, body).Scan(&row.seq); err != nil {
			return err
		}
		rows = append(rows, row)
		return nil
	}
	sealer, _ := r.cfg.Opener.(eventstore.CommandSealer)
	var refused []Cancellation // the commands that cannot be sealed for a forgotten subject
	for _, cmd := range fx.sends {
		sealed, err := commands.Seal(ctx, sealer, cmd, len(r.cfg.CommandKey) > 0)
		if errors.Is(err, privacy.ErrForgotten) {
			refused = append(refused, Cancellation{CommandID: cmd.ID, AggregateType: cmd.AggregateType, AggregateID: cmd.AggregateID,
				Reason: err.Error(), CorrelationID: cmd.CorrelationID, Code: privacy.CodeForgotten})
			continue
		}
		if err != nil {
			return nil, err
		}
		cmd = sealed
		if err := add(outboxCommand, cmd); err != nil {
			return nil, err
		}
		// The command's body is kept for `sagas retry` (Operator.Retry).
		if _, err := tx.Exec(ctx, `INSERT INTO saga_commands (saga, command_id, instance, aggregate_type, aggregate_id, body) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (saga, command_id) DO UPDATE SET body = coalesce(saga_commands.body, EXCLUDED.body)`,
			r.saga.name, cmd.ID, instance, cmd.AggregateType, cmd.AggregateID, rows[len(rows)-1].body); err != nil {
			return nil, err
		}
	}
	for _, c := range append(slices.Clone(fx.cancels), refused...) {
		if err := add(outboxCancel, c); err != nil {
			return nil, err
		}
		// The cancelled command is the saga's (sent before saga_commands
		// existed, perhaps): its answer, the cancel's or the one that won,
		// is then taken too.
		if _, err := tx.Exec(ctx, `INSERT INTO saga_commands (saga, command_id, instance, aggregate_type, aggregate_id) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT DO NOTHING`, r.saga.name, c.CommandID, instance, c.AggregateType, c.AggregateID); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// run runs outbox rows in order and deletes the ones that ran; it stops
// at the first failure (the rest wait for the sweep).
func (r *Runner) run(ctx context.Context, rows []outboxRow) error {
	var done []int64
	var failed error
	for _, row := range rows {
		if failed = r.runOne(ctx, row); failed != nil {
			break
		}
		done = append(done, row.seq)
	}
	if len(done) > 0 {
		if _, err := r.cfg.DB.Exec(ctx, `DELETE FROM saga_outbox WHERE seq = ANY($1)`, done); err != nil {
			return errors.Join(failed, fmt.Errorf("delete outbox rows: %w", err))
		}
	}
	return failed
}

// runOne publishes a command, or cancels one and publishes its answer.
func (r *Runner) runOne(ctx context.Context, row outboxRow) error {
	switch row.kind {
	case outboxCommand:
		var cmd commands.Command
		if err := json.Unmarshal(row.body, &cmd); err != nil {
			return fmt.Errorf("outbox row %d: %w", row.seq, err)
		}
		// Sealed when it was queued; a row queued before sealing began
		// is sealed now, as every sender seals.
		sealer, _ := r.cfg.Opener.(eventstore.CommandSealer)
		sealed, err := commands.Seal(ctx, sealer, cmd, len(r.cfg.CommandKey) > 0)
		if errors.Is(err, privacy.ErrForgotten) {
			// It can never be sent: its aggregate's subject was forgotten.
			// The saga gets the answer the handlers would give.
			return r.answer(ctx, Cancellation{CommandID: cmd.ID, AggregateType: cmd.AggregateType, AggregateID: cmd.AggregateID,
				Reason: err.Error(), CorrelationID: cmd.CorrelationID, Code: privacy.CodeForgotten})
		}
		if err != nil {
			return fmt.Errorf("outbox row %d: %w", row.seq, err)
		}
		if cmd, err = sortedPayload(sealed); err != nil {
			return fmt.Errorf("outbox row %d: %w", row.seq, err)
		}
		msg, err := cmd.ToMessage()
		if err != nil {
			return fmt.Errorf("outbox row %d: %w", row.seq, err)
		}
		tracing.Inject(ctx, msg) // the trace of the input that decided it, when run right after
		msg.Metadata.Set(commands.MetadataReplyTo, ReplyTopic(r.cfg.Topics, r.saga.name))
		if len(r.cfg.CommandKey) > 0 {
			commands.Signer{KeyID: commands.DeploymentKeyID, Key: r.cfg.CommandKey}.SignMessage(msg, cmd)
		}
		if err := r.cfg.Publisher.Publish(cmd.Topic(r.cfg.Topics), msg); err != nil {
			return fmt.Errorf("send %s: %w", cmd.ID, err)
		}
		r.effects.WithLabelValues("command").Inc()
		return nil
	case outboxCancel:
		var c Cancellation
		if err := json.Unmarshal(row.body, &c); err != nil {
			return fmt.Errorf("outbox row %d: %w", row.seq, err)
		}
		return r.answer(ctx, c)
	}
	return fmt.Errorf("outbox row %d: unknown kind %q", row.seq, row.kind)
}

// answer refuses the command c cancels (Runner.cancel) and publishes its
// answer on the saga's replies topic, signed as the handlers sign.
func (r *Runner) answer(ctx context.Context, c Cancellation) error {
	res, err := r.cancel(ctx, c)
	if err != nil {
		return err
	}
	if len(r.cfg.CommandKey) > 0 {
		sig, err := r.commandSignature(ctx, c.CommandID)
		if err != nil {
			return fmt.Errorf("sign the answer of cancelled %s: %w", c.CommandID, err)
		}
		res.Signature = commands.SignResult(r.cfg.CommandKey, sig, res)
	}
	msg, err := res.ToMessage(c.CorrelationID)
	if err != nil {
		return err
	}
	if err := r.cfg.Publisher.Publish(ReplyTopic(r.cfg.Topics, r.saga.name), msg); err != nil {
		return fmt.Errorf("publish the answer of cancelled %s: %w", c.CommandID, err)
	}
	r.effects.WithLabelValues("cancel").Inc()
	return nil
}

// cancel records c's refusal unless the command was answered before, and
// returns the command's answer: the refusal, or the earlier answer.
func (r *Runner) cancel(ctx context.Context, c Cancellation) (commands.Result, error) {
	ref := eventstore.Ref{Type: c.AggregateType, ID: c.AggregateID}
	res := commands.Result{CommandID: c.CommandID, AggregateType: ref.Type, AggregateID: ref.ID, Status: commands.StatusRejected, Reason: c.Reason, Code: c.Code}
	prior, err := r.cfg.Outcomes.RecordRefusal(ctx, ref, c.CommandID, eventstore.Refusal{Status: string(commands.StatusRejected), Reason: c.Reason, Code: c.Code})
	var refused *eventstore.RefusedCommandError
	switch {
	case errors.As(err, &refused):
		res.Status, res.Reason, res.Code, res.Version, res.Duplicate = commands.Status(refused.Refusal.Status), refused.Refusal.Reason, refused.Refusal.Code, refused.Refusal.Version, true
	case err != nil:
		return res, fmt.Errorf("cancel %s: %w", c.CommandID, err)
	case prior.Duplicate:
		res.Status, res.Reason, res.Version, res.EventIDs, res.Duplicate = commands.StatusAccepted, "", prior.LastSeq, prior.EventIDs, true
	}
	return res, nil
}

// poll fires due timeouts and sweeps left-over outbox rows every
// PollInterval until ctx ends.
func (r *Runner) poll(ctx context.Context) {
	t := time.NewTicker(r.cfg.PollInterval)
	defer t.Stop()
	var pruned time.Time
	for {
		if err := r.fireTimeouts(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.WarnContext(ctx, "saga timeouts", "saga", r.saga.name, "err", err)
		}
		if err := r.sweep(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.WarnContext(ctx, "saga outbox sweep", "saga", r.saga.name, "err", err)
		}
		if time.Since(pruned) >= min(pruneEvery, r.cfg.KeepInputs) {
			if err := r.prune(ctx); err != nil && ctx.Err() == nil {
				r.cfg.Logger.WarnContext(ctx, "saga inputs prune", "saga", r.saga.name, "err", err)
			}
			pruned = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pruneEvery is how often the Runner deletes the input ids of instances
// finished longer than KeepInputs ago (more often when KeepInputs is
// shorter).
const pruneEvery = time.Minute

// prune deletes the input ids and the sent commands of instances that
// finished more than KeepInputs ago.
func (r *Runner) prune(ctx context.Context) error {
	tag, err := r.cfg.DB.Exec(ctx, `DELETE FROM saga_inputs i USING saga_instances s
		WHERE i.saga = $1 AND s.saga = $1 AND s.instance = i.instance AND s.outcome <> '' AND s.updated_at < now() - make_interval(secs => $2)`,
		r.saga.name, r.cfg.KeepInputs.Seconds())
	if err != nil {
		return err
	}
	if n := tag.RowsAffected(); n > 0 {
		r.cfg.Logger.DebugContext(ctx, "saga inputs pruned", "saga", r.saga.name, "rows", n)
	}
	_, err = r.cfg.DB.Exec(ctx, `DELETE FROM saga_commands c USING saga_instances s
		WHERE c.saga = $1 AND s.saga = $1 AND s.instance = c.instance AND s.outcome <> '' AND s.updated_at < now() - make_interval(secs => $2)`,
		r.saga.name, r.cfg.KeepInputs.Seconds())
	return err
}

// retryTimeoutAfter is how long a timeout whose handling failed
// permanently waits before it is tried again.
const retryTimeoutAfter = 30 * time.Second

// fireTimeouts handles the timeouts that are due, oldest first.
func (r *Runner) fireTimeouts(ctx context.Context) error {
	rows, err := r.cfg.DB.Query(ctx, `SELECT instance, name, due_at FROM saga_timeouts WHERE saga = $1 AND due_at <= now() ORDER BY due_at LIMIT 100`, r.saga.name)
	if err != nil {
		return err
	}
	type due struct {
		instance, name string
		at             time.Time
	}
	dues, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (due, error) {
		var d due
		return d, row.Scan(&d.instance, &d.name, &d.at)
	})
	if err != nil {
		return err
	}
	for _, d := range dues {
		in := Input{ID: "timeout:" + d.name + ":" + d.at.UTC().Format(time.RFC3339Nano), Kind: KindTimeout, Timeout: d.name, Due: d.at}
		err := r.handle(ctx, d.instance, false, in)
		if err == nil {
			continue
		}
		if ctx.Err() != nil || !eventstore.IsPermanent(err) {
			return err
		}
		// A saga that cannot handle its own timeout has a bug; try
		// again later rather than every poll, and say so.
		r.cfg.Logger.ErrorContext(ctx, "saga timeout failed permanently; retrying later", "saga", r.saga.name, "instance", d.instance,
			"timeout", d.name, "retry_in", retryTimeoutAfter, "err", err)
		if _, err := r.cfg.DB.Exec(ctx, `UPDATE saga_timeouts SET due_at = now() + make_interval(secs => $4) WHERE saga = $1 AND instance = $2 AND name = $3`,
			r.saga.name, d.instance, d.name, retryTimeoutAfter.Seconds()); err != nil {
			return err
		}
	}
	return nil
}

// sweep runs outbox rows older than SweepAfter: effects a crash left
// between the commit and their run.
func (r *Runner) sweep(ctx context.Context) error {
	rows, err := r.cfg.DB.Query(ctx, `SELECT seq, kind, body FROM saga_outbox WHERE saga = $1 AND created_at < now() - make_interval(secs => $2) ORDER BY seq LIMIT 100`,
		r.saga.name, r.cfg.SweepAfter.Seconds())
	if err != nil {
		return err
	}
	left, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (outboxRow, error) {
		var o outboxRow
		return o, row.Scan(&o.seq, &o.kind, &o.body)
	})
	if err != nil || len(left) == 0 {
		return err
	}
	r.cfg.Logger.InfoContext(ctx, "saga outbox: running effects left by an interrupted handler", "saga", r.saga.name, "rows", len(left))
	return r.run(ctx, left)
}
