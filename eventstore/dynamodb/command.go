package dynamodb

import (
	"context"
	"errors"
	"fmt"

	"github.com/eventpipe/eventpipe/eventstore"
)

// CommandResult returns the result recorded for commandID on ref (with
// Duplicate set and no Events), read strongly consistently, or
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
	res, err := resultFromCommandItem(ref, it)
	if err != nil {
		return eventstore.AppendResult{}, fmt.Errorf("command %s on %s: %w", commandID, ref, err)
	}
	return res, nil
}
