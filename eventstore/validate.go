package eventstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"
)

// MaxNameLength bounds aggregate types, aggregate ids, event types,
// outbound names and command ids, in bytes.
const MaxNameLength = 256

// ReservedChars may not appear in names: '#' separates the parts of the
// store's keys and NUL is never meaningful.
const ReservedChars = "#\x00"

// ValidateName checks one name used in keys (aggregate type or id, event
// type, command id, outbound name): not empty, valid UTF-8, at most
// MaxNameLength bytes, no reserved character. field names the input in the
// returned *ValidationError.
func ValidateName(field, value string) error {
	switch {
	case value == "":
		return &ValidationError{Field: field, Reason: "is empty"}
	case strings.ContainsAny(value, ReservedChars):
		return &ValidationError{Field: field, Reason: fmt.Sprintf("%q contains a reserved character ('#' or NUL)", value)}
	case !utf8.ValidString(value):
		return &ValidationError{Field: field, Reason: "is not valid UTF-8"}
	case len(value) > MaxNameLength:
		return &ValidationError{Field: field, Reason: fmt.Sprintf("is %d bytes, limit %d", len(value), MaxNameLength)}
	}
	return nil
}

// ValidateEventID checks that id is a ULID in its canonical 26-character
// form.
func ValidateEventID(id string) error {
	u, err := ulid.ParseStrict(id)
	if err != nil {
		return &ValidationError{Field: "event_id", Reason: fmt.Sprintf("%q is not a ULID: %v", id, err)}
	}
	if u.String() != id {
		return &ValidationError{Field: "event_id", Reason: fmt.Sprintf("%q is not a canonical (upper-case) ULID", id)}
	}
	return nil
}

// ValidatePayload checks that p is one well-formed JSON value other than
// null.
func ValidatePayload(field string, p json.RawMessage) error {
	if len(p) == 0 {
		return &ValidationError{Field: field, Reason: "is empty (want JSON, e.g. {})"}
	}
	if !json.Valid(p) {
		return &ValidationError{Field: field, Reason: "is not well-formed JSON"}
	}
	if string(bytes.TrimSpace(p)) == "null" {
		return &ValidationError{Field: field, Reason: "is null (want JSON, e.g. {})"}
	}
	return nil
}
