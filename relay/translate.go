package relay

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ThreeDotsLabs/watermill/message"
	st "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/eventstore"
	store "github.com/eventpipe/eventpipe/eventstore/dynamodb"
)

// Outgoing is a message bound for a topic.
type Outgoing struct {
	Topic   string
	Message *message.Message
}

// RecordTranslator maps one stream record to the message the relay
// publishes for it (Config.Translator). Translate returns ok=false and a
// nil error for a record that is not published (the relay counts it as
// skipped), and an error for a record that can never be published: the
// relay sends that record to its poison topic with the error as the
// reason and moves on, so the error should name the record. The message
// should carry bus.MetadataPartitionKey: records with one key reach
// Kafka in stream order. Translate does no I/O and is called from one
// goroutine per shard held, so it must be safe for concurrent use.
type RecordTranslator interface {
	Translate(rec st.Record) (out Outgoing, ok bool, err error)
}

var _ RecordTranslator = Translator{}

// Translator is the RecordTranslator of the event store's table (the
// default): EVENT# items become their envelope on
// Topics.Events(aggregate type), OUTBOUND# items Topics.Outbound(name);
// every other item (#METADATA, STATE, #SNAPSHOT, command records) and
// every REMOVE (TTL expiry) is skipped.
type Translator struct {
	Topics bus.Topics
	// Upcasters, when set, bring events to their current schema version
	// before publishing, as the store does on read.
	Upcasters *eventstore.Upcasters
}

// Translate returns the message for rec, ok=false when the record is not
// published, or a *eventstore.DecodeError naming the record (its stream
// sequence number and sort key): the relay poisons such a record and
// moves on.
func (t Translator) Translate(rec st.Record) (out Outgoing, ok bool, err error) {
	if rec.Dynamodb == nil {
		return Outgoing{}, false, &eventstore.DecodeError{What: "stream record", Reason: "record has no dynamodb section"}
	}
	seq := deref(rec.Dynamodb.SequenceNumber)
	if rec.EventName == st.OperationTypeRemove {
		return Outgoing{}, false, nil
	}
	sk := keyS(rec.Dynamodb.Keys, store.AttrSK)
	if sk == "" {
		sk = keyS(rec.Dynamodb.NewImage, store.AttrSK)
	}
	fail := func(reason string) (Outgoing, bool, error) {
		return Outgoing{}, false, &eventstore.DecodeError{What: fmt.Sprintf("stream record %s (sk %q)", seq, sk), Reason: reason}
	}
	isEvent := strings.HasPrefix(sk, store.SKEventPrefix)
	isOutbound := strings.HasPrefix(sk, store.SKOutboundPrefix)
	if !isEvent && !isOutbound {
		return Outgoing{}, false, nil
	}
	if rec.Dynamodb.NewImage == nil {
		return fail("no NEW_IMAGE: the table's stream must be NEW_IMAGE or NEW_AND_OLD_IMAGES")
	}
	item := store.ItemFromStreamImage(rec.Dynamodb.NewImage)
	if isEvent {
		e, err := store.EnvelopeFromItem(item)
		if err == nil {
			out, err = t.Event(e)
		}
		if err != nil {
			return fail(err.Error())
		}
		return out, true, nil
	}
	o, err := store.OutboundFromItem(item)
	if err == nil {
		out, err = t.Outbound(o)
	}
	if err != nil {
		return fail(err.Error())
	}
	return out, true, nil
}

// Event returns the message the relay publishes for the stored event e
// (as read from the store, not yet upcast): e brought to its current
// schema version by Upcasters, as bus.EventMessage, on
// Topics.Events(aggregate type). Translate uses it for EVENT# items; an
// in-process relay (package testkit/pipeline) for the events of
// eventstore/memstore's change feed.
func (t Translator) Event(e eventstore.Envelope) (Outgoing, error) {
	if t.Upcasters != nil {
		var err error
		if e, err = t.Upcasters.Upcast(e); err != nil {
			return Outgoing{}, err
		}
	}
	msg, err := bus.EventMessage(e)
	if err != nil {
		return Outgoing{}, err
	}
	return Outgoing{Topic: t.Topics.Events(e.AggregateType), Message: msg}, nil
}

