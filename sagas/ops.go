package sagas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
)

// Statuses of an instance that has no outcome yet (Overview.Status); a
// finished instance's status is its outcome.
const (
	// StatusRunning: the instance waits for an answer, an event or a
	// timeout, and nothing it waits for is stuck.
	StatusRunning = "running"
	// StatusStuck: an effect of the instance is stuck (Effect.Stuck).
	StatusStuck = "stuck"
	// StatusAborting: an operator aborted the instance and its saga's
	// compensation is waiting for answers (a stuck one shows StatusStuck;
	// the List filter StatusAborting selects both).
	StatusAborting = "aborting"
	// StatusFinished is a List filter for every finished instance.
	StatusFinished = "finished"
)

// DefaultStuckAfter is how long an effect may wait before it counts as
// stuck (see Effect.Stuck).
const DefaultStuckAfter = 30 * time.Second

// ErrFinished is wrapped when an operation needs a running instance and
// the instance has finished.
var ErrFinished = errors.New("sagas: instance finished")

// Effect is a command an instance sent or queued, or a cancel it queued.
type Effect struct {
	// Kind is "command" or "cancel".
	Kind string
	// CommandID is the command's id (<saga>.<instance>.<step>), Step its
	// step, Type its type ("" for a cancel, or a command whose body is
	// unknown), Aggregate where it goes.
	CommandID, Step, Type string
	Aggregate             eventstore.Ref
	// Queued says the effect is an outbox row not run yet (Seq is the
	// row); otherwise the command was sent.
	Queued bool
	Seq    int64
	// Since is when the effect was queued.
	Since time.Time
	// Answered says the saga handled the command's answer (only for
	// sent commands; kept while the instance runs and KeepInputs after).
	Answered bool
	// Answer is the event store's recorded answer to the command, when
	// it was looked up (Inspect with records) and there is one.
	Answer *Answer
	// Resendable says the command's body is known (saga_commands.body,
	// migration 010), so Retry can send it again.
	Resendable bool
	// Stuck says the effect waited longer than the stuck age: an outbox
	// row the Runner did not run (its sweep runs rows older than
	// SweepAfter, so no Runner runs, or its publishes or cancels fail), or
	// a sent command whose answer the saga has not handled (the command
	// was lost or poisoned before it was recorded, its handlers are down,
	// or its reply was lost or refused as unverified, for instance an
	// unsigned command refused without a record).
	Stuck bool
}

// Answer is the event store's record of a command's answer.
type Answer struct {
	Status  commands.Status
	Reason  string
	Version int64
}

// Timeout is a pending timeout.
type Timeout struct {
	Name string
	Due  time.Time
}

// AbortRecord is an operator's abort of an instance (saga_instances'
// aborted_by, abort_reason and aborted_at).
type AbortRecord struct {
	Actor, Reason string
	At            time.Time
}

// Overview is an instance as List shows it.
type Overview struct {
	Saga, Instance string
	// Status is StatusRunning, StatusStuck or StatusAborting while the
	// instance runs, then its Outcome.
	Status  string
	Outcome string
	// Version counts the inputs that changed the instance.
	Version              int64
	CreatedAt, UpdatedAt time.Time
	// Pending are its effects not answered or not run yet, oldest first:
	// queued outbox rows and sent commands whose answer the saga has not
	// handled.
	Pending []Effect
	// Timeouts are its pending timeouts, earliest first.
	Timeouts []Timeout
	// Stuck says one of Pending is stuck.
	Stuck bool
	// Abort is the operator's abort, if any.
	Abort *AbortRecord
}

// Filter selects instances for List.
type Filter struct {
	// Saga, when set, lists one saga's instances.
	Saga string
	// Status, when set, is StatusRunning (every instance without an
	// outcome), StatusStuck (instances with a stuck effect, finished or
	// not), StatusAborting (aborted instances without an outcome yet,
	// stuck or not), StatusFinished (every instance with an outcome), or
	// an outcome ("completed", OutcomeAborted, …).
	Status string
	// StuckAfter is how long an effect waits before it is stuck (default
	// DefaultStuckAfter).
	StuckAfter time.Duration
	// Limit is the most instances returned (default 100).
	Limit int
}

