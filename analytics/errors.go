package analytics

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrInvalid is matched (errors.Is) by every *ValidationError.
var ErrInvalid = errors.New("invalid analytics input")

// ValidationError says which input is unusable and why. It is permanent:
// the same input fails the same way. Nothing was written.
type ValidationError struct {
	// Index is the position of the offending event in an Ingest batch,
	// or -1 when the error is about the request as a whole (the source
	// id, the batch size, a cursor, a limit).
	Index int
	// Field is the JSON name of the offending field (for example
	// "sessionId", "createdAt", "cursor").
	Field string
	// Reason says what is wrong with it.
	Reason string
}

func (e *ValidationError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("invalid %s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("event %d: invalid %s: %s", e.Index, e.Field, e.Reason)
}

// Is reports whether target is ErrInvalid.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

func invalid(field, format string, args ...any) *ValidationError {
	return &ValidationError{Index: -1, Field: field, Reason: fmt.Sprintf(format, args...)}
}

// WriteError says an Ingest stored only some of its events: a
// BatchWriteItem call failed, DynamoDB still returned unprocessed items
// after Config.WriteAttempts attempts, or the context ended while backing
// off. Ingest returns the events that were written along with it.
type WriteError struct {
	// Written and NotWritten count the batch's events. An event of a
	// request that failed in flight counts as not written although
	// DynamoDB may have stored it.
	Written, NotWritten int
	// Unwritten are the indexes, in the Ingest input, of the events not
	// written, in ascending order.
	Unwritten []int
	// Err is the last failure.
	Err error
}

func (e *WriteError) Error() string {
	return fmt.Sprintf("%d of %d events not written: %v", e.NotWritten, e.Written+e.NotWritten, e.Err)
}

func (e *WriteError) Unwrap() error { return e.Err }

// validID checks an id that becomes part of a key: present unless
// optional, at most max bytes of UTF-8, no '#'.
func validID(field, id string, max int, optional bool) *ValidationError {
	switch {
	case id == "" && optional:
		return nil
	case id == "":
		return invalid(field, "is empty")
	case len(id) > max:
		return invalid(field, "is %d bytes, at most %d", len(id), max)
	case strings.Contains(id, "#"):
		return invalid(field, "%q contains '#'", id)
	case !utf8.ValidString(id):
		return invalid(field, "is not valid UTF-8")
	}
	return nil
}
