package commands

import (
	"encoding/json"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/eventstore"
)

// Status is the outcome of a command.
type Status string

// Outcomes of a command.
const (
	// StatusAccepted: the events were appended (or had been, for a
	// redelivered command: see Result.Duplicate).
	StatusAccepted Status = "accepted"
	// StatusRejected: the domain refused the command (e.g. insufficient
	// funds); nothing was stored.
	StatusRejected Status = "rejected"
	// StatusConflict: the command's expected version was stale; nothing
	// was stored and the command is not retried.
	StatusConflict Status = "conflict"
	// StatusNotFound: the command needs an aggregate that does not exist
	// (or was deleted); nothing was stored.
	StatusNotFound Status = "not_found"
	// StatusInvalid: the command could never succeed (malformed, unknown
	// type, bad id); it went to the poison topic.
	StatusInvalid Status = "invalid"
)

// Result is what the dispatcher publishes on the replies topic, keyed by
// command id, after handling a command.
type Result struct {
	CommandID string `json:"command_id"`
	Status    Status `json:"status"`
	Reason    string `json:"reason,omitempty"`
	// Code is the kind of a refusal, when the domain gave one
	// (eventstore.Code): what callers match, with Err and errors.Is.
	Code          eventstore.Code `json:"code,omitempty"`
	AggregateType string          `json:"aggregate_type,omitempty"`
	AggregateID   string          `json:"aggregate_id,omitempty"`
	Version       int64           `json:"version"`             // the aggregate's version after the command
	EventIDs      []string        `json:"event_ids,omitempty"` // events the command appended
	Duplicate     bool            `json:"duplicate,omitempty"` // the command id had been answered before: this repeats the recorded answer
	// Signature, on the answer to a signed command, binds the answer to
	// that command (its signature) under the key that signed it
	// (SignResult): a sender holding the key takes only answers that
	// verify (VerifyResult). Empty for an unsigned command.
	Signature string `json:"signature,omitempty"`
}

// Err returns nil for an accepted command, and otherwise the refusal as
// a *RefusalError, which matches the refusal's Code with errors.Is:
//
//	if errors.Is(res.Err(), bankaccount.ErrInsufficientFunds) { … }
func (r Result) Err() error {
	if r.Status == StatusAccepted {
		return nil
	}
	return &RefusalError{Status: r.Status, Code: r.Code, Reason: r.Reason}
}

// RefusalError is a command's refusal as an error (Result.Err): its
// status, its Code when it had one, and its reason.
type RefusalError struct {
	Status Status
	Code   eventstore.Code
	Reason string
}

func (e *RefusalError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("%s: %s", e.Status, e.Reason)
	}
	return fmt.Sprintf("%s (%s): %s", e.Status, e.Code, e.Reason)
}

// Unwrap returns the refusal's Code (nil without one).
func (e *RefusalError) Unwrap() error { return codeErr(e.Code) }

// ToMessage encodes the result, keyed (partition key) by command id.
func (r Result) ToMessage(correlationID string) (*message.Message, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode result of %s: %w", r.CommandID, err)
	}
	msg := message.NewMessage(r.CommandID+".result", body)
	msg.Metadata.Set(bus.MetadataPartitionKey, r.CommandID)
	if correlationID != "" {
		middleware.SetCorrelationID(correlationID, msg)
	}
	return msg, nil
}

// ResultFromMessage decodes a result message.
func ResultFromMessage(msg *message.Message) (Result, error) {
	var r Result
	what := "result message " + msg.UUID
	if err := json.Unmarshal(msg.Payload, &r); err != nil {
		return Result{}, &eventstore.DecodeError{What: what, Reason: err.Error()}
	}
	if r.CommandID == "" || r.Status == "" {
		return Result{}, &eventstore.DecodeError{What: what, Reason: "no command id or status"}
	}
	return r, nil
}
