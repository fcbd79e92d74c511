package dynamodb

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/internal/ddbattr"
)

type item = map[string]types.AttributeValue

func getS(it item, name string) (string, error) {
	v, ok := it[name]
	if !ok {
		return "", fmt.Errorf("attribute %s is missing", name)
	}
	s, ok := v.(*types.AttributeValueMemberS)
	if !ok {
		return "", fmt.Errorf("attribute %s is %T, want S", name, v)
	}
	return s.Value, nil
}

func getOptS(it item, name string) string {
	if s, ok := it[name].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

func getN(it item, name string) (int64, error) {
	v, ok := it[name]
	if !ok {
		return 0, fmt.Errorf("attribute %s is missing", name)
	}
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("attribute %s is %T, want N", name, v)
	}
	i, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("attribute %s: %w", name, err)
	}
	return i, nil
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// eventItem is the EVENT item of e: keys, GSI1 keys and the envelope's
// fields as top-level attributes (empty metadata fields are left out).
func eventItem(e eventstore.Envelope) item {
	it := item{
		AttrPK:            ddbattr.S(PartitionKey(e.Aggregate())),
		AttrSK:            ddbattr.S(EventSK(e.Sequence)),
		AttrGSI1PK:        ddbattr.S(TypeKey(e.EventType)),
		AttrGSI1SK:        ddbattr.S(gsiSKPrefix + e.EventID),
		AttrEventID:       ddbattr.S(e.EventID),
		AttrAggregateType: ddbattr.S(e.AggregateType),
		AttrAggregateID:   ddbattr.S(e.AggregateID),
		AttrSeq:           ddbattr.N(e.Sequence),
		AttrEventType:     ddbattr.S(e.EventType),
		AttrSchemaVersion: ddbattr.N(int64(e.SchemaVersion)),
		AttrOccurredAt:    ddbattr.S(formatTime(e.OccurredAt)),
		AttrPayload:       ddbattr.S(string(e.Payload)),
	}
	ddbattr.SetOpt(it, AttrCorrelationID, e.Metadata.CorrelationID)
	ddbattr.SetOpt(it, AttrCausationID, e.Metadata.CausationID)
	ddbattr.SetOpt(it, AttrActor, e.Metadata.Actor)
	ddbattr.SetOpt(it, AttrIP, e.Metadata.IP)
	ddbattr.SetOpt(it, AttrActorSource, e.Metadata.ActorSource)
	ddbattr.SetOpt(it, AttrTraceParent, e.Metadata.TraceParent)
	return it
}

// EnvelopeFromItem decodes an EVENT item (from a read, or a stream
// record's NEW_IMAGE converted to these types) into its envelope, as
// stored: no upcasting. A missing or mistyped attribute, or an envelope
// that fails Validate, returns a *eventstore.DecodeError.
func EnvelopeFromItem(it map[string]types.AttributeValue) (eventstore.Envelope, error) {
	var e eventstore.Envelope
	var err error
	get := func(name string, dst *string) {
		if err == nil {
			*dst, err = getS(it, name)
		}
	}
	get(AttrEventID, &e.EventID)
	get(AttrAggregateType, &e.AggregateType)
	get(AttrAggregateID, &e.AggregateID)
	get(AttrEventType, &e.EventType)
	var occurred, payload string
	get(AttrOccurredAt, &occurred)
	get(AttrPayload, &payload)
	if err == nil {
		e.Sequence, err = getN(it, AttrSeq)
	}
	var version int64
	if err == nil {
		version, err = getN(it, AttrSchemaVersion)
	}
	if err == nil {
		e.OccurredAt, err = time.Parse(time.RFC3339Nano, occurred)
	}
	if err != nil {
		return eventstore.Envelope{}, &eventstore.DecodeError{What: "event item", Reason: err.Error()}
	}
	e.SchemaVersion = int(version)
	e.OccurredAt = e.OccurredAt.UTC()
	e.Payload = json.RawMessage(payload)
	e.Metadata = eventstore.Metadata{
		CorrelationID: getOptS(it, AttrCorrelationID),
		CausationID:   getOptS(it, AttrCausationID),
		Actor:         getOptS(it, AttrActor),
		IP:            getOptS(it, AttrIP),
		ActorSource:   getOptS(it, AttrActorSource),
		TraceParent:   getOptS(it, AttrTraceParent),
	}
	if err := e.Validate(); err != nil {
		var ve *eventstore.ValidationError
		if errors.As(err, &ve) {
			return eventstore.Envelope{}, &eventstore.DecodeError{What: "event item", Field: ve.Field, Reason: ve.Reason}
		}
		return eventstore.Envelope{}, &eventstore.DecodeError{What: "event item", Reason: err.Error()}
	}
	return e, nil
}

