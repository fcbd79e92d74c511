// Package ddbattr builds the DynamoDB attribute values that eventpipe's
// tables share: the event store's and the analytics table's items.
package ddbattr

import (
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// S is a string attribute.
func S(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

// N is a number attribute.
func N(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// SetOpt sets the string attribute name of it only when v is not empty
// (an empty attribute costs item size and says nothing).
func SetOpt(it map[string]types.AttributeValue, name, v string) {
	if v != "" {
		it[name] = S(v)
	}
}
