package dynamodb

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/internal/ddbattr"
)

// TypeQuery selects the events of one type across all aggregates.
type TypeQuery struct {
	EventType string
	// From and To bound the events' ULID time (when the store prepared
	// them) to [From, To); either may be zero for no bound.
	From, To time.Time
	// Limit is the page size; 0 means Config.PageSize. At most 1000.
	Limit int
	// Cursor continues from a previous Page.Next; empty starts at the
	// beginning.
	Cursor string
	// After, an event id, starts the listing after that event: only
	// events with a greater id are listed (a resumable reader's
	// checkpoint). Empty: no bound.
	After string
}

// Page is one page of ListByType.
type Page struct {
	// Events in ULID order, upcast.
	Events []eventstore.Envelope
	// Next is the opaque cursor of the following page, empty at the end.
	// A page may be empty with an empty Next (the end was exactly at the
	// previous page's boundary).
	Next string
}

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
	if err := eventstore.ValidateName("event_type", q.EventType); err != nil {
		return Page{}, wrap(err)
	}
	if q.Limit == 0 {
		q.Limit = s.cfg.PageSize
	}
	if q.Limit < 0 || q.Limit > 1000 {
		return Page{}, wrap(&eventstore.ValidationError{Field: "limit", Reason: fmt.Sprintf("is %d, want 1–1000", q.Limit)})
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		return Page{}, wrap(&eventstore.ValidationError{Field: "to", Reason: "is not after from"})
	}
	lo, hi := gsiSKPrefix+minULID, gsiSKPrefix+maxULID
	if !q.From.IsZero() {
		lo = gsiSKPrefix + ulidBound(q.From, 0x00)
	}
	if !q.To.IsZero() {
		hi = gsiSKPrefix + ulidBound(q.To.Add(-time.Millisecond), 0xFF)
	}
	if q.After != "" {
		id, err := ulid.ParseStrict(q.After)
		if err != nil {
			return Page{}, wrap(&eventstore.ValidationError{Field: "after", Reason: fmt.Sprintf("%q is not an event id", q.After)})
		}
		// Event ids are ULIDs of one length: every id greater than
		// After is also greater than After followed by the smallest
		// ULID digit, which BETWEEN includes and After is below.
		if after := gsiSKPrefix + id.String() + "0"; after > lo {
			lo = after
		}
		if lo > hi {
			return Page{}, nil
		}
	}
	pk := TypeKey(q.EventType)
	in := &dynamodb.QueryInput{
		TableName:              aws.String(s.cfg.Table),
		IndexName:              aws.String(IndexByType),
		KeyConditionExpression: aws.String("gsi1pk = :pk AND gsi1sk BETWEEN :lo AND :hi"),
		ExpressionAttributeValues: item{
			":pk": ddbattr.S(pk), ":lo": ddbattr.S(lo), ":hi": ddbattr.S(hi),
		},
		Limit: aws.Int32(int32(q.Limit)),
	}
	if q.Cursor != "" {
		c, err := decodeCursor(q.Cursor)
		if err != nil || c.GPK != pk {
			return Page{}, wrap(&eventstore.ValidationError{Field: "cursor", Reason: "is not a cursor of this event type's listing"})
		}
		in.ExclusiveStartKey = item{AttrPK: ddbattr.S(c.PK), AttrSK: ddbattr.S(c.SK), AttrGSI1PK: ddbattr.S(c.GPK), AttrGSI1SK: ddbattr.S(c.GSK)}
	}
	out, err := s.cfg.Client.Query(ctx, in)
	if err != nil {
		return Page{}, wrap(err)
	}
	page := Page{Events: make([]eventstore.Envelope, 0, len(out.Items))}
	for _, it := range out.Items {
		e, err := s.decodeEvent(it)
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

// ulidBound is the smallest (fill 0x00) or largest (fill 0xFF) ULID of t's
// millisecond.
func ulidBound(t time.Time, fill byte) string {
	var u ulid.ULID
	if t.Before(time.UnixMilli(0)) {
		t = time.UnixMilli(0)
	}
	if err := u.SetTime(ulid.Timestamp(t)); err != nil {
		return maxULID
	}
	e := make([]byte, 10)
	for i := range e {
		e[i] = fill
	}
	_ = u.SetEntropy(e)
	return u.String()
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