// Outbound returns the message the relay publishes for the outbound
// record o: bus.OutboundMessage on Topics.Outbound(o.Name).
func (t Translator) Outbound(o eventstore.OutboundRecord) (Outgoing, error) {
	msg, err := bus.OutboundMessage(o)
	if err != nil {
		return Outgoing{}, err
	}
	return Outgoing{Topic: t.Topics.Outbound(o.Name), Message: msg}, nil
}

// Metadata keys of a poison message from the relay.
const (
	MetadataPoisonReason = "reason"
	MetadataShardID      = "shard_id"
	MetadataStreamSeq    = "stream_sequence_number"
)

// PoisonRecord is the payload of a poison message: the record as it came
// from the stream (images in DynamoDB JSON) and why it was refused.
type PoisonRecord struct {
	Reason         string         `json:"reason"`
	ShardID        string         `json:"shard_id"`
	SequenceNumber string         `json:"sequence_number"`
	EventName      string         `json:"event_name"`
	Keys           map[string]any `json:"keys,omitempty"`
	NewImage       map[string]any `json:"new_image,omitempty"`
}

// PoisonMessage builds the poison-topic message for a record that failed
// to translate. Its UUID is the stream record's event id, so a
// redelivered poison record is recognisable.
func PoisonMessage(shardID string, rec st.Record, reason error) *message.Message {
	p := PoisonRecord{Reason: reason.Error(), ShardID: shardID, EventName: string(rec.EventName)}
	if rec.Dynamodb != nil {
		p.SequenceNumber = deref(rec.Dynamodb.SequenceNumber)
		p.Keys = ImageJSON(rec.Dynamodb.Keys)
		p.NewImage = ImageJSON(rec.Dynamodb.NewImage)
	}
	body, _ := json.Marshal(p) // only strings, maps, slices and bools
	id := deref(rec.EventID)
	if id == "" {
		id = shardID + "/" + p.SequenceNumber
	}
	msg := message.NewMessage(id, body)
	msg.Metadata.Set(bus.MetadataPartitionKey, shardID)
	msg.Metadata.Set(MetadataPoisonReason, p.Reason)
	msg.Metadata.Set(MetadataShardID, shardID)
	msg.Metadata.Set(MetadataStreamSeq, p.SequenceNumber)
	return msg
}

// ImageJSON renders a stream image in DynamoDB's JSON form ({"S": "…"},
// {"N": "…"}, {"M": {…}}, …), the form the AWS CLI prints, so an operator
// sees exactly what was stored. Nil gives nil.
func ImageJSON(img map[string]st.AttributeValue) map[string]any {
	if img == nil {
		return nil
	}
	out := make(map[string]any, len(img))
	for k, v := range img {
		out[k] = valueJSON(v)
	}
	return out
}

func valueJSON(v st.AttributeValue) any {
	switch v := v.(type) {
	case *st.AttributeValueMemberS:
		return map[string]any{"S": v.Value}
	case *st.AttributeValueMemberN:
		return map[string]any{"N": v.Value}
	case *st.AttributeValueMemberB:
		return map[string]any{"B": base64.StdEncoding.EncodeToString(v.Value)}
	case *st.AttributeValueMemberBOOL:
		return map[string]any{"BOOL": v.Value}
	case *st.AttributeValueMemberNULL:
		return map[string]any{"NULL": v.Value}
	case *st.AttributeValueMemberSS:
		return map[string]any{"SS": v.Value}
	case *st.AttributeValueMemberNS:
		return map[string]any{"NS": v.Value}
	case *st.AttributeValueMemberBS:
		bs := make([]string, len(v.Value))
		for i, b := range v.Value {
			bs[i] = base64.StdEncoding.EncodeToString(b)
		}
		return map[string]any{"BS": bs}
	case *st.AttributeValueMemberL:
		l := make([]any, len(v.Value))
		for i, e := range v.Value {
			l[i] = valueJSON(e)
		}
		return map[string]any{"L": l}
	case *st.AttributeValueMemberM:
		return map[string]any{"M": ImageJSON(v.Value)}
	default:
		return map[string]any{"UNKNOWN": fmt.Sprintf("%T", v)}
	}
}

func keyS(img map[string]st.AttributeValue, name string) string {
	if v, ok := img[name].(*st.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
