package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/sagas"
)

// SagaInstancesConfig configures SagaInstances.
type SagaInstancesConfig struct {
	// Process: the catalogue (the sagas), the endpoints (Postgres) and
	// the logger (defaults: see eventpipe.Process).
	eventpipe.Process
	// DB holds the saga tables (default: eventpipe.OpenPostgres(Endpoints),
	// closed before SagaInstances returns).
	DB *pgxpool.Pool
	// Saga, when set, lists one saga of the catalogue; otherwise every
	// saga's instances.
	Saga string
	// Status, when set, selects instances by status: sagas.StatusRunning,
	// StatusStuck, StatusAborting, StatusFinished, or an outcome
	// (completed, aborted, …).
	Status string
	// StuckAfter is how long an effect waits before it counts as stuck
	// (default sagas.DefaultStuckAfter).
	StuckAfter time.Duration
	// Limit is the most instances returned (default 100).
	Limit int
}

// Validate reports, as an *eventstore.ValidationError, the settings from
// the environment that could not be read (eventpipe.Process.Validate), a
// Saga not of the catalogue and a negative Limit or StuckAfter, the
// defaults filled (as SagaInstances fills them).
func (c SagaInstancesConfig) Validate() error {
	if err := validProcess(&c.Process); err != nil {
		return err
	}
	if c.Saga != "" {
		if _, err := knownSaga(c.Catalog, c.Saga); err != nil {
			return err
		}
	}
	if c.Limit < 0 {
		return invalid("Limit", "is negative")
	}
	if c.StuckAfter < 0 {
		return invalid("StuckAfter", "is negative")
	}
	return nil
}

// SagaInstances returns saga instances as cfg selects them, oldest
// first, with their status, age, pending effects and timeouts (see
// sagas.List). It only reads.
func SagaInstances(ctx context.Context, cfg SagaInstancesConfig) ([]sagas.Overview, error) {
	_ = cfg.FillProcess() // Validate reports Endpoints.Err
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("saga instances: %w", err)
	}
	db, closeDB, err := openDB(ctx, cfg.DB, cfg.Endpoints)
	if err != nil {
		return nil, fmt.Errorf("saga instances: %w", err)
	}
	defer closeDB()
	return sagas.List(ctx, db, sagas.Filter{Saga: cfg.Saga, Status: cfg.Status, StuckAfter: cfg.StuckAfter, Limit: cfg.Limit})
}

// SagaInstanceConfig configures SagaInstance.
type SagaInstanceConfig struct {
	// Process: the catalogue (the sagas and the event types), the
	// endpoints (Postgres, DynamoDB) and the logger (defaults: see
	// eventpipe.Process).
	eventpipe.Process
	// DB holds the saga tables (default: eventpipe.OpenPostgres(Endpoints),
	// closed before SagaInstance returns).
	DB *pgxpool.Pool
	// Records is where the commands' answers are read (default: the
	// event store of Endpoints, eventpipe.OpenStore).
	Records sagas.CommandRecords
	// Saga and Instance name the instance. Required.
	Saga, Instance string
	// StuckAfter is how long an effect waits before it counts as stuck
	// (default sagas.DefaultStuckAfter).
	StuckAfter time.Duration
}

// Validate reports, as an *eventstore.ValidationError, the settings from
// the environment that could not be read (eventpipe.Process.Validate), a
// Saga not of the catalogue, an empty Instance and a negative
// StuckAfter, the defaults filled (as SagaInstance fills them).
func (c SagaInstanceConfig) Validate() error {
	if err := validProcess(&c.Process); err != nil {
		return err
	}
	if _, err := knownInstance(c.Catalog, c.Saga, c.Instance); err != nil {
		return err
	}
	if c.StuckAfter < 0 {
		return invalid("StuckAfter", "is negative")
	}
	return nil
}

