package commands

import (
	"context"
	"fmt"

	"github.com/eventpipe/eventpipe/eventstore"
)

// Seal returns cmd with the personal fields of its payload sealed by s
// (nil: cmd as given), as a sender publishes it. signed says whether the
// sender signs it, so that the handlers take its actor as verified (the
// subject of a Personal.SubjectIsActor declaration). Every sender of
// commands onto the bus seals through it; the dispatcher opens
// (DispatcherConfig.Sealer).
func Seal(ctx context.Context, s eventstore.CommandSealer, cmd Command, signed bool) (Command, error) {
	if s == nil {
		return cmd, nil
	}
	ref := eventstore.CommandRef{Aggregate: eventstore.Ref{Type: cmd.AggregateType, ID: cmd.AggregateID}, Type: cmd.Type, ID: cmd.ID}
	if signed {
		ref.VerifiedActor = cmd.Actor
	}
	payload, err := s.SealCommand(ctx, ref, cmd.Payload)
	if err != nil {
		return cmd, fmt.Errorf("seal command %s (%s): %w", cmd.ID, cmd.Type, err)
	}
	cmd.Payload = payload
	return cmd, nil
}