// outboundItem is the OUTBOUND item of o, caused by event cause.
func outboundItem(o eventstore.Outbound, cause eventstore.Envelope) item {
	it := item{
		AttrPK:            ddbattr.S(PartitionKey(cause.Aggregate())),
		AttrSK:            ddbattr.S(OutboundSK(o.Seq, o.Index)),
		AttrOutboundID:    ddbattr.S(eventstore.NewEventID(time.Now())),
		AttrName:          ddbattr.S(o.Name),
		AttrAggregateType: ddbattr.S(cause.AggregateType),
		AttrAggregateID:   ddbattr.S(cause.AggregateID),
		AttrSeq:           ddbattr.N(o.Seq),
		AttrIndex:         ddbattr.N(int64(o.Index)),
		AttrEventID:       ddbattr.S(cause.EventID),
		AttrOccurredAt:    ddbattr.S(formatTime(cause.OccurredAt)),
		AttrPayload:       ddbattr.S(string(o.Payload)),
	}
	ddbattr.SetOpt(it, AttrCorrelationID, cause.Metadata.CorrelationID)
	ddbattr.SetOpt(it, AttrCausationID, cause.EventID)
	ddbattr.SetOpt(it, AttrActor, cause.Metadata.Actor)
	ddbattr.SetOpt(it, AttrIP, cause.Metadata.IP)
	ddbattr.SetOpt(it, AttrActorSource, cause.Metadata.ActorSource)
	ddbattr.SetOpt(it, AttrTraceParent, cause.Metadata.TraceParent)
	return it
}

// OutboundFromItem decodes an OUTBOUND item (e.g. a stream NEW_IMAGE).
// Its metadata's causation id is the id of the event that caused it.
func OutboundFromItem(it map[string]types.AttributeValue) (eventstore.OutboundRecord, error) {
	var o eventstore.OutboundRecord
	var err error
	get := func(name string, dst *string) {
		if err == nil {
			*dst, err = getS(it, name)
		}
	}
	var occurred, payload string
	get(AttrOutboundID, &o.ID)
	get(AttrName, &o.Name)
	get(AttrAggregateType, &o.AggregateType)
	get(AttrAggregateID, &o.AggregateID)
	get(AttrEventID, &o.EventID)
	get(AttrOccurredAt, &occurred)
	get(AttrPayload, &payload)
	var idx int64
	if err == nil {
		o.Seq, err = getN(it, AttrSeq)
	}
	if err == nil {
		idx, err = getN(it, AttrIndex)
	}
	if err == nil {
		o.OccurredAt, err = time.Parse(time.RFC3339Nano, occurred)
	}
	if err == nil && !json.Valid([]byte(payload)) {
		err = errors.New("payload is not JSON")
	}
	if err != nil {
		return eventstore.OutboundRecord{}, &eventstore.DecodeError{What: "outbound item", Reason: err.Error()}
	}
	o.Index = int(idx)
	o.OccurredAt = o.OccurredAt.UTC()
	o.Payload = json.RawMessage(payload)
	o.Metadata = eventstore.Metadata{
		CorrelationID: getOptS(it, AttrCorrelationID),
		CausationID:   getOptS(it, AttrCausationID),
		Actor:         getOptS(it, AttrActor),
		IP:            getOptS(it, AttrIP),
		ActorSource:   getOptS(it, AttrActorSource),
		TraceParent:   getOptS(it, AttrTraceParent),
	}
	return o, nil
}

// stateItem is a STATE or #SNAPSHOT item (with its revision when it has
// one).
func stateItem(ref eventstore.Ref, sk string, s eventstore.Stored) item {
	it := item{
		AttrPK:        ddbattr.S(PartitionKey(ref)),
		AttrSK:        ddbattr.S(sk),
		AttrSeq:       ddbattr.N(s.Seq),
		AttrState:     ddbattr.S(string(s.Data)),
		AttrUpdatedAt: ddbattr.S(formatTime(s.UpdatedAt)),
	}
	ddbattr.SetOpt(it, AttrStateRevision, s.Revision)
	return it
}

