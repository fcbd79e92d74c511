package eventstore

import (
	"context"
	"encoding/json"
	"time"
)

// Store is the event log of aggregates. Adapters (eventstore/dynamodb)
// implement it; the Facet and command handlers depend only on it.
// Implementations are safe for concurrent use.
type Store interface {
	// Append writes req atomically: all of its events, the new version,
	// the STATE and OUTBOUND items and the command record, or nothing.
	// A stale req.ExpectedVersion returns *ConcurrencyError; a command id
	// already recorded returns the original result with Duplicate set,
	// or *RefusedCommandError when it was recorded as refused.
	// Bad input returns *ValidationError, ErrItemTooLarge,
	// ErrTooManyItems or ErrTransactionTooLarge before anything is written.
	Append(ctx context.Context, req AppendRequest) (AppendResult, error)
	// Load returns, in sequence order and upcast, the events of ref with a
	// sequence above afterSeq, read strongly consistently. With afterSeq
	// 0 and no event it returns ErrAggregateNotFound; above 0 an empty
	// slice means the caller is up to date.
	Load(ctx context.Context, ref Ref, afterSeq int64) ([]Envelope, error)
	// Version returns ref's current version (sequence of its last event),
	// or ErrAggregateNotFound.
	Version(ctx context.Context, ref Ref) (int64, error)
	// State returns ref's STATE item, or ErrAggregateNotFound when there
	// is none (no facet ever appended to it).
	State(ctx context.Context, ref Ref) (Stored, error)
	// Snapshot returns ref's latest snapshot, or ErrAggregateNotFound
	// when none was taken.
	Snapshot(ctx context.Context, ref Ref) (Stored, error)
	// PutSnapshot stores s as ref's snapshot unless a snapshot at the
	// same or a later sequence exists (then it does nothing and returns
	// nil). It is off the write path: no append waits for it.
	PutSnapshot(ctx context.Context, ref Ref, s Stored) error
	// CommandResult returns the result recorded for commandID on ref,
	// with Duplicate set; *RefusedCommandError when the command was
	// recorded as refused; or ErrCommandNotFound.
	CommandResult(ctx context.Context, ref Ref, commandID string) (AppendResult, error)
	// RecordRefusal records r as the final answer to commandID on ref,
	// unless an answer is already recorded: whichever of RecordRefusal and
	// an Append with the same command id writes first wins, and the other
	// writes nothing. It returns a zero AppendResult when r is now the
	// record, the earlier append's result with Duplicate set when the
	// command had been applied, or *RefusedCommandError carrying the
	// earlier refusal. The record expires like an applied command's.
	RecordRefusal(ctx context.Context, ref Ref, commandID string, r Refusal) (AppendResult, error)
}

// Stored is a state document of an aggregate (STATE or snapshot) at a
// sequence number: the state after applying events 1..Seq.
type Stored struct {
	Seq  int64
	Data json.RawMessage // JSON
	// UpdatedAt is when the document was written (UTC).
	UpdatedAt time.Time
	// Revision is a STATE item's revision: a token the store writes anew
	// with every STATE it writes (an append's or a recalculation's, even
	// at the same version), so that an append decided on this STATE can
	// require it unchanged (AppendRequest.IfState). It is "" for a STATE
	// item written before stores kept revisions, and for snapshots.
	Revision string
}

// StateCondition is what an append requires of the aggregate's STATE
// item besides its version: the revision of the STATE its decision was
// made on. A STATE-only append (a recalculation) rewrites STATE without
// moving the version; the revision is how an append decided on the STATE
// before such a rewrite fails instead of writing back a state derived
// from the old one.
type StateCondition struct {
	// Revision is the Stored.Revision of the STATE read: "" for an item
	// without a revision (written before stores kept them) or no STATE
	// item at all, which the append then requires to have none.
	Revision string
}

// AppendRequest is one decision about one aggregate. Build it with
// Prepare, then add State and Outbound when a facet keeps them.
type AppendRequest struct {
	Aggregate Ref
	// ExpectedVersion is the version the decision was made on: 0 for a
	// new aggregate. The append fails with *ConcurrencyError otherwise.
	ExpectedVersion int64
	// Events must have sequences ExpectedVersion+1, +2, … in order, and
	// belong to Aggregate. May be empty only when State is set (a
	// recalculation that rewrites STATE at the same version).
	Events []Envelope
	// CommandID, when set, is recorded in the same transaction; a second
	// append with the same id on the same aggregate writes nothing and
	// returns the first result.
	CommandID string
	// State, when set, is written as the aggregate's STATE at the new
	// version (JSON), with a new revision (AppendResult.StateRevision).
	State json.RawMessage
	// IfState, when set, makes the append conditional on the STATE item's
	// revision too, in the same condition as the version: a STATE
	// rewritten since the decision read it fails the append with a
	// *ConcurrencyError (StateRewritten set) and nothing is written. Set
	// it when State was derived from a STATE read (Facet.Append, AppendTo,
	// AppendWithHistory do); leave it nil when State is a fold of the log
	// read at ExpectedVersion (a recalculation), which the version alone
	// makes right. It requires State.
	IfState *StateCondition
	// Outbound events to publish through the transactional outbox; each
	// names the event (by sequence, in this request) that caused it.
	Outbound []Outbound
}

// NewVersion is the version the aggregate will have after the append.
func (r AppendRequest) NewVersion() int64 { return r.ExpectedVersion + int64(len(r.Events)) }

// Outbound is an event for the outside world that a rule published while
// applying the event with sequence Seq. Index orders the outbound events
// of one Seq from 0.
type Outbound struct {
	Seq     int64
	Index   int
	Name    string
	Payload json.RawMessage
}

// AppendResult is what an append did (or, with Duplicate, what the first
// append with the same command id did).
type AppendResult struct {
	Aggregate Ref
	// FirstSeq..LastSeq are the sequences written; LastSeq is the new
	// version. With no events FirstSeq is LastSeq+1.
	FirstSeq, LastSeq int64
	EventIDs          []string
	// Events are the envelopes written (nil for a duplicate).
	Events []Envelope
	// Duplicate is set when the command id had been recorded before and
	// this call wrote nothing.
	Duplicate bool
	// StateRevision is the revision of the STATE item the append wrote
	// ("" when it wrote none, or for a duplicate).
	StateRevision string
}

// OutboundRecord is an OUTBOUND item as stored (and as the relay reads it
// from the table stream): the outbound event plus where it came from.
type OutboundRecord struct {
	// ID is a ULID, unique per outbound event (the bus message id).
	ID            string          `json:"id"`
	Name          string          `json:"name"`
	AggregateType string          `json:"aggregate_type"`
	AggregateID   string          `json:"aggregate_id"`
	Seq           int64           `json:"sequence"`
	Index         int             `json:"index"`
	EventID       string          `json:"event_id"` // the event that caused it
	OccurredAt    time.Time       `json:"occurred_at"`
	Payload       json.RawMessage `json:"payload"`
	Metadata      Metadata        `json:"metadata"`
}
