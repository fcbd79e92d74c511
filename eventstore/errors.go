package eventstore

import (
	"errors"
	"fmt"
)

// ErrAggregateNotFound is returned (wrapped) when an operation needs an
// existing aggregate and there is none: no STATE, no events, or an append
// that expects a version above 0 on an aggregate never written.
var ErrAggregateNotFound = errors.New("aggregate not found")

// ErrItemTooLarge is returned (wrapped, with the item and its size) when an
// item of an append would exceed DynamoDB's 400 KB item limit. It is
// checked before anything is written.
var ErrItemTooLarge = errors.New("item too large")

// ErrTooManyItems is returned (wrapped, with the count) when an append
// would need more than 100 items in its transaction (events, metadata,
// STATE, OUTBOUND and command items together). Checked before any write.
var ErrTooManyItems = errors.New("too many items in one append")

// ErrTransactionTooLarge is returned (wrapped) when the items of one
// append add up to more than 4 MB. Checked before any write.
var ErrTransactionTooLarge = errors.New("transaction too large")

// ErrCommandNotFound is returned (wrapped) by Store.CommandResult when the
// command id was never recorded for the aggregate (or its record expired).
var ErrCommandNotFound = errors.New("command not recorded")

// ErrMalformed is matched (errors.Is) by every *DecodeError.
var ErrMalformed = errors.New("malformed")

// ConcurrencyError says an append expected the aggregate at version
// Expected but found it at Actual: someone else appended meanwhile (or the
// caller's version is stale). With StateRewritten the version was as
// expected but the STATE item the decision read had been rewritten since
// (AppendRequest.IfState; a recalculation). Nothing was written. Reload
// and decide again.
type ConcurrencyError struct {
	Aggregate      Ref
	Expected       int64
	Actual         int64
	StateRewritten bool
}

func (e *ConcurrencyError) Error() string {
	if e.StateRewritten {
		return fmt.Sprintf("concurrent modification of %s: STATE was rewritten at version %d since it was read", e.Aggregate, e.Actual)
	}
	return fmt.Sprintf("concurrent modification of %s: expected version %d, actual %d", e.Aggregate, e.Expected, e.Actual)
}

// ValidationError says which input field is unusable and why. It is
// permanent: retrying the same input fails the same way, and nothing was
// written.
type ValidationError struct {
	Field  string
	Reason string
}

func (e *ValidationError) Error() string { return fmt.Sprintf("invalid %s: %s", e.Field, e.Reason) }

// Code names one kind of refusal, declared by the domain that refuses
// ("bankaccount.insufficient_funds"), so that callers and tests match a
// refusal by what it is rather than by the words of its reason:
//
//	const ErrInsufficientFunds eventstore.Code = "bankaccount.insufficient_funds"
//	…
//	return a, eventstore.RejectWith(ErrInsufficientFunds, "insufficient funds")
//	…
//	errors.Is(err, bankaccount.ErrInsufficientFunds)
//
// A Code is an error, and every refusal that carries one matches it with
// errors.Is: a *RuleRejection, a *RefusedCommandError (the refusal a store
// recorded), and the command layer's decisions and answers
// (commands.ConflictWith, commands.Result.Err). It is a string, so it
// survives being recorded and sent: the same value matches after the
// round trip. By convention "<aggregate type>.<kind>", lower case.
type Code string

// Error returns the code.
func (c Code) Error() string { return string(c) }

// Refusal is the final answer to a command that appended nothing, as
// recorded under its command id: the status in the command layer's
// vocabulary (for example "rejected", "not_found", "conflict", "invalid"),
// the reason given, its Code when the refusal had one, and the
// aggregate's version when it was decided.
type Refusal struct {
	Status  string
	Reason  string
	Code    Code
	Version int64
}

// RefusedCommandError says a command id was already answered with a
// refusal: Refusal is the recorded answer, which every later delivery of
// the command must repeat. Store.Append, Store.CommandResult and
// Store.RecordRefusal return it; nothing was written.
type RefusedCommandError struct {
	Aggregate Ref
	CommandID string
	Refusal   Refusal
}

