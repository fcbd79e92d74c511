package analytics

import "time"

// EventInput is one event to ingest. Its JSON form is what
// Config.MaxEventBytes measures.
type EventInput struct {
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
	UserAgent  string         `json:"userAgent,omitempty"`
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
