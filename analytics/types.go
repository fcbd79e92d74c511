package analytics

import "time"

// EventInput is one event to ingest. Its JSON form is what
// Config.MaxEventBytes measures.
type EventInput struct {
	// EventID is the client's id of the event, a ULID (26 characters of
	// Crockford base 32, any case; stored upper case). With one, the
	// event is stored and counted once however often it is ingested:
	// its shard is derived from the id and it is written only if that
	// item does not exist yet, so a repeat is reported as
	// StatusDuplicate. Its time should be the event's: without
	// CreatedAt, createdAt is the id's time. Optional: without one the
	// store makes an id (or derives one from IngestOptions.IdempotencyKey)
	// and, without a key, ingesting the event again stores it again.
	EventID string `json:"eventId,omitempty"`
	// Type names what happened: a lowercase letter, then up to 63
	// lowercase letters, digits or underscores ("page_view", "click").
	// Required.
	Type string `json:"type"`
	// SessionID groups the events of one visit; required (1–128 bytes,
	// no '#'). Use time-ordered ids (ULIDs) for RecentSessions to list
	// the latest sessions first.
	SessionID string `json:"sessionId"`
	// UserID is the signed-in user, empty for an anonymous visitor
	// (at most 128 bytes, no '#').
	UserID string `json:"userId,omitempty"`
	// URL and Referrer are at most 2048 bytes each.
	URL      string `json:"url,omitempty"`
	Referrer string `json:"referrer,omitempty"`
	// Properties are custom data; they must encode as JSON.
	Properties map[string]any `json:"properties,omitempty"`
	UserAgent  string         `json:"userAgent,omitempty"`
	// CreatedAt is when the event happened (default: now). It may be at
	// most Config.MaxClockSkew ahead of now and Config.MaxAge behind it.
	CreatedAt *time.Time `json:"createdAt,omitempty"`
}

// Event is a stored raw event.
type Event struct {
	SourceID string `json:"sourceId"`
	// Shard is the shard of the source the event was written to.
	Shard int `json:"shard"`
	// EventID is a ULID whose time is CreatedAt; the events of one
	// Ingest call with the same millisecond are in batch order.
	EventID    string         `json:"eventId"`
	Type       string         `json:"type"`
	SessionID  string         `json:"sessionId"`
	UserID     string         `json:"userId,omitempty"`
	URL        string         `json:"url,omitempty"`
	Referrer   string         `json:"referrer,omitempty"`
	Properties map[string]any `json:"properties,omitempty"`
	// SealedProperties holds the properties sealed (a signed-in user's,
	// by a store with Config.Keys) as the table, its stream and the
	// analytics topics carry them; Properties is then empty. The store's
	// reads open them into Properties.
	SealedProperties string `json:"sealedProperties,omitempty"`
	UserAgent        string `json:"userAgent,omitempty"`
	// Actor is the authenticated subject that ingested the event
	// (IngestOptions.Caller); absent when the API had no authentication.
	Actor string `json:"actor,omitempty"`
	// CreatedAt is in UTC.
	CreatedAt time.Time `json:"createdAt"`
	// ExpiresAt is when DynamoDB's TTL may delete the event (its ttl
	// attribute, whole seconds).
	ExpiresAt time.Time `json:"expiresAt"`
}

// Session summarises one visit.
type Session struct {
	SourceID    string    `json:"sourceId"`
	SessionID   string    `json:"sessionId"`
	UserID      string    `json:"userId,omitempty"`
	EventCount  int64     `json:"eventCount"`
	EntryURL    string    `json:"entryUrl,omitempty"`
	ExitURL     string    `json:"exitUrl,omitempty"`
	FirstSeenAt time.Time `json:"firstSeenAt"`
	LastSeenAt  time.Time `json:"lastSeenAt"`
	// DurationSeconds is the item's duration attribute.
	DurationSeconds int64 `json:"duration"`
	// ExpiresAt is the item's ttl; zero when it has none.
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
}

// Aggregation holds the counts of one source in one time bucket.
type Aggregation struct {
	SourceID string `json:"sourceId"`
	Period   Period `json:"period"`
	// Bucket is HourBucket or DayBucket of the bucket's start.
	Bucket string `json:"bucket"`
	// Start is the bucket's start (parsed from Bucket), UTC.
	Start     time.Time `json:"start"`
	Events    int64     `json:"events"`
	PageViews int64     `json:"pageViews"`
	// Sessions counts the sessions that started in the bucket.
	Sessions int64            `json:"sessions"`
	PerType  map[string]int64 `json:"perType,omitempty"`
	// UniqueUsers estimates the distinct signed-in users of the bucket:
	// the merged HyperLogLog sketches of the item (one per Kafka
	// partition the aggregation consumer read).
	UniqueUsers int64 `json:"uniqueUsers"`
	// UsersSketch is the merged sketch (rollup.UnmarshalSketch reads it),
	// so that buckets can be merged: the union of a day's hours counts
	// the same users as the day. Nil when the bucket has no users.
	UsersSketch []byte `json:"usersSketch,omitempty"`
}

// IngestOptions are the options of Store.IngestBatch.
type IngestOptions struct {
	// IdempotencyKey makes a batch safe to retry (the Idempotency-Key
	// header of draft-ietf-httpapi-idempotency-key-header): each event
	// without an EventID gets an id derived from (source, key, index in
	// the batch) and the time of the first ingestion of the key, so a
	// retry of the same batch writes the same items, which exist. The
	// store keeps a fingerprint of the batch under the key for
	// Config.IdempotencyTTL; the same key with another batch is a
	// *KeyReuseError and nothing is stored. 1–255 printable ASCII
	// characters. Empty: no key.
	IdempotencyKey string
	// Caller is whoever sent the batch (the authenticated subject). Each
	// event it stores records it as its Actor, and it scopes
	// IdempotencyKey: the same key of two callers is two keys, each with its
	// own fingerprint and derived event ids, so callers neither dedupe
	// against nor replay each other's batches. Empty: the key is the
	// source's, shared by every caller of it (an API without
	// authentication).
	Caller string
}

// Status is what IngestBatch did with one event.
type Status string

// The statuses of an ingested event.
const (
	// StatusStored: the event was written by this call or, for an id
	// derived from an idempotency key, by an earlier call with the same
	// key and batch (a retry is answered as the first call was).
	StatusStored Status = "stored"
	// StatusDuplicate: an event with the client's EventID was already
	// stored (by an earlier call, or earlier in this batch); it was not
	// written again and is not counted again.
	StatusDuplicate Status = "duplicate"
	// StatusFailed: the event may not be stored (DynamoDB failed, or the
	// context ended); ingesting it again is safe when it has an id.
	StatusFailed Status = "failed"
)

// Result is the outcome for the event at the same index of an
// IngestBatch input.
type Result struct {
	// Event is the event as it was (or would have been) stored; for a
	// duplicate, its id and shard are the stored item's, its other
	// fields are this call's input.
	Event Event
	// Status says whether the event is in the table.
	Status Status
	// Err is why it failed (StatusFailed only).
	Err error
}
