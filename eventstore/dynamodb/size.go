package dynamodb

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDB's limits on one TransactWriteItems call.
const (
	MaxItemSize         = 400 * 1024      // bytes per item, names included
	MaxTransactionItems = 100             // items per transaction
	MaxTransactionSize  = 4 * 1024 * 1024 // bytes per transaction
)

// ItemSize computes the size DynamoDB charges an item against its 400 KB
// limit: for every attribute the UTF-8 length of its name plus the size of
// its value. Strings and binaries count their bytes; a number counts one
// byte per two significant digits plus one; booleans and nulls one byte;
// lists and maps three bytes plus one per element plus their elements
// (and, for maps, the element names); sets the sum of their members.
// DynamoDB publishes this rule as approximate for numbers; this follows
// it and errs on the large side.
func ItemSize(it map[string]types.AttributeValue) int {
	n := 0
	for name, v := range it {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	return 0
}

// numberSize is 1 + ceil(significant digits / 2): sign, decimal point,
// exponent, leading and trailing zeros do not count.
func numberSize(s string) int {
	s = strings.TrimLeft(s, "+-")
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	digits := strings.Replace(s, ".", "", 1)
	digits = strings.TrimLeft(digits, "0")
	digits = strings.TrimRight(digits, "0")
	if digits == "" {
		return 1
	}
	return 1 + (len(digits)+1)/2
}
