package analytics

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/internal/ddbattr"
)

// keyRange is what one Query reads: the items of the table (or of index)
// whose hash attribute is hash and whose range attribute starts with
// prefix, or, when hi is set, lies between prefix+lo and prefix+hi.
type keyRange struct {
	index             string
	hashAttr, hash    string
	rangeAttr, prefix string
	lo, hi            string
	descending        bool
}

func (r keyRange) query(table string) *dynamodb.QueryInput {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(table),
		KeyConditionExpression:    aws.String("#h = :h AND begins_with(#r, :p)"),
		ExpressionAttributeNames:  map[string]string{"#h": r.hashAttr, "#r": r.rangeAttr},
		ExpressionAttributeValues: item{":h": ddbattr.S(r.hash), ":p": ddbattr.S(r.prefix)},
		ScanIndexForward:          aws.Bool(!r.descending),
	}
	if r.hi != "" {
		in.KeyConditionExpression = aws.String("#h = :h AND #r BETWEEN :lo AND :hi")
		in.ExpressionAttributeValues = item{":h": ddbattr.S(r.hash), ":lo": ddbattr.S(r.prefix + r.lo), ":hi": ddbattr.S(r.prefix + r.hi)}
	}
	if r.index != "" {
		in.IndexName = aws.String(r.index)
	}
	return in
}

// page reads one page of r: at most limit items (0: Config.PageSize),
// from cursor on (empty: from the start), and the cursor of the next
// page ("" at the end).
func (s *Store) page(ctx context.Context, r keyRange, limit int, cursor string) ([]item, string, error) {
	if limit == 0 {
		limit = s.cfg.PageSize
	}
	if limit < 0 || limit > MaxPageSize {
		return nil, "", invalid("limit", "is %d, want 1–%d", limit, MaxPageSize)
	}
	in := r.query(s.cfg.Table)
	in.Limit = aws.Int32(int32(limit))
	if cursor != "" {
		start, err := r.startKey(cursor)
		if err != nil {
			return nil, "", err
		}
		in.ExclusiveStartKey = start
	}
	out, err := s.cfg.Client.Query(ctx, in)
	if err != nil {
		return nil, "", fmt.Errorf("query: %w", err)
	}
	next, err := encodeCursor(out.LastEvaluatedKey)
	return out.Items, next, err
}

// queryAll reads every page of in.
func (s *Store) queryAll(ctx context.Context, in *dynamodb.QueryInput) ([]item, error) {
	return s.queryUntil(ctx, in, func([]item) bool { return false })
}

// queryUntil reads pages of in until enough says the items read so far
// suffice, or there are no more.
func (s *Store) queryUntil(ctx context.Context, in *dynamodb.QueryInput, enough func([]item) bool) ([]item, error) {
	var items []item
	for p := dynamodb.NewQueryPaginator(s.cfg.Client, in); p.HasMorePages() && !enough(items); {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("query: %w", err)
		}
		items = append(items, out.Items...)
	}
	return items, nil
}

// decodeAll decodes items in order.
func decodeAll[T any](items []item, decode func(item) (T, error)) ([]T, error) {
	out := make([]T, 0, len(items))
	for _, it := range items {
		v, err := decode(it)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// encodeCursor is the opaque cursor of a LastEvaluatedKey: the base64url
// of its attributes (all strings) as a JSON object; "" for no key.
func encodeCursor(key item) (string, error) {
	if len(key) == 0 {
		return "", nil
	}
	m := make(map[string]string, len(key))
	for name, v := range key {
		s, ok := v.(*types.AttributeValueMemberS)
		if !ok {
			return "", fmt.Errorf("last evaluated key: attribute %s is %T, want S", name, v)
		}
		m[name] = s.Value
	}
	b, err := json.Marshal(m)
	return base64.RawURLEncoding.EncodeToString(b), err
}

// startKey decodes a cursor that a page of r returned into the
// ExclusiveStartKey it stands for. Anything else is a
// *eventstore.ValidationError on "cursor".
func (r keyRange) startKey(cursor string) (item, error) {
	bad := invalid("cursor", "is not a cursor of this listing")
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return nil, bad
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, bad
	}
	want := []string{AttrPK, AttrSK}
	if r.index != "" {
		want = append(want, r.hashAttr, r.rangeAttr)
	}
	if len(m) != len(want) || m[r.hashAttr] != r.hash || !strings.HasPrefix(m[r.rangeAttr], r.prefix) {
		return nil, bad
	}
	key := make(item, len(want))
	for _, name := range want {
		if m[name] == "" {
			return nil, bad
		}
		key[name] = ddbattr.S(m[name])
	}
	return key, nil
}
