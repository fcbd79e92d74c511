package dynamodb

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/eventpipe/eventpipe/eventstore"
)

// Key attributes and the index by event type. migrations/dynamodb creates
// the table with these.
const (
	AttrPK       = "pk"
	AttrSK       = "sk"
	AttrGSI1PK   = "gsi1pk"
	AttrGSI1SK   = "gsi1sk"
	IndexByType  = "gsi1"
	AttrTTL      = "ttl"
	seqDigits    = 12
	prefixAgg    = "AGGREGATE#"
	prefixType   = "EVENT_TYPE#"
	prefixAggTyp = "AGGREGATE_TYPE#"
	gsiSKPrefix  = "EVENT#"
	commandLabel = "COMMAND#"
)

// Sort keys and sort-key prefixes of the items in an aggregate partition.
// A stream reader tells items apart by these prefixes.
const (
	SKMetadata       = "#METADATA"
	SKSnapshot       = "#SNAPSHOT"
	SKState          = "STATE"
	SKEventPrefix    = "EVENT#"
	SKOutboundPrefix = "OUTBOUND#"
	SKCommandPrefix  = commandLabel
)

// Attributes of the items. Events carry the envelope's fields.
const (
	AttrEventID       = "eventId"
	AttrAggregateType = "aggregateType"
	AttrAggregateID   = "aggregateId"
	AttrSeq           = "seq"
	AttrEventType     = "eventType"
	AttrSchemaVersion = "schemaVersion"
	AttrOccurredAt    = "occurredAt"
	AttrPayload       = "payload"
	AttrCorrelationID = "correlationId"
	AttrCausationID   = "causationId"
	AttrActor         = "actor"
	AttrIP            = "ip"
	AttrActorSource   = "actorSource"
	AttrTraceParent   = "traceparent"
	AttrCurrentSeq    = "currentSeq"
	AttrUpdatedAt     = "updatedAt"
	AttrState         = "state"
	AttrStateRevision = "rev" // a STATE item's revision (eventstore.Stored.Revision)
	AttrOutboundID    = "outboundId"
	AttrName          = "name"
	AttrIndex         = "idx"
	AttrCommandID     = "commandId"
	AttrFirstSeq      = "firstSeq"
	AttrLastSeq       = "lastSeq"
	AttrEventIDs      = "eventIds"
	AttrStatus        = "status" // set on the record of a refused command only
	AttrReason        = "reason"
	AttrCode          = "code" // a refused command's eventstore.Code, when it had one
)

// PartitionKey is the pk of every item of aggregate ref.
func PartitionKey(ref eventstore.Ref) string { return prefixAgg + ref.Type + "#" + ref.ID }

// EventSK is the sk of the event with sequence seq.
func EventSK(seq int64) string { return SKEventPrefix + padSeq(seq) }

// OutboundSK is the sk of the index-th outbound event caused by seq.
func OutboundSK(seq int64, index int) string {
	return SKOutboundPrefix + padSeq(seq) + "#" + strconv.Itoa(index)
}

// CommandSK is the sk of the record of command id.
func CommandSK(commandID string) string { return SKCommandPrefix + commandID }

// AggregateTypeKey is the gsi1pk of the #METADATA item of every
// aggregate of aggregateType (its gsi1sk is the aggregate's id), by which
// ListAggregates queries the aggregates of a type.
func AggregateTypeKey(aggregateType string) string { return prefixAggTyp + aggregateType }

// TypeKey is the gsi1pk of every event of eventType.
func TypeKey(eventType string) string { return prefixType + eventType }

func padSeq(seq int64) string { return fmt.Sprintf("%0*d", seqDigits, seq) }

// SeqFromSK parses the sequence out of an EVENT# or OUTBOUND# sort key.
func SeqFromSK(sk string) (int64, error) {
	var rest string
	switch {
	case strings.HasPrefix(sk, SKEventPrefix):
		rest = sk[len(SKEventPrefix):]
	case strings.HasPrefix(sk, SKOutboundPrefix):
		rest, _, _ = strings.Cut(sk[len(SKOutboundPrefix):], "#")
	default:
		return 0, fmt.Errorf("sort key %q holds no sequence", sk)
	}
	if len(rest) != seqDigits {
		return 0, fmt.Errorf("sort key %q: sequence is not %d digits", sk, seqDigits)
	}
	return strconv.ParseInt(rest, 10, 64)
}