// SagaInstance returns one saga instance: its state, the inputs it
// handled, the commands it sent with the event store's answers, its
// outbox rows not run yet, its timeouts and its abort (see
// sagas.Inspect). An instance that does not exist is an error wrapping
// sagas.ErrNoInstance; an unknown saga an *eventstore.ValidationError.
func SagaInstance(ctx context.Context, cfg SagaInstanceConfig) (sagas.Detail, error) {
	_ = cfg.FillProcess() // Validate reports Endpoints.Err
	if err := cfg.Validate(); err != nil {
		return sagas.Detail{}, fmt.Errorf("saga instance: %w", err)
	}
	db, closeDB, err := openDB(ctx, cfg.DB, cfg.Endpoints)
	if err != nil {
		return sagas.Detail{}, fmt.Errorf("saga instance: %w", err)
	}
	defer closeDB()
	if cfg.Records == nil {
		store, err := eventpipe.OpenStore(ctx, cfg.Endpoints, cfg.Catalog, cfg.Logger)
		if err != nil {
			return sagas.Detail{}, fmt.Errorf("saga instance: %w", err)
		}
		cfg.Records = store
	}
	return sagas.Inspect(ctx, db, cfg.Records, cfg.Saga, cfg.Instance, cfg.StuckAfter)
}

// SagaOpsConfig is what SagaAbort and SagaRetry act with: the saga
// tables, the event store and the bus, as the saga's consumer has them.
type SagaOpsConfig struct {
	// Process: the catalogue (the sagas and the event types), the
	// endpoints (Postgres, DynamoDB, Kafka) and the logger (defaults: see
	// eventpipe.Process).
	eventpipe.Process
	// DB holds the saga tables and operator_actions (default:
	// eventpipe.OpenPostgres(Endpoints), closed before the call returns).
	DB *pgxpool.Pool
	// Outcomes is the command handlers' event store (default: the event
	// store of Endpoints, eventpipe.OpenStore).
	Outcomes sagas.Outcomes
	// Publisher sends the commands and answers (default: a Kafka
	// publisher of Endpoints, closed before the call returns).
	Publisher message.Publisher
	// CommandKey signs the commands sent, as the saga's consumer does
	// (eventpipe.ConsumersConfig.CommandKey; the CLI reads
	// eventpipe.CommandKeyFromEnv). With command handlers that hold a key,
	// an unsigned command under a saga's id is refused without a record,
	// and stays stuck.
	CommandKey []byte
	// StuckAfter is how long an effect waits before SagaRetry takes it as
	// stuck (default sagas.DefaultStuckAfter).
	StuckAfter time.Duration
	// Actor is who acts (default DefaultActor()), recorded in
	// operator_actions.
	Actor string
}

// Validate reports, as an *eventstore.ValidationError, the settings from
// the environment that could not be read (eventpipe.Process.Validate), a
// CommandKey too short to sign with and a negative StuckAfter, the
// defaults filled (as SagaAbort and SagaRetry fill them).
func (c SagaOpsConfig) Validate() error {
	if err := validProcess(&c.Process); err != nil {
		return err
	}
	if len(c.CommandKey) > 0 && len(c.CommandKey) < commands.MinKeyLength {
		return invalid("CommandKey", fmt.Sprintf("has %d bytes, want at least %d", len(c.CommandKey), commands.MinKeyLength))
	}
	if c.StuckAfter < 0 {
		return invalid("StuckAfter", "is negative")
	}
	return nil
}

// SagaAbortConfig configures SagaAbort.
type SagaAbortConfig struct {
	SagaOpsConfig
	// Saga and Instance name the instance to abort. Required.
	Saga, Instance string
	// Reason says why. Required; recorded with the abort.
	Reason string
}

// Validate reports, as an *eventstore.ValidationError, what
// SagaOpsConfig.Validate reports, a Saga not of the catalogue, an empty
// Instance and an empty Reason, the defaults filled (as SagaAbort fills
// them).
func (c SagaAbortConfig) Validate() error {
	if err := c.SagaOpsConfig.Validate(); err != nil {
		return err
	}
	_ = c.FillProcess()
	if _, err := knownInstance(c.Catalog, c.Saga, c.Instance); err != nil {
		return err
	}
	if strings.TrimSpace(c.Reason) == "" {
		return invalid("Reason", "say why the instance is aborted")
	}
	return nil
}

// SagaAbortResult is what SagaAbort did.
type SagaAbortResult struct {
	sagas.AbortResult
	// Action is the operator action recorded (ActionSagaAbort).
	Action OperatorAction
}

