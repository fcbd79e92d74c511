package analytics

import (
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/internal/ddbattr"
	"github.com/eventpipe/eventpipe/rollup"
)

// Key attributes, the index of a user's sessions and the TTL attribute.
// migrations/dynamodb creates the table with these.
const (
	AttrPK      = "pk"
	AttrSK      = "sk"
	AttrGSI1PK  = "gsi1pk"
	AttrGSI1SK  = "gsi1sk"
	IndexByUser = "gsi1"
	AttrTTL     = "ttl"
)

// Attributes of the items (see the package documentation for which item
// holds which).
const (
	AttrSourceID    = "sourceId"
	AttrShard       = "shard"
	AttrEventID     = "eventId"
	AttrType        = "type"
	AttrSessionID   = "sessionId"
	AttrUserID      = "userId"
	AttrURL         = "url"
	AttrReferrer    = "referrer"
	AttrProperties  = "properties"
	AttrUserAgent   = "userAgent"
	AttrActor       = "actor"
	AttrCreatedAt   = "createdAt"
	AttrEventCount  = "eventCount"
	AttrEntryURL    = "entryUrl"
	AttrExitURL     = "exitUrl"
	AttrFirstSeenAt = "firstSeenAt"
	AttrLastSeenAt  = "lastSeenAt"
	AttrDuration    = "duration"
	AttrEvents      = "events"
	AttrPageViews   = "pageViews"
	AttrSessions    = "sessions"
	// AttrFingerprint and AttrFirstUsedAt are an idempotency key's: the
	// hex SHA-256 of its batch and when it was first used (RFC 3339).
	AttrFingerprint = "fingerprint"
	AttrFirstUsedAt = "firstUsedAt"
)

// Attributes the aggregation consumer writes. An aggregation item holds
// one counter per event type (AttrPerTypePrefix + type), and per Kafka
// partition of its source's topic the highest offset applied
// (AttrWatermarkPrefix + partition) and a HyperLogLog sketch of the
// users seen there (AttrUsersPrefix + partition). A session item holds
// the ids of its first, last, entry and exit events, the ids of its most
// recent events (AttrRecentIDs, 16 bytes each, oldest first) and a
// version (AttrVersion) its writes are conditional on.
const (
	AttrPerTypePrefix   = "type#"
	AttrWatermarkPrefix = "wm#"
	AttrUsersPrefix     = "users#"
	AttrFirstEventID    = "firstEventId"
	AttrLastEventID     = "lastEventId"
	AttrEntryEventID    = "entryEventId"
	AttrExitEventID     = "exitEventId"
	AttrRecentIDs       = "recentIds"
	AttrVersion         = "ver"
)

// Key prefixes; a stream reader tells items apart by the sk prefixes.
const (
	SKEventPrefix       = "EVENT#"
	SKSessionPrefix     = "SESSION#"
	SKAggregationPrefix = "AGG#"
	SKIdempotencyPrefix = "IDEMPOTENCY#"
	prefixSource        = "SOURCE#"
	infixShard          = "#SHARD#"
	prefixUser          = "USER#"
)

// Period is the length of an aggregation's time bucket (rollup.Period).
type Period = rollup.Period

// The periods of the aggregations.
const (
	Hourly = rollup.Hourly
	Daily  = rollup.Daily
)

// HourBucket names the UTC hour holding t, as 2026-05-12T14:00:00Z.
func HourBucket(t time.Time) string { return Hourly.Bucket(t) }

// DayBucket names the UTC day holding t, as 2026-05-12.
func DayBucket(t time.Time) string { return Daily.Bucket(t) }

// Key is the primary key of an item.
type Key struct{ PK, SK string }

// Attributes returns k as the Key of a GetItem, UpdateItem or DeleteItem.
func (k Key) Attributes() map[string]types.AttributeValue {
	return item{AttrPK: ddbattr.S(k.PK), AttrSK: ddbattr.S(k.SK)}
}

// SourceKey is the pk of a source's sessions and aggregations.
func SourceKey(sourceID string) string { return prefixSource + sourceID }

// EventKey is the key of a raw event in shard shard of its source.
func EventKey(sourceID string, shard int, eventID string) Key {
	return Key{PK: SourceKey(sourceID) + infixShard + strconv.Itoa(shard), SK: SKEventPrefix + eventID}
}

// IdempotencyKeyKey is the key of the item that remembers an
// idempotency key of a source (IngestOptions.IdempotencyKey).
func IdempotencyKeyKey(sourceID, key string) Key {
	return Key{PK: SourceKey(sourceID), SK: SKIdempotencyPrefix + key}
}

// SessionKey is the key of a session. Its SK is also the session's gsi1sk.
func SessionKey(sourceID, sessionID string) Key {
	return Key{PK: SourceKey(sourceID), SK: SKSessionPrefix + sessionID}
}

// UserKey is the gsi1pk of the sessions of a user, across sources.
func UserKey(userID string) string { return prefixUser + userID }

// AggregationKey is the key of the aggregation of bucket (HourBucket or
// DayBucket) for period.
func AggregationKey(sourceID string, period Period, bucket string) Key {
	return Key{PK: SourceKey(sourceID), SK: aggregationPrefix(period) + bucket}
}

func aggregationPrefix(p Period) string { return SKAggregationPrefix + string(p) + "#" }