// List returns the instances f selects, oldest first, with their pending
// effects and timeouts. It reads db only (the saga tables, migrations 006,
// 008 and 010).
func List(ctx context.Context, db *pgxpool.Pool, f Filter) ([]Overview, error) {
	if f.StuckAfter <= 0 {
		f.StuckAfter = DefaultStuckAfter
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	if err := Ready(ctx, db); err != nil {
		return nil, err
	}
	// The filter in SQL, so that the limit is Postgres'.
	cond, args := "true", []any{f.Saga, f.Limit}
	switch f.Status {
	case "":
	case StatusRunning:
		cond = "s.outcome = ''"
	case StatusAborting:
		cond = "s.outcome = '' AND s.aborted_at IS NOT NULL"
	case StatusFinished:
		cond = "s.outcome <> ''"
	case StatusStuck:
		cond = `(EXISTS (SELECT 1 FROM saga_outbox o WHERE o.saga = s.saga AND o.instance = s.instance AND o.created_at <= now() - make_interval(secs => $3))
			OR EXISTS (SELECT 1 FROM saga_commands c WHERE c.saga = s.saga AND c.instance = s.instance AND c.created_at <= now() - make_interval(secs => $3)
				AND NOT EXISTS (SELECT 1 FROM saga_inputs i WHERE i.saga = c.saga AND i.input_id = 'result:' || c.command_id)))`
		args = append(args, f.StuckAfter.Seconds())
	default:
		cond, args = "s.outcome = $3", append(args, f.Status)
	}
	rows, err := db.Query(ctx, `SELECT s.saga, s.instance, s.outcome, s.version, s.created_at, s.updated_at FROM saga_instances s
		WHERE ($1 = '' OR s.saga = $1) AND `+cond+` ORDER BY s.created_at, s.saga, s.instance LIMIT $2`, args...)
	if err != nil {
		return nil, fmt.Errorf("sagas: list: %w", err)
	}
	all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Overview, error) {
		var o Overview
		return o, row.Scan(&o.Saga, &o.Instance, &o.Outcome, &o.Version, &o.CreatedAt, &o.UpdatedAt)
	})
	if err != nil {
		return nil, fmt.Errorf("sagas: list: %w", err)
	}
	if err := fill(ctx, db, f.StuckAfter, all); err != nil {
		return nil, fmt.Errorf("sagas: list: %w", err)
	}
	if f.Status != StatusStuck {
		return all, nil
	}
	out := all[:0]
	for _, o := range all {
		if o.Stuck { // as of this process's clock (the query used Postgres')
			out = append(out, o)
		}
	}
	return out, nil
}

// key names an instance in fill's maps.
func key(saga, instance string) string { return saga + "\x00" + instance }

