package analytics

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"
)

// Limits of an event's fields.
const (
	MaxIDBytes  = 128  // a session or user id
	MaxURLBytes = 2048 // url and referrer
	// MaxIdempotencyKeyBytes bounds an IngestOptions.IdempotencyKey.
	MaxIdempotencyKeyBytes = 255
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
// the ones that are in the table (stored now, or duplicates of a stored
// EventID), in input order. It is IngestBatch without options: events
// with an EventID are stored once however often they are ingested; events
// without one get a new id each time, so ingesting them again stores them
// again. When some events could not be written it returns the others with
// a *WriteError naming the ones that were not (Unwritten).
func (s *Store) Ingest(ctx context.Context, sourceID string, in []EventInput) ([]Event, error) {
	results, err := s.IngestBatch(ctx, sourceID, in, IngestOptions{})
	if results == nil {
		return nil, err
	}
	stored := make([]Event, 0, len(results))
	for _, r := range results {
		if r.Status != StatusFailed {
			stored = append(stored, r.Event)
		}
	}
	return stored, err
}

// IngestBatch stores a batch of events of source sourceID (AP1) and
// returns the result of every event, in input order.
//
// Every event is checked before anything is written: a bad source id,
// idempotency key, an empty or too large batch (Config.MaxBatch) or a bad
// event (an EventID that is not a ULID included) is a
// *eventstore.ValidationError (a bad event's wrapped in an *EventError
// with its Index) and nothing is stored; so is a reused idempotency key
// (*KeyReuseError).
//
// An event with an id — the client's EventID, or with
// opts.IdempotencyKey one derived from (source, key, index) — goes to
// the shard its id hashes to and is written with a PutItem conditional
// on the item not existing (Config.WriteConcurrency in parallel): a
// repeat writes nothing, so the table's stream carries no second record
// and the aggregation consumer counts the event once. A client id that
// exists is StatusDuplicate (as is a repeat of an id within the batch);
// a derived one is StatusStored, as the first ingestion of the key
// answered.
//
// An event without an id gets a ULID whose time is its createdAt
// (monotonic within the call, so events of the same millisecond keep
// their batch order) and a random shard of Config.Shards; these are
// written with BatchWriteItem, 25 a call, unprocessed items sent again
// after an exponential backoff with jitter, at most Config.WriteAttempts
// times per call. They are not deduplicated.
//
// Every event gets a ttl of createdAt + Config.EventTTL. When a write
// fails or ctx ends, the events not known to be stored are StatusFailed
// and IngestBatch returns a *WriteError along with the results; an event
// with an id may be ingested again safely.
func (s *Store) IngestBatch(ctx context.Context, sourceID string, in []EventInput, opts IngestOptions) ([]Result, error) {
	b, err := s.prepare(sourceID, in, opts)
	if err != nil {
		return nil, fmt.Errorf("ingest %s: %w", sourceID, err)
	}
	if opts.IdempotencyKey != "" {
		first, err := s.claimKey(ctx, sourceID, b.key, opts.IdempotencyKey, fingerprint(sourceID, in), b.now)
		if err != nil {
			return nil, fmt.Errorf("ingest %s: %w", sourceID, err)
		}
		b.now = first
	}
	results, err := s.assign(b)
	if err != nil {
		return nil, fmt.Errorf("ingest %s: %w", sourceID, err)
	}
	if b.items, err = s.items(ctx, b, results); err != nil {
		return nil, fmt.Errorf("ingest %s: %w", sourceID, err)
	}
	if err := s.write(ctx, b, results); err != nil {
		return results, fmt.Errorf("ingest %s: %w", sourceID, err)
	}
	return results, nil
}

// batch is a checked IngestBatch input.
type batch struct {
	sourceID string
	key      string // scopedKey of the options' key and caller; "" for none
	caller   string // IngestOptions.Caller: each event's Actor
	now      time.Time
	in       []EventInput
	checked  []checkedEvent
	items    []item // the item of each event to write, sealed (nil for a duplicate)
}

// items makes the item of each event of b to write, its personal fields
// sealed (Config.Keys). Nothing is written when one fails: an
// *EventError holds the *privacy.ForgottenError of a forgotten user or
// the *privacy.KeyError of a KMS failure.
func (s *Store) items(ctx context.Context, b *batch, results []Result) ([]item, error) {
	items := make([]item, len(results))
	for i, r := range results {
		if r.Status != "" {
			continue
		}
		it, err := s.sealed(ctx, r.Event, b.checked[i].props)
		if err != nil {
			return nil, &EventError{Index: i, Err: err}
		}
		items[i] = it
	}
	return items, nil
}

// checkedEvent is what check made of an input event.
type checkedEvent struct {
	id        ulid.ULID // zero: none given
	createdAt time.Time // zero: not given (now, or the key's first use)
	props     []byte
}

// prepare validates a batch; nothing of it is written yet.
func (s *Store) prepare(sourceID string, in []EventInput, opts IngestOptions) (*batch, error) {
	if err := validSource(sourceID); err != nil {
		return nil, err
	}
	if opts.IdempotencyKey != "" {
		if err := validKey(opts.IdempotencyKey); err != nil {
			return nil, err
		}
	}
	if len(in) == 0 || len(in) > s.cfg.MaxBatch {
		return nil, invalid("events", "has %d events, want 1–%d", len(in), s.cfg.MaxBatch)
	}
	b := &batch{sourceID: sourceID, key: scopedKey(opts.Caller, opts.IdempotencyKey), caller: opts.Caller, now: s.cfg.Now(), in: in, checked: make([]checkedEvent, len(in))}
	for i, e := range in {
		c, err := s.check(e, b.now)
		if err != nil {
			return nil, &EventError{Index: i, Err: err}
		}
		b.checked[i] = c
	}
	return b, nil
}

// assign gives every event of b its id, createdAt, shard and ttl, and
// marks the repeats of a client id within the batch as duplicates.
func (s *Store) assign(b *batch) ([]Result, error) {
	entropy := ulid.Monotonic(rand.Reader, 0)
	results := make([]Result, len(b.in))
	firstOf := map[ulid.ULID]int{}
	for i, e := range b.in {
		c := b.checked[i]
		createdAt := c.createdAt
		if createdAt.IsZero() {
			createdAt = b.now.UTC()
		}
		id, shard := c.id, 0
		switch {
		case id != (ulid.ULID{}):
			shard = s.shardOf(id)
		case b.key != "":
			id = derivedID(b.sourceID, b.key, i, createdAt)
			shard = s.shardOf(id)
		default:
			var err error
			if id, err = ulid.New(ulid.Timestamp(createdAt), entropy); err != nil {
				return nil, fmt.Errorf("event %d: ulid: %w", i, err)
			}
			shard = s.cfg.Rand(s.cfg.Shards)
		}
		results[i] = Result{Event: Event{
			SourceID:   b.sourceID,
			Shard:      shard,
			EventID:    id.String(),
			Type:       e.Type,
			SessionID:  e.SessionID,
			UserID:     e.UserID,
			URL:        e.URL,
			Referrer:   e.Referrer,
			Properties: e.Properties,
			UserAgent:  e.UserAgent,
			Actor:      b.caller,
			CreatedAt:  createdAt,
			ExpiresAt:  time.Unix(createdAt.Add(s.cfg.EventTTL).Unix(), 0).UTC(),
		}}
		if c.id != (ulid.ULID{}) {
			if _, seen := firstOf[c.id]; seen {
				results[i].Status = StatusDuplicate
			} else {
				firstOf[c.id] = i
			}
		}
	}
	return results, nil
}

// check validates one event at now and returns what it holds: its id
// (when given), createdAt (UTC, when given or implied by the id) and
// properties as JSON (nil when it has none).
func (s *Store) check(e EventInput, now time.Time) (checkedEvent, error) {
	var c checkedEvent
	if e.EventID != "" {
		id, err := ulid.ParseStrict(e.EventID)
		if err != nil {
			return c, invalid("eventId", "%q is not a ULID: %v", e.EventID, err)
		}
		c.id = id
	}
	if e.Type == "" {
		return c, invalid("type", "is empty")
	}
	if !eventTypePattern.MatchString(e.Type) {
		return c, invalid("type", "%q must be a lowercase letter and up to 63 lowercase letters, digits or '_'", e.Type)
	}
	if err := validID("sessionId", e.SessionID, MaxIDBytes, false); err != nil {
		return c, err
	}
	if err := validID("userId", e.UserID, MaxIDBytes, true); err != nil {
		return c, err
	}
	texts := []struct {
		name, v string
		max     int
	}{{"url", e.URL, MaxURLBytes}, {"referrer", e.Referrer, MaxURLBytes}, {"userAgent", e.UserAgent, s.cfg.MaxEventBytes}}
	for _, f := range texts {
		switch {
		case len(f.v) > f.max:
			return c, invalid(f.name, "is %d bytes, at most %d", len(f.v), f.max)
		case !utf8.ValidString(f.v):
			return c, invalid(f.name, "is not valid UTF-8")
		}
	}
	field, what := "createdAt", ""
	switch {
	case e.CreatedAt != nil:
		c.createdAt = e.CreatedAt.UTC()
	case e.EventID != "":
		c.createdAt = ulid.Time(c.id.Time()).UTC()
		field, what = "eventId", "the time of "+c.id.String()+", "
	}
	if !c.createdAt.IsZero() {
		switch {
		case c.createdAt.After(now.Add(s.cfg.MaxClockSkew)):
			return c, invalid(field, "%s%s is more than %v ahead of now", what, formatTime(c.createdAt), s.cfg.MaxClockSkew)
		case c.createdAt.Before(now.Add(-s.cfg.MaxAge)):
			return c, invalid(field, "%s%s is more than %v ago", what, formatTime(c.createdAt), s.cfg.MaxAge)
		}
	}
	if len(e.Properties) > 0 {
		var err error
		if c.props, err = json.Marshal(e.Properties); err != nil {
			return c, invalid("properties", "do not encode as JSON: %v", err)
		}
	}
	// The properties encode, so the event does.
	if b, _ := json.Marshal(e); len(b) > s.cfg.MaxEventBytes {
		return c, invalid("event", "is %d bytes as JSON, at most %d", len(b), s.cfg.MaxEventBytes)
	}
	return c, nil
}
