package eventstore

import (
	"context"
	"encoding/json"
	"fmt"
)

// Opener opens the sealed personal data of what a consumer reads from the
// bus: events and outbound records as the relay published them, sealed by
// the store's Sealer. Package privacy's Sealer is one (docs/privacy.md).
// A consumer without one (nil) reads them as published.
type Opener interface {
	// OpenEvent returns e with its personal fields opened; a forgotten
	// subject's fields read as forgotten (no error).
	OpenEvent(ctx context.Context, e Envelope) (Envelope, error)
	// OpenOutbound returns o with its payload opened; a forgotten
	// subject's payload is an error matching privacy.ErrForgotten.
	OpenOutbound(ctx context.Context, o OutboundRecord) (OutboundRecord, error)
}

// Sealer seals an aggregate's personal data before a store writes it, and
// opens it after the store reads it: every event's personal fields, and
// the aggregate's documents (its STATE, its snapshot, its outbound
// payloads). eventstore/dynamodb takes one (Config.Sealer); package
// privacy's Sealer is one. Its errors are the store's errors: a
// forgotten subject (privacy.ErrForgotten) and bad input are permanent,
// a KMS that fails is not.
type Sealer interface {
	Opener
	// SealEvent returns e with its personal fields sealed, bound to e's
	// identity.
	SealEvent(ctx context.Context, e Envelope) (Envelope, error)
	// SealDocument returns data, a document of ref named by item
	// (DocumentState, DocumentSnapshot, OutboundDocument), sealed when ref
	// holds personal data, else as given.
	SealDocument(ctx context.Context, ref Ref, item string, data json.RawMessage) (json.RawMessage, error)
	// OpenDocument reverses SealDocument; a document that was not sealed
	// is returned as is. A forgotten subject's document is an error
	// matching privacy.ErrForgotten.
	OpenDocument(ctx context.Context, ref Ref, item string, data json.RawMessage) (json.RawMessage, error)
}

// Documents of an aggregate that a Sealer seals whole.
const (
	DocumentState    = "state"
	DocumentSnapshot = "snapshot"
)

// OutboundDocument names the payload of the outbound event index of the
// event with sequence seq.
func OutboundDocument(seq int64, index int) string { return fmt.Sprintf("outbound/%d/%d", seq, index) }

// OpenEvents opens each of events with o in place (nil: nothing to open).
func OpenEvents(ctx context.Context, o Opener, events []Envelope) error {
	if o == nil {
		return nil
	}
	for i, e := range events {
		opened, err := o.OpenEvent(ctx, e)
		if err != nil {
			return fmt.Errorf("open %s: %w", e, err)
		}
		events[i] = opened
	}
	return nil
}

// CommandRef names a command whose payload a CommandSealer seals or
// opens: the aggregate it is for, its type and id, and its actor when
// the handlers will take the actor as verified (a signed command's),
// else "".
type CommandRef struct {
	Aggregate     Ref
	Type, ID      string
	VerifiedActor string
}

// CommandSealer seals the personal fields of a command's payload before
// a sender publishes it on the bus, and opens them before its handler
// decides (package privacy's Sealer is one, from the domains'
// declarations). A payload without declared or sealed personal data is
// returned as given. A forgotten subject is an error matching
// privacy.ErrForgotten; a sealed value that does not open, bad input:
// both permanent. A KMS that fails is not.
type CommandSealer interface {
	SealCommand(ctx context.Context, c CommandRef, payload json.RawMessage) (json.RawMessage, error)
	OpenCommand(ctx context.Context, c CommandRef, payload json.RawMessage) (json.RawMessage, error)
}
