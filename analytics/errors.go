package analytics

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/eventpipe/eventpipe/eventstore"
)

// EventError says which event of an Ingest batch is unusable: Err (a
// *eventstore.ValidationError) is about the event at Index of the input.
// Nothing was written.
type EventError struct {
	Index int
	Err   error
}

func (e *EventError) Error() string { return fmt.Sprintf("event %d: %v", e.Index, e.Err) }

func (e *EventError) Unwrap() error { return e.Err }

// invalid is the *eventstore.ValidationError of input that is unusable.
func invalid(field, format string, args ...any) *eventstore.ValidationError {
	return &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// WriteError says an Ingest or IngestBatch stored only some of its
// events: a BatchWriteItem or PutItem call failed, DynamoDB still
// returned unprocessed items after Config.WriteAttempts attempts, or the
// context ended. Ingest returns the events that were written along with
// it, IngestBatch the result of every event.
type WriteError struct {
	// Written and NotWritten count the batch's events (a duplicate
	// counts as written). An event of a request that failed in flight
	// counts as not written although DynamoDB may have stored it.
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

// KeyReuseError says an idempotency key was used before with another
// batch (draft-ietf-httpapi-idempotency-key-header: 422). Nothing was
// stored.
type KeyReuseError struct {
	SourceID, Key string
	// FirstUsed is when the key was first used.
	FirstUsed time.Time
}

func (e *KeyReuseError) Error() string {
	return fmt.Sprintf("idempotency key %q of source %s was used at %s with another batch", e.Key, e.SourceID, formatTime(e.FirstUsed))
}

// validID checks an id that becomes part of a key: present unless
// optional, at most max bytes of UTF-8, no '#'.
func validID(field, id string, max int, optional bool) *eventstore.ValidationError {
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
