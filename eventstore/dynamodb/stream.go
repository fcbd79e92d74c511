package dynamodb

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
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
