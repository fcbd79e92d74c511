package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/internal/ddbattr"
)

var _ eventstore.AggregateLister = (*Store)(nil)

// ListAggregates returns one page of the ids of q.Type's aggregates above
// q.After, sorted: a Query of gsi1 for gsi1pk AggregateTypeKey(q.Type)
// (every #METADATA item carries it, with its id as gsi1sk), reading only
// the type's #METADATA items, q.Limit (default Config.PageSize) at a
// time. The index is eventually consistent: an aggregate created a
// moment ago may be missing. An aggregate last appended to before the
// index keys existed is missing until its next append or IndexAggregates.
func (s *Store) ListAggregates(ctx context.Context, q eventstore.AggregateQuery) (eventstore.AggregatePage, error) {
	wrap := func(err error) error { return fmt.Errorf("aggregates of %s: %w", q.Type, err) }
	if err := q.Validate(); err != nil {
		return eventstore.AggregatePage{}, wrap(err)
	}
	if q.Limit == 0 {
		q.Limit = s.cfg.PageSize
	}
	cond, vals := "gsi1pk = :pk", item{":pk": ddbattr.S(AggregateTypeKey(q.Type))}
	if q.After != "" {
		cond += " AND gsi1sk > :after"
		vals[":after"] = ddbattr.S(q.After)
	}
	var page eventstore.AggregatePage
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.cfg.Table),
		IndexName:                 aws.String(IndexByType),
		KeyConditionExpression:    aws.String(cond),
		ExpressionAttributeValues: vals,
		ProjectionExpression:      aws.String(AttrGSI1SK),
	}
	// DynamoDB may return fewer items than asked (1 MB a page): fill the
	// page up to the limit.
	for len(page.IDs) < q.Limit {
		in.Limit = aws.Int32(int32(q.Limit - len(page.IDs)))
		out, err := s.cfg.Client.Query(ctx, in)
		if err != nil {
			return eventstore.AggregatePage{}, wrap(err)
		}
		for _, it := range out.Items {
			page.IDs = append(page.IDs, getOptS(it, AttrGSI1SK))
		}
		page.More = len(out.LastEvaluatedKey) > 0
		if !page.More {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	return page, nil
}

// Scanner is the part of *dynamodb.Client that IndexAggregates needs
// beyond API; the store's Config.Client must implement it for
// IndexAggregates.
type Scanner interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// ErrScanUnsupported is returned by IndexAggregates when the store's
// client cannot Scan and UpdateItem.
var ErrScanUnsupported = errors.New("the store's DynamoDB client cannot Scan and UpdateItem")

// The item recording that IndexAggregates ran to the end; its partition
// is no aggregate's (theirs start with AGGREGATE#), and the relay passes
// it by (it forwards EVENT# and OUTBOUND# items only).
const (
	indexMarkerPK = "EVENTPIPE#INDEX"
	indexMarkerSK = "AGGREGATE_TYPE"
	attrIndexedAt = "indexedAt"
	attrIndexed   = "indexed"
)

// IndexResult is what IndexAggregates did.
type IndexResult struct {
	// Scanned counts the table's items read; Indexed the #METADATA items
	// given their index keys.
	Scanned, Indexed int64
}

// IndexAggregates gives every #METADATA item without them its gsi1 keys,
// so that ListAggregates lists the aggregates last appended to before
// the keys existed (every append writes them since), then records that
// it ran (AggregatesIndexed). It scans the whole table once, a page at a
// time (memory bounded by a page), and updates each item missing the
// keys, conditional on it still missing them; run it once every process
// appending to the table writes the keys (an older writer creating an
// aggregate afterwards leaves it out until its next append or another
// run). Safe to run again, and beside live appends. progress, when set,
// is called after each page of the scan.
func (s *Store) IndexAggregates(ctx context.Context, progress func(IndexResult)) (IndexResult, error) {
	var res IndexResult
	wrap := func(err error) error { return fmt.Errorf("index aggregates: %w", err) }
	client, ok := s.cfg.Client.(Scanner)
	if !ok {
		return res, wrap(ErrScanUnsupported)
	}
	in := &dynamodb.ScanInput{
		TableName:                 aws.String(s.cfg.Table),
		FilterExpression:          aws.String("#sk = :meta AND attribute_not_exists(#gpk)"),
		ProjectionExpression:      aws.String("#pk, #sk, #t, #id"),
		ExpressionAttributeNames:  map[string]string{"#pk": AttrPK, "#sk": AttrSK, "#t": AttrAggregateType, "#id": AttrAggregateID, "#gpk": AttrGSI1PK},
		ExpressionAttributeValues: item{":meta": ddbattr.S(SKMetadata)},
	}
	for p := dynamodb.NewScanPaginator(client, in); p.HasMorePages(); {
		out, err := p.NextPage(ctx)
		if err != nil {
			return res, wrap(err)
		}
		res.Scanned += int64(out.ScannedCount)
		for _, it := range out.Items {
			typ, id := getOptS(it, AttrAggregateType), getOptS(it, AttrAggregateID)
			if typ == "" || id == "" {
				continue // not written by Append: nothing to index it by
			}
			_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName:                 aws.String(s.cfg.Table),
				Key:                       item{AttrPK: it[AttrPK], AttrSK: it[AttrSK]},
				UpdateExpression:          aws.String("SET #gpk = :gpk, #gsk = :id"),
				ConditionExpression:       aws.String("attribute_exists(#pk) AND attribute_not_exists(#gpk)"),
				ExpressionAttributeNames:  map[string]string{"#pk": AttrPK, "#gpk": AttrGSI1PK, "#gsk": AttrGSI1SK},
				ExpressionAttributeValues: item{":gpk": ddbattr.S(AggregateTypeKey(typ)), ":id": ddbattr.S(id)},
			})
			var ccf *types.ConditionalCheckFailedException
			switch {
			case errors.As(err, &ccf): // an append wrote them meanwhile
			case err != nil:
				return res, wrap(err)
			default:
				res.Indexed++
			}
		}
		if progress != nil {
			progress(res)
		}
	}
	_, err := s.cfg.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.cfg.Table),
		Item: item{AttrPK: ddbattr.S(indexMarkerPK), AttrSK: ddbattr.S(indexMarkerSK),
			attrIndexedAt: ddbattr.S(formatTime(time.Now())), attrIndexed: ddbattr.N(res.Indexed)},
	})
	if err != nil {
		return res, wrap(fmt.Errorf("record the index as done: %w", err))
	}
	return res, nil
}

// AggregatesIndexed reports whether IndexAggregates ran to the end on
// this table, and when.
func (s *Store) AggregatesIndexed(ctx context.Context) (bool, time.Time, error) {
	out, err := s.cfg.Client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.cfg.Table),
		Key:            item{AttrPK: ddbattr.S(indexMarkerPK), AttrSK: ddbattr.S(indexMarkerSK)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return false, time.Time{}, fmt.Errorf("aggregates indexed: %w", err)
	}
	if len(out.Item) == 0 {
		return false, time.Time{}, nil
	}
	at, _ := time.Parse(time.RFC3339Nano, getOptS(out.Item, attrIndexedAt))
	return true, at, nil
}
