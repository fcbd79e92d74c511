package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/eventstore"
)

// CommandResult returns the answer recorded for commandID on ref, read
// strongly consistently: the result of the append it caused (Duplicate
// set, no Events), *eventstore.RefusedCommandError when it was refused, or
// eventstore.ErrCommandNotFound.
func (s *Store) CommandResult(ctx context.Context, ref eventstore.Ref, commandID string) (eventstore.AppendResult, error) {
	if err := eventstore.ValidateName("command_id", commandID); err != nil {
		return eventstore.AppendResult{}, fmt.Errorf("command %s on %s: %w", commandID, ref, err)
	}
	it, err := s.getItem(ctx, ref, CommandSK(commandID))
	if errors.Is(err, eventstore.ErrAggregateNotFound) {
		return eventstore.AppendResult{}, fmt.Errorf("command %s on %s: %w", commandID, ref, eventstore.ErrCommandNotFound)
	}
	if err != nil {
		return eventstore.AppendResult{}, fmt.Errorf("command %s on %s: %w", commandID, ref, err)
	}
	res, err := commandOutcome(ref, commandID, it)
	var refused *eventstore.RefusedCommandError
	if err != nil && !errors.As(err, &refused) {
		return eventstore.AppendResult{}, fmt.Errorf("command %s on %s: %w", commandID, ref, err)
	}
	return res, err
}

// RecordRefusal writes the COMMAND# record of a refused command with one
// PutItem conditional on no record existing, in the aggregate's partition
// (the same item an append with this command id writes in its
// transaction, so the first writer wins). The record expires after
// Config.CommandRetention. When an answer was recorded first, it returns
// that answer: the earlier append's result with Duplicate set, or
// *eventstore.RefusedCommandError with the earlier refusal.
func (s *Store) RecordRefusal(ctx context.Context, ref eventstore.Ref, commandID string, r eventstore.Refusal) (eventstore.AppendResult, error) {
	wrap := func(err error) error {
		return fmt.Errorf("record refusal of command %s on %s: %w", commandID, ref, err)
	}
	if err := ref.Validate(); err != nil {
		return eventstore.AppendResult{}, wrap(err)
	}
	if err := eventstore.ValidateName("command_id", commandID); err != nil {
		return eventstore.AppendResult{}, wrap(err)
	}
	if err := r.Validate(); err != nil {
		return eventstore.AppendResult{}, wrap(err)
	}
	_, err := s.cfg.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(s.cfg.Table),
		Item:                                refusalItem(ref, commandID, r, time.Now().UTC(), s.cfg.CommandRetention),
		ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var exists *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return eventstore.AppendResult{}, nil
	case !errors.As(err, &exists):
		return eventstore.AppendResult{}, wrap(err)
	case len(exists.Item) > 0:
		return commandOutcome(ref, commandID, exists.Item)
	default:
		return s.CommandResult(ctx, ref, commandID)
	}
}