// SagaAbort ends a running saga instance: the abort is recorded with the
// instance and handed to the saga's compensation, whose
// effects (cancels, refunds) go through the saga's outbox and are run
// once in effect; a saga without compensation finishes the instance with
// sagas.OutcomeAborted (see sagas.Operator.Abort). The instance may stay
// running, status aborting, while the compensation's answers come back to
// the saga's consumer, which must run for it to finish. The abort is
// recorded in operator_actions (ActionSagaAbort), whose table is checked
// for first; an abort refused (finished instance: sagas.ErrFinished; no
// instance: sagas.ErrNoInstance) is recorded too.
func SagaAbort(ctx context.Context, cfg SagaAbortConfig) (SagaAbortResult, error) {
	_ = cfg.FillProcess() // Validate reports Endpoints.Err
	if err := cfg.Validate(); err != nil {
		return SagaAbortResult{}, fmt.Errorf("saga abort: %w", err)
	}
	d, _ := cfg.Catalog.Saga(cfg.Saga)
	var out SagaAbortResult
	err := withSagaOperator(ctx, &cfg.SagaOpsConfig, d, func(ctx context.Context, op *sagas.Operator, db *pgxpool.Pool) error {
		action, err := startOperatorAction(ctx, db, cfg.Logger, OperatorAction{Actor: cfg.Actor, Action: ActionSagaAbort,
			Target: cfg.Saga + " " + cfg.Instance, Reason: cfg.Reason})
		if err != nil {
			return err
		}
		res, err := op.Abort(ctx, cfg.Instance, cfg.Actor, cfg.Reason)
		out.AbortResult = res
		var rerr error
		out.Action, rerr = finishOperatorAction(ctx, db, cfg.Logger, action, abortSummary(res, err))
		return errors.Join(err, rerr)
	})
	if err != nil {
		return out, fmt.Errorf("saga abort: %w", err)
	}
	return out, nil
}

// abortSummary says in a line what an abort did.
func abortSummary(res sagas.AbortResult, err error) string {
	if err != nil {
		return "failed: " + err.Error()
	}
	var b strings.Builder
	switch {
	case res.Outcome != "":
		fmt.Fprintf(&b, "ended %s", res.Outcome)
	default:
		b.WriteString("compensating")
	}
	if len(res.Effects) > 0 {
		var fx []string
		for _, e := range res.Effects {
			fx = append(fx, e.Kind+" "+e.CommandID)
		}
		fmt.Fprintf(&b, "; queued %s", strings.Join(fx, ", "))
	}
	if res.Err != nil {
		fmt.Fprintf(&b, "; effects left to the sweep: %v", res.Err)
	}
	return b.String()
}

// SagaRetryConfig configures SagaRetry.
type SagaRetryConfig struct {
	SagaOpsConfig
	// Saga and Instance name the instance whose stuck effects are
	// retried. Required.
	Saga, Instance string
	// Reason says why (optional, recorded).
	Reason string
}

// Validate reports, as an *eventstore.ValidationError, what
// SagaOpsConfig.Validate reports, a Saga not of the catalogue and an
// empty Instance, the defaults filled (as SagaRetry fills them).
func (c SagaRetryConfig) Validate() error {
	if err := c.SagaOpsConfig.Validate(); err != nil {
		return err
	}
	_ = c.FillProcess()
	_, err := knownInstance(c.Catalog, c.Saga, c.Instance)
	return err
}

// SagaRetryResult is what SagaRetry did.
type SagaRetryResult struct {
	sagas.RetryResult
	// Action is the operator action recorded (ActionSagaRetry).
	Action OperatorAction
}