// fill adds to each overview its pending effects, timeouts and abort,
// and sets its status.
func fill(ctx context.Context, db *pgxpool.Pool, stuckAfter time.Duration, all []Overview) error {
	if len(all) == 0 {
		return nil
	}
	idx := map[string]int{}
	var sagaNames, instances []string
	for i, o := range all {
		idx[key(o.Saga, o.Instance)] = i
		sagaNames, instances = append(sagaNames, o.Saga), append(instances, o.Instance)
	}
	// The rows of these instances: ($1[i], $2[i]) pairs.
	const these = `(saga, instance) IN (SELECT * FROM unnest($1::text[], $2::text[]))`
	now := time.Now()
	stuck := func(since time.Time) bool { return now.Sub(since) >= stuckAfter }
	// Queued effects.
	rows, err := db.Query(ctx, `SELECT saga, instance, seq, kind, body, created_at FROM saga_outbox WHERE `+these+` ORDER BY seq`, sagaNames, instances)
	if err != nil {
		return err
	}
	var (
		s, in, kind string
		seq         int64
		body        []byte
		at          time.Time
	)
	if _, err := pgx.ForEachRow(rows, []any{&s, &in, &seq, &kind, &body, &at}, func() error {
		i, ok := idx[key(s, in)]
		if !ok {
			return nil
		}
		e := outboxEffect(s, outboxRow{seq: seq, kind: kind, body: body})
		e.Since, e.Stuck = at, stuck(at)
		all[i].Pending = append(all[i].Pending, e)
		return nil
	}); err != nil {
		return err
	}
	// Sent commands whose answer the saga has not handled.
	rows, err = db.Query(ctx, `SELECT c.saga, c.instance, c.command_id, c.aggregate_type, c.aggregate_id, c.body, c.created_at FROM saga_commands c
		WHERE (c.saga, c.instance) IN (SELECT * FROM unnest($1::text[], $2::text[]))
		AND NOT EXISTS (SELECT 1 FROM saga_inputs i WHERE i.saga = c.saga AND i.input_id = 'result:' || c.command_id)
		AND NOT EXISTS (SELECT 1 FROM saga_outbox o WHERE o.saga = c.saga AND o.instance = c.instance AND o.body->>'id' = c.command_id)
		ORDER BY c.created_at, c.command_id`, sagaNames, instances)
	if err != nil {
		return err
	}
	var id, aggType, aggID string
	if _, err := pgx.ForEachRow(rows, []any{&s, &in, &id, &aggType, &aggID, &body, &at}, func() error {
		i, ok := idx[key(s, in)]
		if !ok {
			return nil
		}
		e := sentEffect(s, id, eventstore.Ref{Type: aggType, ID: aggID}, body)
		e.Since, e.Stuck = at, stuck(at)
		all[i].Pending = append(all[i].Pending, e)
		return nil
	}); err != nil {
		return err
	}
	rows, err = db.Query(ctx, `SELECT saga, instance, name, due_at FROM saga_timeouts WHERE `+these+` ORDER BY due_at`, sagaNames, instances)
	if err != nil {
		return err
	}
	var name string
	if _, err := pgx.ForEachRow(rows, []any{&s, &in, &name, &at}, func() error {
		if i, ok := idx[key(s, in)]; ok {
			all[i].Timeouts = append(all[i].Timeouts, Timeout{Name: name, Due: at})
		}
		return nil
	}); err != nil {
		return err
	}
	rows, err = db.Query(ctx, `SELECT saga, instance, aborted_by, abort_reason, aborted_at FROM saga_instances
		WHERE aborted_at IS NOT NULL AND `+these, sagaNames, instances)
	if err != nil {
		return err
	}
	var actor, reason string
	if _, err := pgx.ForEachRow(rows, []any{&s, &in, &actor, &reason, &at}, func() error {
		if i, ok := idx[key(s, in)]; ok {
			all[i].Abort = &AbortRecord{Actor: actor, Reason: reason, At: at}
		}
		return nil
	}); err != nil {
		return err
	}
	for i := range all {
		o := &all[i]
		sort.SliceStable(o.Pending, func(a, b int) bool { return o.Pending[a].Since.Before(o.Pending[b].Since) })
		for _, e := range o.Pending {
			o.Stuck = o.Stuck || e.Stuck
		}
		switch {
		case o.Outcome != "":
			o.Status = o.Outcome
		case o.Stuck:
			o.Status = StatusStuck
		case o.Abort != nil:
			o.Status = StatusAborting
		default:
			o.Status = StatusRunning
		}
	}
	return nil
}

// outboxEffect describes an outbox row of saga.
func outboxEffect(saga string, row outboxRow) Effect {
	e := Effect{Kind: row.kind, Queued: true, Seq: row.seq}
	switch row.kind {
	case outboxCommand:
		var cmd commands.Command
		if json.Unmarshal(row.body, &cmd) == nil {
			e.CommandID, e.Type, e.Aggregate, e.Resendable = cmd.ID, cmd.Type, eventstore.Ref{Type: cmd.AggregateType, ID: cmd.AggregateID}, true
		}
	case outboxCancel:
		var c Cancellation
		if json.Unmarshal(row.body, &c) == nil {
			e.CommandID, e.Aggregate = c.CommandID, eventstore.Ref{Type: c.AggregateType, ID: c.AggregateID}
		}
	}
	_, e.Step, _ = ParseCommandID(saga, e.CommandID)
	return e
}

// sentEffect describes a command of saga recorded in saga_commands (body
// is its JSON, nil when unknown).
func sentEffect(saga, id string, ref eventstore.Ref, body []byte) Effect {
	e := Effect{Kind: outboxCommand, CommandID: id, Aggregate: ref}
	_, e.Step, _ = ParseCommandID(saga, id)
	var cmd commands.Command
	if len(body) > 0 && json.Unmarshal(body, &cmd) == nil {
		e.Type, e.Resendable = cmd.Type, true
	}
	return e
}

