package operator

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
	ddbstore "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	"github.com/eventpipe/eventpipe/privacy/subjects"
)

// ActionForget is the operator action of Forget.
const ActionForget = "forget"

// ForgetConfig configures Forget.
type ForgetConfig struct {
	// Process: the catalogue (it must hold the subjects' domain,
	// privacy/subjects, as eventpipe.Builtin does), the endpoints
	// (DynamoDB, the KMS, Postgres) and the logger.
	eventpipe.Process
	// Store is the event store (default: eventpipe.OpenStore(Endpoints,
	// Catalog), which seals with the keys of OpenKeyStore).
	Store *ddbstore.Store
	// DB holds operator_actions (default: eventpipe.OpenPostgres).
	DB *pgxpool.Pool
	// Subject is the data subject to forget. Required.
	Subject string
	// Actor is who forgets (default DefaultActor()); Reason why (the
	// request's reference, say). Both are recorded with the operator
	// action and in the SubjectForgotten fact.
	Actor, Reason string
}

// ForgetResult is what Forget did.
type ForgetResult struct {
	// Fact is the SubjectForgotten recorded: the scopes whose keys are
	// gone and when.
	Fact subjects.ForgottenData
	// Before is set when the subject had been forgotten before: its keys
	// were already gone and its fact recorded (Fact is then empty).
	Before bool
	// Command is the ForgetSubject command's answer.
	Command commands.Result
	Action  OperatorAction
}

// Forget forgets a data subject (docs/privacy.md): it sends ForgetSubject
// to the subjects' command handler in this process, which deletes the
// subject's data keys (privacy.KeyStore.Forget: from then on none of its
// sealed values opens, anywhere) and records SubjectForgotten with the
// subject's scopes, from which every read model scrubs the subject's
// data. It is recorded as an operator action. Forgetting a subject again
// finishes an interrupted forgetting or reports the first (Before).
func Forget(ctx context.Context, cfg ForgetConfig) (ForgetResult, error) {
	var res ForgetResult
	_ = cfg.FillProcess()
	if err := validProcess(&cfg.Process); err != nil {
		return res, fmt.Errorf("forget: %w", err)
	}
	if cfg.Subject == "" {
		return res, fmt.Errorf("forget: %w", invalid("Subject", "is empty"))
	}
	d, ok := cfg.Catalog.Domain(subjects.AggregateType)
	if !ok {
		return res, fmt.Errorf("forget: %w", invalid("Catalog", "has no subjects' domain (add privacy/subjects.Domain())"))
	}
	if cfg.Actor == "" {
		cfg.Actor = DefaultActor()
	}
	db, closeDB, err := openDB(ctx, cfg.DB, cfg.Endpoints)
	if err != nil {
		return res, fmt.Errorf("forget: %w", err)
	}
	defer closeDB()
	if err := operatorReady(ctx, db); err != nil {
		return res, fmt.Errorf("forget: %w", err)
	}
	store := cfg.Store
	if store == nil {
		if store, err = eventpipe.OpenStore(ctx, cfg.Endpoints, cfg.Catalog, cfg.Logger); err != nil {
			return res, fmt.Errorf("forget: %w", err)
		}
	}
	hs, err := d.NewHandlers(store, cfg.Catalog.Upcasters())
	if err != nil {
		return res, fmt.Errorf("forget: %w", err)
	}
	cmd, err := subjects.ForgetSubjectCommand.New(subjects.AggregateType, cfg.Subject, subjects.ForgetData{Reason: cfg.Reason})
	if err != nil {
		return res, fmt.Errorf("forget: %w", err)
	}
	cmd.Actor = cfg.Actor
	action, err := startOperatorAction(ctx, db, cfg.Logger, OperatorAction{Actor: cfg.Actor, Action: ActionForget, Target: subjects.AggregateType + "/" + cfg.Subject, Reason: cfg.Reason})
	if err != nil {
		return res, fmt.Errorf("forget: %w", err)
	}
	res.Command, err = hs[0].Handle(ctx, cmd)
	var result string
	switch {
	case err != nil:
		result = "stopped: " + err.Error() + " (forget again to finish)"
	case res.Command.Code == subjects.ErrForgottenBefore:
		res.Before = true
		result = "forgotten before: " + res.Command.Reason
	case res.Command.Status != commands.StatusAccepted:
		err = res.Command.Err()
		result = "refused: " + err.Error()
	default:
		if res.Fact, err = factOf(ctx, store, cfg.Subject); err != nil {
			result = "forgotten; its fact unread: " + err.Error()
			break
		}
		result = fmt.Sprintf("forgotten: %d keys erased of %d scopes", res.Fact.Erased, len(res.Fact.Scopes))
	}
	action, recErr := finishOperatorAction(ctx, db, cfg.Logger, action, result)
	res.Action = action
	if err != nil {
		return res, errors.Join(fmt.Errorf("forget %s: %w", cfg.Subject, err), recErr)
	}
	if recErr != nil {
		return res, fmt.Errorf("forget: %w", recErr)
	}
	return res, nil
}

// factOf reads the subject's SubjectForgotten.
func factOf(ctx context.Context, store *ddbstore.Store, subject string) (subjects.ForgottenData, error) {
	events, err := store.Load(ctx, eventstore.Ref{Type: subjects.AggregateType, ID: subject}, 0)
	if err != nil {
		return subjects.ForgottenData{}, err
	}
	return subjects.SubjectForgottenEvent.Decode(events[0])
}
