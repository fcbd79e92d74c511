// Package analytics stores web analytics in one DynamoDB table: raw
// events, write-sharded for ingest throughput; sessions; and hourly and
// daily aggregations for dashboards (the seed "Analytics Events", issue
// 15). Create the table with migrations/dynamodb.CreateAnalyticsTable.
//
// Table layout (every key and attribute name is a constant of this
// package):
//
//	pk                     sk                                   what
//	SOURCE#<id>#SHARD#<n>  EVENT#<ulid>                         one raw event; ttl = createdAt + Config.EventTTL
//	SOURCE#<id>            SESSION#<sessionId>                  a session; with a user, gsi1pk USER#<userId> and gsi1sk SESSION#<sessionId>; ttl 90 days
//	SOURCE#<id>            AGG#hourly#<YYYY-MM-DDTHH:00:00Z>    the aggregation of one UTC hour
//	SOURCE#<id>            AGG#daily#<YYYY-MM-DD>               the aggregation of one UTC day
//	SOURCE#<id>            IDEMPOTENCY#<key>                    an idempotency key (of a caller: caller:<hash of caller and key>): fingerprint, firstUsedAt; ttl = first use + Config.IdempotencyTTL
//
// An event with an id — the client's EventID, or one derived from an
// idempotency key — is on the shard its id hashes to (FNV-1a of the id
// modulo Config.Shards; keep Shards while such events may be sent again)
// and written only if its item does not exist, so it is stored, and
// counted by the aggregation consumer, once however often it is
// ingested. An event without one gets a new ULID and a random shard
// each time and is not deduplicated (see IngestBatch).
//
// An event item holds sourceId (S), shard (N), eventId (S, a ULID whose
// time is createdAt), type, sessionId, userId, url, referrer, userAgent,
// actor (the authenticated subject that ingested it)
// (S; the empty ones left out), properties (S: the event's properties as
// a JSON object, left out when empty), createdAt (S, RFC 3339 with
// nanoseconds, UTC) and ttl (N, Unix seconds). Properties are a JSON
// string rather than a DynamoDB map so that they round-trip exactly
// (numbers keep their digits, null and empty strings survive), the size
// limit measures the bytes that are stored, and the stream's NEW_IMAGE
// decodes with one json.Unmarshal.
//
// With Config.Keys, a signed-in user's url, referrer, userAgent and
// properties are stored sealed with the user's key (package privacy,
// docs/privacy.md): each attribute then holds a sealed value ("pii1.…"),
// bound to the source, the event's id and the field, and the store's
// reads open them; a forgotten user's read "[forgotten]".
//
// A session item holds eventCount (N), entryUrl, exitUrl (S), firstSeenAt,
// lastSeenAt (S, RFC 3339 UTC), duration (N, seconds), userId (S,
// optional) and ttl (N); an aggregation item holds events, pageViews,
// sessions (sessions started in the bucket: whose earliest event falls in
// it) and one type#<type> counter per event type (N), and per Kafka
// partition of its source's topic users#<p> (B, a HyperLogLog sketch of
// the users seen there; readers merge them) and wm#<p> (N, the highest
// offset applied). The aggregation consumer (analytics/aggregator) writes
// sessions and aggregations from the analytics.<source> topics the relay
// fills from the table's stream, with the bookkeeping attributes listed
// at AttrPerTypePrefix; this package reads them. Their source, session
// id, period and bucket are read from the keys.
//
// Access patterns:
//
//	AP1 ingest events               conditional PutItem (events with an id) or  Store.IngestBatch, Store.Ingest
//	                                BatchWriteItem (the others)
//	AP2 a session's events          one Query per shard in parallel, filtered   Store.SessionEventsPage, Store.SessionEvents
//	AP3 a session                   GetItem                                     Store.Session
//	AP4 a source's recent sessions  Query SESSION#, descending                  Store.RecentSessions
//	AP5 a user's sessions           Query gsi1 USER#<userId>, descending        Store.UserSessions
//	AP6 a source's aggregations     Query AGG#<period>#, descending             Store.Aggregations
//	AP7 aggregations in a range     Query AGG#<period># BETWEEN, ascending      Store.AggregationsBetween
//
// Ids that become part of a key may not contain '#': a source id matches
// [A-Za-z0-9_-]{1,64}, session and user ids are 1–128 bytes of UTF-8
// without '#'. Invalid input is a *eventstore.ValidationError (in an
// *EventError naming the event of an Ingest batch) and nothing is
// written; a stored item that does not decode is a
// *eventstore.DecodeError.
//
// Listings (AP2 paged, AP4–AP6) page with opaque cursors: the base64url
// encoding (no padding) of a JSON object of string attributes —
// DynamoDB's LastEvaluatedKey, or for a session's events its session id
// and last event id. A cursor is only valid for the listing that
// returned it. Reads other than Session are eventually consistent.
package analytics
