package analytics

import (
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/internal/ddbattr"
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
	AttrPerType     = "perType"
	AttrUniqueUsers = "uniqueUsers"
)

// Key prefixes; a stream reader tells items apart by the sk prefixes.
const (
	SKEventPrefix       = "EVENT#"
	SKSessionPrefix     = "SESSION#"
	SKAggregationPrefix = "AGG#"
	prefixSource        = "SOURCE#"
	infixShard          = "#SHARD#"
	prefixUser          = "USER#"
)

// Period is the length of an aggregation's time bucket.
type Period string

// The periods of the aggregations.
const (
	Hourly Period = "hourly"
	Daily  Period = "daily"
)

// periodSpec is how a period's buckets are named and how long they are.
// Bucket names sort as the buckets follow each other in time.
type periodSpec struct {
	layout string
	length time.Duration
}

var periodSpecs = map[Period]periodSpec{
	Hourly: {layout: "2006-01-02T15:00:00Z", length: time.Hour},
	Daily:  {layout: time.DateOnly, length: 24 * time.Hour},
}

// HourBucket names the UTC hour holding t, as 2026-05-12T14:00:00Z.
func HourBucket(t time.Time) string { return Hourly.Bucket(t) }

// DayBucket names the UTC day holding t, as 2026-05-12.
func DayBucket(t time.Time) string { return Daily.Bucket(t) }

// Bucket names the bucket of p holding t (HourBucket or DayBucket); it is
// empty for an unknown period.
func (p Period) Bucket(t time.Time) string {
	spec, ok := periodSpecs[p]
	if !ok {
		return ""
	}
	return t.UTC().Format(spec.layout)
}

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
