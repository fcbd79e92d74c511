package analytics

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"
)

// Limits of an event's fields.
const (
	MaxIDBytes  = 128  // a session or user id
	MaxURLBytes = 2048 // url and referrer
)

var (
	sourceIDPattern  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	eventTypePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
)

func validSource(id string) error {
	if !sourceIDPattern.MatchString(id) {
		return invalid("sourceId", "%q must be 1–64 letters, digits, '_' or '-'", id)
	}
	return nil
}

// Ingest stores a batch of events of source sourceID (AP1) and returns
// them as stored, in input order.
//
// Every event is checked before anything is written: a bad source id, an
// empty or too large batch (Config.MaxBatch) or a bad event is a
// *eventstore.ValidationError (a bad event's wrapped in an *EventError
// with its Index) and nothing is stored. Each
// event then gets a ULID whose time is its createdAt (monotonic within
// the call, so events of the same millisecond keep their batch order), a
// random shard of Config.Shards and a ttl of createdAt + Config.EventTTL,
// and the batch is written with BatchWriteItem, 25 events a call.
// Unprocessed items are sent again after an exponential backoff with
// jitter, at most Config.WriteAttempts times per call; when a call fails,
// the attempts run out or ctx ends, Ingest stops and returns the events
// written so far with a *WriteError naming how many were not. Ingest
// does not deduplicate: ingesting the same input again stores it again.
func (s *Store) Ingest(ctx context.Context, sourceID string, in []EventInput) ([]Event, error) {
	events, items, err := s.prepare(sourceID, in)
	if err != nil {
		return nil, fmt.Errorf("ingest %s: %w", sourceID, err)
	}
	unwritten, err := s.writeItems(ctx, items)
	if err != nil {
		stored := make([]Event, 0, len(events)-len(unwritten))
		for i, e := range events {
			if _, missing := slices.BinarySearch(unwritten, i); !missing {
				stored = append(stored, e)
			}
		}
		return stored, fmt.Errorf("ingest %s: %w", sourceID,
			&WriteError{Written: len(stored), NotWritten: len(unwritten), Unwritten: unwritten, Err: err})
	}
	return events, nil
}

// prepare validates a batch and builds its events and items.
func (s *Store) prepare(sourceID string, in []EventInput) ([]Event, []item, error) {
	if err := validSource(sourceID); err != nil {
		return nil, nil, err
	}
	if len(in) == 0 || len(in) > s.cfg.MaxBatch {
		return nil, nil, invalid("events", "has %d events, want 1–%d", len(in), s.cfg.MaxBatch)
	}
	now := s.cfg.Now()
	entropy := ulid.Monotonic(rand.Reader, 0)
	events := make([]Event, len(in))
	items := make([]item, len(in))
	for i, e := range in {
		createdAt, props, err := s.check(e, now)
		if err != nil {
			return nil, nil, &EventError{Index: i, Err: err}
		}
		id, err := ulid.New(ulid.Timestamp(createdAt), entropy)
		if err != nil {
			return nil, nil, fmt.Errorf("event %d: ulid: %w", i, err)
		}
		events[i] = Event{
			SourceID:   sourceID,
			Shard:      s.cfg.Rand(s.cfg.Shards),
			EventID:    id.String(),
			Type:       e.Type,
			SessionID:  e.SessionID,
			UserID:     e.UserID,
			URL:        e.URL,
			Referrer:   e.Referrer,
			Properties: e.Properties,
			UserAgent:  e.UserAgent,
			CreatedAt:  createdAt,
			ExpiresAt:  time.Unix(createdAt.Add(s.cfg.EventTTL).Unix(), 0).UTC(),
		}
		items[i] = eventItem(events[i], props)
	}
	return events, items, nil
}

// check validates one event and returns its createdAt (UTC) and its
// properties as JSON (nil when it has none).
func (s *Store) check(e EventInput, now time.Time) (time.Time, []byte, error) {
	if e.Type == "" {
		return time.Time{}, nil, invalid("type", "is empty")
	}
	if !eventTypePattern.MatchString(e.Type) {
		return time.Time{}, nil, invalid("type", "%q must be a lowercase letter and up to 63 lowercase letters, digits or '_'", e.Type)
	}
	if err := validID("sessionId", e.SessionID, MaxIDBytes, false); err != nil {
		return time.Time{}, nil, err
	}
	if err := validID("userId", e.UserID, MaxIDBytes, true); err != nil {
		return time.Time{}, nil, err
	}
	texts := []struct {
		name, v string
		max     int
	}{{"url", e.URL, MaxURLBytes}, {"referrer", e.Referrer, MaxURLBytes}, {"userAgent", e.UserAgent, s.cfg.MaxEventBytes}}
	for _, f := range texts {
		switch {
		case len(f.v) > f.max:
			return time.Time{}, nil, invalid(f.name, "is %d bytes, at most %d", len(f.v), f.max)
		case !utf8.ValidString(f.v):
			return time.Time{}, nil, invalid(f.name, "is not valid UTF-8")
		}
	}
	createdAt := now.UTC()
	if e.CreatedAt != nil {
		createdAt = e.CreatedAt.UTC()
		switch {
		case createdAt.After(now.Add(s.cfg.MaxClockSkew)):
			return time.Time{}, nil, invalid("createdAt", "%s is more than %v ahead of now", formatTime(createdAt), s.cfg.MaxClockSkew)
		case createdAt.Before(now.Add(-s.cfg.MaxAge)):
			return time.Time{}, nil, invalid("createdAt", "%s is more than %v ago", formatTime(createdAt), s.cfg.MaxAge)
		}
	}
	var props []byte
	if len(e.Properties) > 0 {
		var err error
		if props, err = json.Marshal(e.Properties); err != nil {
			return time.Time{}, nil, invalid("properties", "do not encode as JSON: %v", err)
		}
	}
	// The properties encode, so the event does.
	if b, _ := json.Marshal(e); len(b) > s.cfg.MaxEventBytes {
		return time.Time{}, nil, invalid("event", "is %d bytes as JSON, at most %d", len(b), s.cfg.MaxEventBytes)
	}
	return createdAt, props, nil
}