func storedFromItem(it item) (eventstore.Stored, error) {
	seq, err := getN(it, AttrSeq)
	if err != nil {
		return eventstore.Stored{}, err
	}
	data, err := getS(it, AttrState)
	if err != nil {
		return eventstore.Stored{}, err
	}
	updated, _ := time.Parse(time.RFC3339Nano, getOptS(it, AttrUpdatedAt))
	return eventstore.Stored{Seq: seq, Data: json.RawMessage(data), UpdatedAt: updated.UTC(), Revision: getOptS(it, AttrStateRevision)}, nil
}

// commandItem records the result of command id.
func commandItem(req eventstore.AppendRequest, now time.Time, ttl time.Duration) item {
	ids := make([]types.AttributeValue, len(req.Events))
	for i, e := range req.Events {
		ids[i] = ddbattr.S(e.EventID)
	}
	it := item{
		AttrPK:        ddbattr.S(PartitionKey(req.Aggregate)),
		AttrSK:        ddbattr.S(CommandSK(req.CommandID)),
		AttrCommandID: ddbattr.S(req.CommandID),
		AttrFirstSeq:  ddbattr.N(req.ExpectedVersion + 1),
		AttrLastSeq:   ddbattr.N(req.NewVersion()),
		AttrEventIDs:  &types.AttributeValueMemberL{Value: ids},
		AttrUpdatedAt: ddbattr.S(formatTime(now)),
	}
	if ttl > 0 {
		it[AttrTTL] = ddbattr.N(now.Add(ttl).Unix())
	}
	return it
}

// refusalItem is the COMMAND# record of a command answered without an
// append: lastSeq is the version it was decided at, and status marks it as
// a refusal.
func refusalItem(ref eventstore.Ref, commandID string, r eventstore.Refusal, now time.Time, ttl time.Duration) item {
	r = r.Recorded()
	it := item{
		AttrPK:        ddbattr.S(PartitionKey(ref)),
		AttrSK:        ddbattr.S(CommandSK(commandID)),
		AttrCommandID: ddbattr.S(commandID),
		AttrFirstSeq:  ddbattr.N(r.Version + 1),
		AttrLastSeq:   ddbattr.N(r.Version),
		AttrStatus:    ddbattr.S(r.Status),
		AttrUpdatedAt: ddbattr.S(formatTime(now)),
	}
	ddbattr.SetOpt(it, AttrReason, r.Reason)
	ddbattr.SetOpt(it, AttrCode, string(r.Code))
	if ttl > 0 {
		it[AttrTTL] = ddbattr.N(now.Add(ttl).Unix())
	}
	return it
}

// commandOutcome reads a COMMAND# record: the result of an applied command
// (Duplicate set), or *eventstore.RefusedCommandError for a refused one.
func commandOutcome(ref eventstore.Ref, commandID string, it item) (eventstore.AppendResult, error) {
	status := getOptS(it, AttrStatus)
	if status == "" {
		return resultFromCommandItem(ref, it)
	}
	version, err := getN(it, AttrLastSeq)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	return eventstore.AppendResult{}, &eventstore.RefusedCommandError{Aggregate: ref, CommandID: commandID,
		Refusal: eventstore.Refusal{Status: status, Reason: getOptS(it, AttrReason), Code: eventstore.Code(getOptS(it, AttrCode)), Version: version}}
}

func resultFromCommandItem(ref eventstore.Ref, it item) (eventstore.AppendResult, error) {
	first, err := getN(it, AttrFirstSeq)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	last, err := getN(it, AttrLastSeq)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	res := eventstore.AppendResult{Aggregate: ref, FirstSeq: first, LastSeq: last, Duplicate: true}
	if l, ok := it[AttrEventIDs].(*types.AttributeValueMemberL); ok {
		for _, v := range l.Value {
			if s, ok := v.(*types.AttributeValueMemberS); ok {
				res.EventIDs = append(res.EventIDs, s.Value)
			}
		}
	}
	return res, nil
}
