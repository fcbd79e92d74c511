// Package transfer is an example money-transfer aggregate: it records
// that a transfer of an amount from one bank account to another was
// requested (TransferRequested) and how it ended: completed, compensated
// (the money was paid back to the source) or failed (no money moved).
//
// The aggregate does not move money itself. The money moves on the two
// bank accounts (package domains/bankaccount), driven by the transfer
// saga (package sagas), which records the outcome here with
// CompleteTransfer, CompensateTransfer or FailTransfer. Each outcome
// publishes an outbound event (transferCompleted, transferCompensated,
// transferFailed) for other systems.
package transfer

import "github.com/eventpipe/eventpipe/eventstore"

// AggregateType of transfers.
const AggregateType = "transfer"

// Event types.
const (
	TransferRequested   = "TransferRequested"   // payload RequestedData
	TransferCompleted   = "TransferCompleted"   // payload CompletedData
	TransferCompensated = "TransferCompensated" // payload ReasonData
	TransferFailed      = "TransferFailed"      // payload ReasonData
)

// Event definitions: each event type with the Go type of its payload.
var (
	TransferRequestedEvent   = eventstore.DefineEvent[RequestedData](TransferRequested)
	TransferCompletedEvent   = eventstore.DefineEvent[CompletedData](TransferCompleted)
	TransferCompensatedEvent = eventstore.DefineEvent[ReasonData](TransferCompensated)
	TransferFailedEvent      = eventstore.DefineEvent[ReasonData](TransferFailed)
)

// Refusal codes (see eventstore.Code): the kinds of refusal of transfer
// commands and rules, matched with errors.Is.
const (
	ErrExists     eventstore.Code = "transfer.exists"      // requesting a transfer that was requested
	ErrNotFound   eventstore.Code = "transfer.not_found"   // an outcome of a transfer never requested
	ErrFinished   eventstore.Code = "transfer.finished"    // an outcome of a finished transfer
	ErrBadRequest eventstore.Code = "transfer.bad_request" // a requested event the rules refuse (same account twice, amount ≤ 0)
)

// Outbound events, published (payload OutcomeData) by the event that
// finishes a transfer.
const (
	OutboundTransferCompleted   = "transferCompleted"   // by TransferCompleted
	OutboundTransferCompensated = "transferCompensated" // by TransferCompensated
	OutboundTransferFailed      = "transferFailed"      // by TransferFailed
)

// Status of a transfer.
type Status string

// Transfer statuses. A transfer is requested, then finished exactly once:
// completed, compensated or failed.
const (
	StatusNone        Status = ""
	StatusRequested   Status = "requested"
	StatusCompleted   Status = "completed"
	StatusCompensated Status = "compensated"
	StatusFailed      Status = "failed"
)

// Finished reports whether s is an outcome (completed, compensated or
// failed): no later event can change it.
func (s Status) Finished() bool {
	return s == StatusCompleted || s == StatusCompensated || s == StatusFailed
}

// Transfer is the state of one transfer. Amount is in cents. Reason is
// the reason given when the transfer was compensated or failed.
type Transfer struct {
	ID     string `json:"id"`
	From   string `json:"from"`
	To     string `json:"to"`
	Amount int64  `json:"amount"`
	Status Status `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// RequestedData is the payload of TransferRequested and RequestTransfer:
// move Amount cents (> 0) from account From to account To.
type RequestedData struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Amount int64  `json:"amount"`
}

// CompletedData is the payload of TransferCompleted and CompleteTransfer:
// an empty object.
type CompletedData struct{}

// ReasonData is the payload of TransferCompensated, TransferFailed,
// CompensateTransfer and FailTransfer: why the transfer did not complete.
type ReasonData struct {
	Reason string `json:"reason"`
}

// OutcomeData is the payload of the transferCompleted,
// transferCompensated and transferFailed outbound events.
type OutcomeData struct {
	TransferID string `json:"transferId"`
	From       string `json:"from"`
	To         string `json:"to"`
	Amount     int64  `json:"amount"`
	Reason     string `json:"reason,omitempty"`
}