// HandledInput is an input an instance handled (table saga_inputs; the
// ids of a finished instance's inputs are pruned after KeepInputs).
type HandledInput struct {
	// ID is the input's id: event:<id>, outbound:<id>, result:<command
	// id>, timeout:<name>:<due>, abort:<instance>.
	ID        string
	HandledAt time.Time
}

// Detail is one instance as Inspect shows it.
type Detail struct {
	Overview
	// State is the instance's state as JSON.
	State json.RawMessage
	// Inputs are the inputs it handled, in order.
	Inputs []HandledInput
	// Commands are every command it sent or queued (and every command it
	// cancelled), in order, answered or not, with the event store's
	// answers when Inspect had records.
	Commands []Effect
	// Outbox are its effects not run yet.
	Outbox []Effect
}

// CommandRecords reads the event store's record of a command's answer
// (eventstore/dynamodb.Store; every Outcomes has it).
type CommandRecords interface {
	CommandResult(ctx context.Context, ref eventstore.Ref, commandID string) (eventstore.AppendResult, error)
}

// Inspect returns the instance of saga with its state, the inputs it
// handled, the commands it sent with their answers (looked up in records;
// nil: not looked up), its outbox rows and timeouts, and its abort. An
// instance that does not exist is an error wrapping ErrNoInstance.
func Inspect(ctx context.Context, db *pgxpool.Pool, records CommandRecords, saga, instance string, stuckAfter time.Duration) (Detail, error) {
	if stuckAfter <= 0 {
		stuckAfter = DefaultStuckAfter
	}
	if err := Ready(ctx, db); err != nil {
		return Detail{}, err
	}
	in, err := Get(ctx, db, saga, instance)
	if err != nil {
		return Detail{}, err
	}
	d := Detail{Overview: Overview{Saga: saga, Instance: instance, Outcome: in.Outcome, Version: in.Version, CreatedAt: in.CreatedAt, UpdatedAt: in.UpdatedAt},
		State: in.State}
	all := []Overview{d.Overview}
	if err := fill(ctx, db, stuckAfter, all); err != nil {
		return Detail{}, fmt.Errorf("sagas: inspect %s instance %s: %w", saga, instance, err)
	}
	d.Overview = all[0]
	for _, e := range d.Pending {
		if e.Queued {
			d.Outbox = append(d.Outbox, e)
		}
	}
	rows, err := db.Query(ctx, `SELECT input_id, handled_at FROM saga_inputs WHERE saga = $1 AND instance = $2 ORDER BY handled_at, input_id`, saga, instance)
	if err != nil {
		return Detail{}, fmt.Errorf("sagas: inspect %s instance %s: %w", saga, instance, err)
	}
	d.Inputs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (HandledInput, error) {
		var h HandledInput
		return h, row.Scan(&h.ID, &h.HandledAt)
	})
	if err != nil {
		return Detail{}, fmt.Errorf("sagas: inspect %s instance %s: %w", saga, instance, err)
	}
	answered := map[string]bool{}
	for _, h := range d.Inputs {
		if id, ok := strings.CutPrefix(h.ID, "result:"); ok {
			answered[id] = true
		}
	}
	pending := map[string]Effect{}
	for _, e := range d.Pending {
		if !e.Queued {
			pending[e.CommandID] = e
		}
	}
	rows, err = db.Query(ctx, `SELECT command_id, aggregate_type, aggregate_id, body, created_at FROM saga_commands WHERE saga = $1 AND instance = $2
		ORDER BY created_at, command_id`, saga, instance)
	if err != nil {
		return Detail{}, fmt.Errorf("sagas: inspect %s instance %s: %w", saga, instance, err)
	}
	var (
		id, aggType, aggID string
		body               []byte
		at                 time.Time
	)
	if _, err := pgx.ForEachRow(rows, []any{&id, &aggType, &aggID, &body, &at}, func() error {
		e := sentEffect(saga, id, eventstore.Ref{Type: aggType, ID: aggID}, body)
		e.Since, e.Answered = at, answered[id]
		if p, ok := pending[id]; ok {
			e.Stuck = p.Stuck
		}
		d.Commands = append(d.Commands, e)
		return nil
	}); err != nil {
		return Detail{}, fmt.Errorf("sagas: inspect %s instance %s: %w", saga, instance, err)
	}
	if records != nil {
		for i := range d.Commands {
			a, err := recordedAnswer(ctx, records, d.Commands[i].Aggregate, d.Commands[i].CommandID)
			if err != nil {
				return Detail{}, fmt.Errorf("sagas: inspect %s instance %s: %w", saga, instance, err)
			}
			d.Commands[i].Answer = a
		}
	}
	return d, nil
}

