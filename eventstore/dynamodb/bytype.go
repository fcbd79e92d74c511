package dynamodb

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/internal/ddbattr"
)

// TypeQuery selects the events of one type across all aggregates (an
// alias: the type lives in package eventstore, shared by every store).
type TypeQuery = eventstore.TypeQuery

// Page is one page of ListByType (an alias of eventstore.Page).
type Page = eventstore.Page

var _ eventstore.TypeReader = (*Store)(nil)

// cursor is what an opaque Page.Next holds: DynamoDB's LastEvaluatedKey on GSI1.
type cursor struct {
	PK  string `json:"p"`
	SK  string `json:"s"`
	GPK string `json:"gp"`
	GSK string `json:"gs"`
}

// ListByType returns one page of the events of q.EventType across all
// aggregates, in ULID order, from gsi1. The index is eventually
// consistent: an event appended a moment ago may not be listed yet. A
// malformed cursor, or one from a query of another type, is a
// *eventstore.ValidationError on "cursor".
func (s *Store) ListByType(ctx context.Context, q TypeQuery) (Page, error) {
	wrap := func(err error) error { return fmt.Errorf("list %s: %w", q.EventType, err) }
	q, ids, err := q.Normalize(s.cfg.PageSize)
	if err != nil {
		return Page{}, wrap(err)
	}
	pk := TypeKey(q.EventType)
	var start item
	if q.Cursor != "" {
		c, err := decodeCursor(q.Cursor)
		if err != nil || c.GPK != pk {
			return Page{}, wrap(&eventstore.ValidationError{Field: "cursor", Reason: "is not a cursor of this event type's listing"})
		}
		start = item{AttrPK: ddbattr.S(c.PK), AttrSK: ddbattr.S(c.SK), AttrGSI1PK: ddbattr.S(c.GPK), AttrGSI1SK: ddbattr.S(c.GSK)}
	}
	if ids.Empty() {
		return Page{}, nil
	}
	lo, hi := gsiSKPrefix+ids.Lo, gsiSKPrefix+ids.Hi
	in := &dynamodb.QueryInput{
		TableName:              aws.String(s.cfg.Table),
		IndexName:              aws.String(IndexByType),
		KeyConditionExpression: aws.String("gsi1pk = :pk AND gsi1sk BETWEEN :lo AND :hi"),
		ExpressionAttributeValues: item{
			":pk": ddbattr.S(pk), ":lo": ddbattr.S(lo), ":hi": ddbattr.S(hi),
		},
		Limit:             aws.Int32(int32(q.Limit)),
		ExclusiveStartKey: start,
	}
	out, err := s.cfg.Client.Query(ctx, in)
	if err != nil {
		return Page{}, wrap(err)
	}
	page := Page{Events: make([]eventstore.Envelope, 0, len(out.Items))}
	for _, it := range out.Items {
		e, err := s.decodeEvent(ctx, it)
		if err != nil {
			return Page{}, wrap(err)
		}
		page.Events = append(page.Events, e)
	}
	if k := out.LastEvaluatedKey; len(k) > 0 {
		c := cursor{PK: getOptS(k, AttrPK), SK: getOptS(k, AttrSK), GPK: getOptS(k, AttrGSI1PK), GSK: getOptS(k, AttrGSI1SK)}
		b, err := json.Marshal(c)
		if err != nil {
			return Page{}, wrap(err)
		}
		page.Next = base64.RawURLEncoding.EncodeToString(b)
	}
	return page, nil
}

func decodeCursor(s string) (cursor, error) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, err
	}
	if c.PK == "" || c.SK == "" || c.GPK == "" || c.GSK == "" {
		return c, fmt.Errorf("incomplete cursor")
	}
	return c, nil
}

// CountByType counts the stored events of eventType (GSI1, paged
// COUNT queries, no items transferred); replays use it as their total.
func (s *Store) CountByType(ctx context.Context, eventType string) (int, error) {
	if err := eventstore.ValidateName("event_type", eventType); err != nil {
		return 0, fmt.Errorf("count %s: %w", eventType, err)
	}
	p := dynamodb.NewQueryPaginator(s.cfg.Client, &dynamodb.QueryInput{
		TableName:                 aws.String(s.cfg.Table),
		IndexName:                 aws.String(IndexByType),
		KeyConditionExpression:    aws.String("gsi1pk = :pk"),
		ExpressionAttributeValues: item{":pk": ddbattr.S(TypeKey(eventType))},
		Select:                    types.SelectCount,
	})
	n := 0
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return n, fmt.Errorf("count %s: %w", eventType, err)
		}
		n += int(out.Count)
	}
	return n, nil
}