// SagaRetry retries the instance's stuck effects (see
// sagas.Operator.Retry): outbox rows left unrun are run; a command the
// saga got no answer to is sent again under its original command id (the
// command handlers dedupe it), or, when the event store holds its answer,
// that answer is published again on the replies topic. It is recorded in
// operator_actions (ActionSagaRetry), whose table is checked for first.
// An effect that failed again is in the result and in the returned error.
func SagaRetry(ctx context.Context, cfg SagaRetryConfig) (SagaRetryResult, error) {
	_ = cfg.FillProcess() // Validate reports Endpoints.Err
	if err := cfg.Validate(); err != nil {
		return SagaRetryResult{}, fmt.Errorf("saga retry: %w", err)
	}
	d, _ := cfg.Catalog.Saga(cfg.Saga)
	var out SagaRetryResult
	err := withSagaOperator(ctx, &cfg.SagaOpsConfig, d, func(ctx context.Context, op *sagas.Operator, db *pgxpool.Pool) error {
		action, err := startOperatorAction(ctx, db, cfg.Logger, OperatorAction{Actor: cfg.Actor, Action: ActionSagaRetry,
			Target: cfg.Saga + " " + cfg.Instance, Reason: cfg.Reason})
		if err != nil {
			return err
		}
		res, err := op.Retry(ctx, cfg.Instance)
		out.RetryResult = res
		if err == nil {
			err = res.Err()
		}
		var rerr error
		out.Action, rerr = finishOperatorAction(ctx, db, cfg.Logger, action, retrySummary(res, err))
		return errors.Join(err, rerr)
	})
	if err != nil {
		return out, fmt.Errorf("saga retry: %w", err)
	}
	return out, nil
}

// retrySummary says in a line what a retry did.
func retrySummary(res sagas.RetryResult, err error) string {
	var parts []string
	for _, r := range res.Retried {
		p := r.Action + " " + r.Effect.CommandID
		if r.Err != nil {
			p += " (failed)"
		}
		parts = append(parts, p)
	}
	s := "nothing stuck"
	if len(parts) > 0 {
		s = strings.Join(parts, ", ")
	}
	if err != nil {
		s += "; failed: " + err.Error()
	}
	return s
}

// withSagaOperator opens what cfg does not give, checks operator_actions
// exists, and runs f with an Operator of the saga d.
func withSagaOperator(ctx context.Context, cfg *SagaOpsConfig, d sagas.Definition,
	f func(ctx context.Context, op *sagas.Operator, db *pgxpool.Pool) error) error {
	if cfg.Actor == "" {
		cfg.Actor = DefaultActor()
	}
	db, closeDB, err := openDB(ctx, cfg.DB, cfg.Endpoints)
	if err != nil {
		return err
	}
	defer closeDB()
	if err := operatorReady(ctx, db); err != nil {
		return err
	}
	if err := sagas.Ready(ctx, db); err != nil {
		return err
	}
	if cfg.Outcomes == nil {
		store, err := eventpipe.OpenStore(ctx, cfg.Endpoints, cfg.Catalog, cfg.Logger)
		if err != nil {
			return err
		}
		cfg.Outcomes = store
	}
	pub := cfg.Publisher
	if pub == nil {
		kp, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: cfg.Endpoints.KafkaBrokers, Security: cfg.Endpoints.Kafka,
			ClientID: "eventpipe-sagas", Logger: watermill.NewSlogLogger(cfg.Logger)})
		if err != nil {
			return err
		}
		defer kp.Close()
		pub = kp
	}
	op, err := sagas.NewOperator(sagas.OperatorConfig{Saga: d, DB: db, Publisher: pub, Outcomes: cfg.Outcomes, CommandKey: cfg.CommandKey,
		Topics: bus.Topics{Prefix: cfg.Endpoints.TopicPrefix}, StuckAfter: cfg.StuckAfter, Logger: cfg.Logger})
	if err != nil {
		return err
	}
	return f(ctx, op, db)
}

// knownSaga returns the saga called name of c, or an
// *eventstore.ValidationError naming the sagas it has.
func knownSaga(c *eventpipe.Catalog, name string) (sagas.Definition, error) {
	d, ok := c.Saga(name)
	if !ok {
		return nil, &eventstore.ValidationError{Field: "Saga", Reason: fmt.Sprintf("unknown saga %q (have %s)", name, strings.Join(c.SagaNames(), ", "))}
	}
	return d, nil
}

// knownInstance checks a saga name and an instance id.
func knownInstance(c *eventpipe.Catalog, saga, instance string) (sagas.Definition, error) {
	d, err := knownSaga(c, saga)
	if err != nil {
		return nil, err
	}
	if instance == "" {
		return nil, &eventstore.ValidationError{Field: "Instance", Reason: "is empty"}
	}
	return d, nil
}