// recordedAnswer returns the event store's answer to the command id on
// ref, nil when it holds none.
func recordedAnswer(ctx context.Context, records CommandRecords, ref eventstore.Ref, id string) (*Answer, error) {
	res, err := records.CommandResult(ctx, ref, id)
	var refused *eventstore.RefusedCommandError
	switch {
	case errors.Is(err, eventstore.ErrCommandNotFound):
		return nil, nil
	case errors.As(err, &refused):
		return &Answer{Status: commands.Status(refused.Refusal.Status), Reason: refused.Refusal.Reason, Version: refused.Refusal.Version}, nil
	case err != nil:
		return nil, fmt.Errorf("the answer to %s on %s: %w", id, ref, err)
	}
	return &Answer{Status: commands.StatusAccepted, Version: res.LastSeq}, nil
}

// OperatorConfig configures an Operator.
type OperatorConfig struct {
	// Saga is the saga whose instances are operated on. Required.
	Saga Definition
	// DB holds the saga tables (migrations 006, 008 and 010). Required.
	DB *pgxpool.Pool
	// Publisher publishes the commands, and the answers of cancels,
	// that Abort's compensation and Retry send. Required.
	Publisher message.Publisher
	// Outcomes is the command handlers' event store: cancels record
	// their refusals in it, and Retry reads the answers it recorded.
	// Required.
	Outcomes Outcomes
	// CommandKey signs the commands sent, as the Runner's
	// (Config.CommandKey): a deployment whose command handlers hold a key
	// refuses unsigned commands under the saga's ids.
	CommandKey []byte
	// Topics is the topic namespace.
	Topics bus.Topics
	// StuckAfter is how long an effect waits before Retry takes it as
	// stuck (default DefaultStuckAfter).
	StuckAfter time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *OperatorConfig) setDefaults() {
	if c.StuckAfter <= 0 {
		c.StuckAfter = DefaultStuckAfter
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first missing or invalid field.
func (c OperatorConfig) Validate() error {
	switch {
	case c.Saga == nil:
		return &eventstore.ValidationError{Field: "OperatorConfig.Saga", Reason: "is nil"}
	case c.DB == nil:
		return &eventstore.ValidationError{Field: "OperatorConfig.DB", Reason: "is nil"}
	case c.Publisher == nil:
		return &eventstore.ValidationError{Field: "OperatorConfig.Publisher", Reason: "is nil"}
	case c.Outcomes == nil:
		return &eventstore.ValidationError{Field: "OperatorConfig.Outcomes", Reason: "is nil"}
	case len(c.CommandKey) > 0 && len(c.CommandKey) < commands.MinKeyLength:
		return &eventstore.ValidationError{Field: "OperatorConfig.CommandKey", Reason: fmt.Sprintf("has %d bytes, want at least %d", len(c.CommandKey), commands.MinKeyLength)}
	}
	return nil
}

// Operator aborts a saga's instances and retries their stuck effects,
// beside the saga's running Runners: it writes the same tables under the
// same instance lock and sends through the same outbox. Safe for
// concurrent use.
type Operator struct {
	cfg OperatorConfig
	r   *Runner
}

// NewOperator validates cfg and returns an Operator.
func NewOperator(cfg OperatorConfig) (*Operator, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	saga, err := cfg.Saga.compile()
	if err != nil {
		return nil, err
	}
	r := newRunner(Config{Saga: cfg.Saga, DB: cfg.DB, Publisher: cfg.Publisher, Outcomes: cfg.Outcomes, CommandKey: cfg.CommandKey,
		Topics: cfg.Topics, Logger: cfg.Logger}, saga)
	return &Operator{cfg: cfg, r: r}, nil
}

// AbortResult is what Abort did.
type AbortResult struct {
	// Outcome is the instance's outcome after the abort: OutcomeAborted
	// (or the saga's own) when it finished at once, "" while its
	// compensation waits for answers.
	Outcome string
	// Compensated says the saga has an Abort hook, which ran.
	Compensated bool
	// Effects are the commands and cancels the compensation queued (run
	// right after the commit; a failure leaves them to the Runner's
	// sweep or Retry, see Err).
	Effects []Effect
	// Err is why running the effects failed, if it did: they stay in the
	// outbox.
	Err error
}

// Abort ends a running instance: in one transaction it records the
// abort (with the instance, and the input abort:<instance> in saga_inputs),
// hands the saga's Abort hook the instance's state (without one, the
// instance finishes with OutcomeAborted), and queues the compensation's
// effects in the outbox; then it runs them, as the Runner does. Effects
// queued before the abort are not withdrawn (they may be on their way): a
// compensation cancels what it must. An instance that does not exist is
// an error wrapping ErrNoInstance; a finished one, or one aborted before,
// an error wrapping ErrFinished (for an abort in progress, with its
// record); reason is required (*eventstore.ValidationError).
func (o *Operator) Abort(ctx context.Context, instance, actor, reason string) (AbortResult, error) {
	name := o.r.saga.name
	if strings.TrimSpace(reason) == "" {
		return AbortResult{}, &eventstore.ValidationError{Field: "reason", Reason: "say why the instance is aborted"}
	}
	if actor == "" {
		return AbortResult{}, &eventstore.ValidationError{Field: "actor", Reason: "is empty"}
	}
	cur, err := Get(ctx, o.cfg.DB, name, instance)
	if err != nil {
		return AbortResult{}, err
	}
	if cur.Outcome != "" {
		return AbortResult{}, fmt.Errorf("saga %s instance %s ended %s: %w", name, instance, cur.Outcome, ErrFinished)
	}
	in := Input{ID: "abort:" + instance, Kind: KindAbort, Actor: actor, Reason: reason}
	rows, result, err := o.r.transact(ctx, instance, false, in)
	if err != nil {
		return AbortResult{}, fmt.Errorf("sagas: %s: abort instance %s: %w", name, instance, err)
	}
	switch result {
	case "duplicate":
		return AbortResult{}, fmt.Errorf("saga %s instance %s was aborted before (its compensation runs): %w", name, instance, ErrFinished)
	case "skipped": // finished meanwhile, or gone
		if cur, err = Get(ctx, o.cfg.DB, name, instance); err != nil {
			return AbortResult{}, err
		}
		return AbortResult{}, fmt.Errorf("saga %s instance %s ended %s: %w", name, instance, cur.Outcome, ErrFinished)
	}
	o.r.inputs.WithLabelValues(string(KindAbort), result).Inc()
	res := AbortResult{Compensated: o.r.saga.compensates}
	for _, row := range rows {
		res.Effects = append(res.Effects, outboxEffect(name, row))
	}
	if len(rows) > 0 {
		if res.Err = o.r.run(ctx, rows); res.Err != nil {
			o.cfg.Logger.WarnContext(ctx, "saga abort: effects failed; the Runner's sweep or a retry runs them", "saga", name, "instance", instance, "err", res.Err)
		}
	}
	if cur, err = Get(ctx, o.cfg.DB, name, instance); err != nil {
		return res, err
	}
	res.Outcome = cur.Outcome
	o.cfg.Logger.InfoContext(ctx, "saga instance aborted", "saga", name, "instance", instance, "actor", actor, "reason", reason,
		"outcome", res.Outcome, "effects", len(res.Effects))
	return res, nil
}

// What Retry did with a stuck effect (Retried.Action).
const (
	// RetryRanOutbox: the outbox row was run (the command published, or
	// the cancel recorded and its answer published) and deleted.
	RetryRanOutbox = "outbox row run"
	// RetryResent: the command was published again under its own id;
	// the command handlers handle it, or answer the answer they recorded.
	RetryResent = "command re-sent"
	// RetryRepublishedAnswer: the event store holds the command's answer
	// but the saga never took it (the reply was lost); the recorded answer
	// was published on the replies topic, where the saga checks it
	// against the store as any reply.
	RetryRepublishedAnswer = "answer re-published"
	// RetryNotResendable: the command was queued before migration 010
	// and its body is unknown; nothing was sent (abort the instance, or
	// wait for its deadline to cancel it).
	RetryNotResendable = "not re-sent: body unknown"
)

// Retried is one stuck effect Retry acted on.
type Retried struct {
	Effect Effect
	// Action is RetryRanOutbox, RetryResent, RetryRepublishedAnswer or
	// RetryNotResendable.
	Action string
	// Err is why the action failed, if it did.
	Err error
}

// RetryResult is what Retry did.
type RetryResult struct {
	// Retried are the stuck effects, in order.
	Retried []Retried
}

// Err joins the effects' errors.
func (r RetryResult) Err() error {
	var errs []error
	for _, e := range r.Retried {
		if e.Err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", e.Effect.Kind, e.Effect.CommandID, e.Err))
		}
	}
	return errors.Join(errs...)
}

// Retry acts on the instance's stuck effects (Effect.Stuck, with the
// Operator's StuckAfter), running or finished (a finished instance's last
// commands, such as the one recording its outcome, may be stuck too):
//
//   - an outbox row is run and deleted, as the Runner's sweep would;
//   - a sent command whose answer the saga has not handled is looked up
//     in the event store: with no recorded answer it is published again
//     under its own command id (signed with CommandKey), so the command
//     handlers handle it once whatever else delivers it; with one, the
//     recorded answer is published on the replies topic.
//
// Everything it sends is deduplicated downstream by id (the handlers by
// command id, the saga by input id), so a Retry racing a Runner, or run
// twice, takes effect once. An instance that does not exist is an error
// wrapping ErrNoInstance; one with nothing stuck returns an empty result.
func (o *Operator) Retry(ctx context.Context, instance string) (RetryResult, error) {
	name := o.r.saga.name
	d, err := Inspect(ctx, o.cfg.DB, nil, name, instance, o.cfg.StuckAfter)
	if err != nil {
		return RetryResult{}, err
	}
	var res RetryResult
	ran := map[string]bool{}
	for _, e := range d.Outbox {
		if !e.Stuck {
			continue
		}
		var row outboxRow
		err := o.cfg.DB.QueryRow(ctx, `SELECT seq, kind, body FROM saga_outbox WHERE seq = $1`, e.Seq).Scan(&row.seq, &row.kind, &row.body)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // run meanwhile (a Runner's sweep)
		}
		if err == nil {
			err = o.r.run(ctx, []outboxRow{row})
		}
		ran[e.CommandID] = err == nil
		res.Retried = append(res.Retried, Retried{Effect: e, Action: RetryRanOutbox, Err: err})
	}
	for _, e := range d.Pending {
		if e.Queued || !e.Stuck || ran[e.CommandID] {
			continue
		}
		r := Retried{Effect: e}
		r.Action, r.Err = o.resend(ctx, e)
		res.Retried = append(res.Retried, r)
	}
	if len(res.Retried) > 0 {
		o.cfg.Logger.InfoContext(ctx, "saga instance retried", "saga", name, "instance", instance, "effects", len(res.Retried), "err", res.Err())
	}
	return res, nil
}

