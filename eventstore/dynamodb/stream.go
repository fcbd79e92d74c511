package dynamodb

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/eventpipe/eventpipe/eventstore"
)

// ItemFromStreamImage converts a DynamoDB Streams image (a record's
// NewImage) into the item types EnvelopeFromItem and OutboundFromItem
// read. Unknown attribute kinds are dropped.
func ItemFromStreamImage(img map[string]streamtypes.AttributeValue) map[string]types.AttributeValue {
	out := make(map[string]types.AttributeValue, len(img))
	for k, v := range img {
		if c := fromStream(v); c != nil {
			out[k] = c
		}
	}
	return out
}

func fromStream(v streamtypes.AttributeValue) types.AttributeValue {
	switch v := v.(type) {
	case *streamtypes.AttributeValueMemberS:
		return &types.AttributeValueMemberS{Value: v.Value}
	case *streamtypes.AttributeValueMemberN:
		return &types.AttributeValueMemberN{Value: v.Value}
	case *streamtypes.AttributeValueMemberB:
		return &types.AttributeValueMemberB{Value: v.Value}
	case *streamtypes.AttributeValueMemberBOOL:
		return &types.AttributeValueMemberBOOL{Value: v.Value}
	case *streamtypes.AttributeValueMemberNULL:
		return &types.AttributeValueMemberNULL{Value: v.Value}
	case *streamtypes.AttributeValueMemberSS:
		return &types.AttributeValueMemberSS{Value: v.Value}
	case *streamtypes.AttributeValueMemberNS:
		return &types.AttributeValueMemberNS{Value: v.Value}
	case *streamtypes.AttributeValueMemberBS:
		return &types.AttributeValueMemberBS{Value: v.Value}
	case *streamtypes.AttributeValueMemberL:
		l := make([]types.AttributeValue, 0, len(v.Value))
		for _, e := range v.Value {
			if c := fromStream(e); c != nil {
				l = append(l, c)
			}
		}
		return &types.AttributeValueMemberL{Value: l}
	case *streamtypes.AttributeValueMemberM:
		return &types.AttributeValueMemberM{Value: ItemFromStreamImage(v.Value)}
	}
	return nil
}

// EventStreamImage is the NEW_IMAGE a DynamoDB stream record carries for
// the EVENT item of e, as the store writes it: what the relay's
// Translator reads. Tests and the stream simulator (dev/streamsim)
// use it to put event records on a simulated stream.
func EventStreamImage(e eventstore.Envelope) map[string]streamtypes.AttributeValue {
	return StreamImage(eventItem(e))
}

// StreamImage converts an item into a DynamoDB Streams image, the
// inverse of ItemFromStreamImage. Unknown attribute kinds are dropped.
func StreamImage(it map[string]types.AttributeValue) map[string]streamtypes.AttributeValue {
	out := make(map[string]streamtypes.AttributeValue, len(it))
	for k, v := range it {
		if c := toStream(v); c != nil {
			out[k] = c
		}
	}
	return out
}

func toStream(v types.AttributeValue) streamtypes.AttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return &streamtypes.AttributeValueMemberS{Value: v.Value}
	case *types.AttributeValueMemberN:
		return &streamtypes.AttributeValueMemberN{Value: v.Value}
	case *types.AttributeValueMemberB:
		return &streamtypes.AttributeValueMemberB{Value: v.Value}
	case *types.AttributeValueMemberBOOL:
		return &streamtypes.AttributeValueMemberBOOL{Value: v.Value}
	case *types.AttributeValueMemberNULL:
		return &streamtypes.AttributeValueMemberNULL{Value: v.Value}
	case *types.AttributeValueMemberSS:
		return &streamtypes.AttributeValueMemberSS{Value: v.Value}
	case *types.AttributeValueMemberNS:
		return &streamtypes.AttributeValueMemberNS{Value: v.Value}
	case *types.AttributeValueMemberBS:
		return &streamtypes.AttributeValueMemberBS{Value: v.Value}
	case *types.AttributeValueMemberL:
		l := make([]streamtypes.AttributeValue, 0, len(v.Value))
		for _, e := range v.Value {
			if c := toStream(e); c != nil {
				l = append(l, c)
			}
		}
		return &streamtypes.AttributeValueMemberL{Value: l}
	case *types.AttributeValueMemberM:
		return &streamtypes.AttributeValueMemberM{Value: StreamImage(v.Value)}
	}
	return nil
}
