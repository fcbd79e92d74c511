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
// (errors.Is(err, ErrMalformedEnvelope) holds). OccurredAt comes back in
// UTC.
func Unmarshal(data []byte) (Envelope, error) {
	var e Envelope
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return Envelope{}, decodeErr(err)
	}
	if dec.More() {
		return Envelope{}, &DecodeError{Reason: "trailing data after the envelope"}
	}
	if err := e.Validate(); err != nil {
		var ve *ValidationError
		if errors.As(err, &ve) {
			return Envelope{}, &DecodeError{Field: ve.Field, Reason: ve.Reason}
		}
		return Envelope{}, &DecodeError{Reason: err.Error()}
	}
	e.OccurredAt = e.OccurredAt.UTC()
	return e, nil
}

func decodeErr(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return &DecodeError{Field: te.Field, Reason: fmt.Sprintf("has JSON type %s, want %s", te.Value, te.Type)}
	}
	return &DecodeError{Reason: err.Error()}
}