func (e *RefusedCommandError) Error() string {
	return fmt.Sprintf("command %s on %s was already answered %s at version %d: %s",
		e.CommandID, e.Aggregate, e.Refusal.Status, e.Refusal.Version, e.Refusal.Reason)
}

// Unwrap returns the recorded refusal's Code (nil without one), so that
// errors.Is(err, code) matches a recorded refusal as it matched the
// fresh one.
func (e *RefusedCommandError) Unwrap() error { return codeErr(e.Refusal.Code) }

// RuleRejection is returned by a rule that refuses an event (e.g.
// "insufficient funds"). The processor fills in which event it was; the
// facet writes nothing when any rule rejects.
type RuleRejection struct {
	EventType string // filled in by the processor
	Sequence  int64  // the sequence the event would have had (or had, on replay)
	Reason    string
	Code      Code // the kind of refusal (RejectWith); "" for Reject's
}

func (e *RuleRejection) Error() string {
	if e.EventType == "" {
		return "rejected: " + e.Reason
	}
	return fmt.Sprintf("rejected %s (sequence %d): %s", e.EventType, e.Sequence, e.Reason)
}

// Unwrap returns the rejection's Code (nil without one): errors.Is(err,
// code) matches it.
func (e *RuleRejection) Unwrap() error { return codeErr(e.Code) }

// Reject returns a *RuleRejection with the reason; rules return it to
// refuse an event. A refusal that callers tell apart from others has a
// Code: RejectWith.
func Reject(reason string) error { return &RuleRejection{Reason: reason} }

// Rejectf is Reject with a format.
func Rejectf(format string, args ...any) error {
	return &RuleRejection{Reason: fmt.Sprintf(format, args...)}
}

// RejectWith returns a *RuleRejection of kind code, with the reason
// format and args give; errors.Is(err, code) matches it, and so does the
// answer to the command it refused, fresh or recorded.
func RejectWith(code Code, format string, args ...any) error {
	return &RuleRejection{Code: code, Reason: fmt.Sprintf(format, args...)}
}

// codeErr is c as an error, nil when c is empty (so that an uncoded
// refusal unwraps to nothing).
func codeErr(c Code) error {
	if c == "" {
		return nil
	}
	return c
}

// DecodeError says why bytes are not what they should be: an event
// envelope, a stored item, a stream record, a command or result message,
// an event's payload. Decoding the same bytes again fails the same way, so
// it is permanent (see IsPermanent). It matches ErrMalformed with
// errors.Is.
type DecodeError struct {
	What   string // what was decoded: "event envelope", "stream record 42 (sk \"EVENT#…\")", …
	Field  string // "" when the bytes as a whole are broken
	Reason string
}

func (e *DecodeError) Error() string {
	what := e.What
	if what == "" {
		what = "input"
	}
	if e.Field == "" {
		return fmt.Sprintf("%v %s: %s", ErrMalformed, what, e.Reason)
	}
	return fmt.Sprintf("%v %s: %s %s", ErrMalformed, what, e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrMalformed) true.
func (e *DecodeError) Is(target error) bool { return target == ErrMalformed }

// IsPermanent reports whether retrying can never make err go away, so a
// message that failed with it is answered or poisoned, never retried:
// err is or wraps a *ValidationError, a *DecodeError, ErrItemTooLarge,
// ErrTooManyItems, ErrTransactionTooLarge, or an error whose
// Permanent() bool method returns true (how other packages mark their own
// errors). Every other error is transient: the message is retried and
// redelivered, in order, until it succeeds.
//
// This is the one place that decides retry against poison; the command
// dispatcher answers "invalid" exactly for these errors.
func IsPermanent(err error) bool {
	if err == nil {
		return false
	}
	var val *ValidationError
	var dec *DecodeError
	var marked interface{ Permanent() bool }
	switch {
	case errors.As(err, &val), errors.As(err, &dec),
		errors.Is(err, ErrItemTooLarge), errors.Is(err, ErrTooManyItems), errors.Is(err, ErrTransactionTooLarge):
		return true
	case errors.As(err, &marked):
		return marked.Permanent()
	}
	return false
}
