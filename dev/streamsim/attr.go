package streamsim

import (
	"encoding/base64"
	"fmt"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// encodeAttrMap encodes an attribute map in DynamoDB's JSON form, keys
// sorted; nil encodes to nil (the field is left out).
func encodeAttrMap(m map[string]types.AttributeValue) ([]byte, error) {
	if m == nil {
		return nil, nil
	}
	return appendAttrMap(nil, m)
}

func appendAttrMap(b []byte, m map[string]types.AttributeValue) ([]byte, error) {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	b = append(b, '{')
	for i, k := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		var err error
		if b, err = appendAttr(b, m[k]); err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
	}
	return append(b, '}'), nil
}

// appendAttr appends one AttributeValue as {"<type>":<value>}.
func appendAttr(b []byte, v types.AttributeValue) ([]byte, error) {
	var err error
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		b = appendString(append(b, `{"S":`...), v.Value)
	case *types.AttributeValueMemberN:
		b = appendString(append(b, `{"N":`...), v.Value)
	case *types.AttributeValueMemberB:
		b = appendBlob(append(b, `{"B":`...), v.Value)
	case *types.AttributeValueMemberBOOL:
		b = strconv.AppendBool(append(b, `{"BOOL":`...), v.Value)
	case *types.AttributeValueMemberNULL:
		b = strconv.AppendBool(append(b, `{"NULL":`...), v.Value)
	case *types.AttributeValueMemberM:
		if b, err = appendAttrMap(append(b, `{"M":`...), v.Value); err != nil {
			return nil, err
		}
	case *types.AttributeValueMemberL:
		b = append(b, `{"L":[`...)
		for i, e := range v.Value {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendAttr(b, e); err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
		}
		b = append(b, ']')
	case *types.AttributeValueMemberSS:
		b = appendStrings(append(b, `{"SS":`...), v.Value)
	case *types.AttributeValueMemberNS:
		b = appendStrings(append(b, `{"NS":`...), v.Value)
	case *types.AttributeValueMemberBS:
		b = append(b, `{"BS":[`...)
		for i, e := range v.Value {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendBlob(b, e)
		}
		b = append(b, ']')
	case nil:
		return nil, fmt.Errorf("nil attribute value")
	default:
		return nil, fmt.Errorf("unsupported attribute value %T", v)
	}
	return append(b, '}'), nil
}

func appendStrings(b []byte, vs []string) []byte {
	b = append(b, '[')
	for i, s := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

func appendBlob(b []byte, v []byte) []byte {
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, v)
	return append(b, '"')
}

// appendString appends s as a JSON string; invalid UTF-8 becomes U+FFFD.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// encodeRecord encodes a stream record with its pre-encoded images as
// GetRecords answers it.
func encodeRecord(r *types.Record, keys, newImg, oldImg []byte) []byte {
	d := r.Dynamodb
	b := make([]byte, 0, 256+len(keys)+len(newImg)+len(oldImg))
	b = appendString(append(b, `{"awsRegion":`...), aws.ToString(r.AwsRegion))
	b = strconv.AppendInt(append(b, `,"dynamodb":{"ApproximateCreationDateTime":`...), d.ApproximateCreationDateTime.Unix(), 10)
	if keys != nil {
		b = append(append(b, `,"Keys":`...), keys...)
	}
	if newImg != nil {
		b = append(append(b, `,"NewImage":`...), newImg...)
	}
	if oldImg != nil {
		b = append(append(b, `,"OldImage":`...), oldImg...)
	}
	b = appendString(append(b, `,"SequenceNumber":`...), aws.ToString(d.SequenceNumber))
	b = strconv.AppendInt(append(b, `,"SizeBytes":`...), aws.ToInt64(d.SizeBytes), 10)
	b = appendString(append(b, `,"StreamViewType":`...), string(d.StreamViewType))
	b = appendString(append(b, `},"eventID":`...), aws.ToString(r.EventID))
	b = appendString(append(b, `,"eventName":`...), string(r.EventName))
	b = appendString(append(b, `,"eventSource":`...), aws.ToString(r.EventSource))
	b = appendString(append(b, `,"eventVersion":`...), aws.ToString(r.EventVersion))
	return append(b, '}')
}
