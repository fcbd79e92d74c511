package eventstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Marshal encodes an envelope as the JSON every part of eventpipe exchanges
// (snake_case fields; payload embedded as JSON, not as a string). It
// refuses an envelope that fails Validate, returning its *ValidationError.
func Marshal(e Envelope) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("marshal envelope: %w", err)
	}
	e.OccurredAt = e.OccurredAt.UTC()
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("marshal envelope %s: %w", e.EventID, err)
	}
	return b, nil
}

// Unmarshal decodes bytes written by Marshal. Broken JSON, unknown fields,
// trailing data and envelopes that fail Validate all return a *DecodeError
// (errors.Is(err, ErrMalformed) holds). OccurredAt comes back in UTC.
func Unmarshal(data []byte) (Envelope, error) {
	const what = "event envelope"
	var e Envelope
	if err := DecodeStrict(what, data, &e); err != nil {
		return Envelope{}, err
	}
	if err := e.Validate(); err != nil {
		var ve *ValidationError
		if errors.As(err, &ve) {
			return Envelope{}, &DecodeError{What: what, Field: ve.Field, Reason: ve.Reason}
		}
		return Envelope{}, &DecodeError{What: what, Reason: err.Error()}
	}
	e.OccurredAt = e.OccurredAt.UTC()
	return e, nil
}

// DecodeStrict decodes data, which must hold exactly one JSON value, into
// v, refusing unknown fields and trailing data. Its error is a
// *DecodeError naming what was decoded and, for a value of the wrong JSON
// type, the field. Every strict decode in eventpipe goes through it:
// envelopes, command and result messages, command payloads.
func DecodeStrict(what string, data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return &DecodeError{What: what, Field: te.Field, Reason: fmt.Sprintf("has JSON type %s, want %s", te.Value, te.Type)}
		}
		return &DecodeError{What: what, Reason: err.Error()}
	}
	if dec.More() {
		return &DecodeError{What: what, Reason: "trailing data after the JSON value"}
	}
	return nil
}