// resend sends a sent command again, or publishes its recorded answer.
func (o *Operator) resend(ctx context.Context, e Effect) (string, error) {
	answer, err := recordedAnswer(ctx, o.cfg.Outcomes, e.Aggregate, e.CommandID)
	if err != nil {
		return RetryResent, err
	}
	if answer != nil {
		res := commands.Result{CommandID: e.CommandID, AggregateType: e.Aggregate.Type, AggregateID: e.Aggregate.ID,
			Status: answer.Status, Reason: answer.Reason, Version: answer.Version, Duplicate: true}
		if key := o.r.cfg.CommandKey; len(key) > 0 {
			sig, err := o.r.commandSignature(ctx, e.CommandID)
			if err != nil {
				return RetryRepublishedAnswer, err
			}
			res.Signature = commands.SignResult(key, sig, res) // the Runner takes only signed answers
		}
		msg, err := res.ToMessage("")
		if err == nil {
			err = o.cfg.Publisher.Publish(ReplyTopic(o.cfg.Topics, o.r.saga.name), msg)
		}
		return RetryRepublishedAnswer, err
	}
	var body []byte
	err = o.cfg.DB.QueryRow(ctx, `SELECT body FROM saga_commands WHERE saga = $1 AND command_id = $2`, o.r.saga.name, e.CommandID).Scan(&body)
	if err != nil {
		return RetryResent, err
	}
	if len(body) == 0 {
		return RetryNotResendable, nil
	}
	return RetryResent, o.r.runOne(ctx, outboxRow{kind: outboxCommand, body: body})
}
