package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/internal/ddbattr"
)

// Scanner is the part of *dynamodb.Client that AggregateIDs needs beyond
// API; the store's Config.Client must implement it for AggregateIDs.
type Scanner interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// ErrScanUnsupported is returned by AggregateIDs when the store's client
// cannot Scan.
var ErrScanUnsupported = errors.New("the store's DynamoDB client cannot Scan")

// AggregateIDs returns, sorted, the ids above after ("" for all) of every
// aggregate of aggregateType: the #METADATA items of that type. It scans
// the whole table (reading every item once, eventually consistent), so it
// is for operator tools such as `eventpipe recalculate --all`, not for a
// request path; an aggregate created during the scan may be left out.
func (s *Store) AggregateIDs(ctx context.Context, aggregateType, after string) ([]string, error) {
	wrap := func(err error) error { return fmt.Errorf("aggregates of %s: %w", aggregateType, err) }
	if err := eventstore.ValidateName("aggregate_type", aggregateType); err != nil {
		return nil, wrap(err)
	}
	scanner, ok := s.cfg.Client.(Scanner)
	if !ok {
		return nil, wrap(ErrScanUnsupported)
	}
	in := &dynamodb.ScanInput{
		TableName:                 aws.String(s.cfg.Table),
		FilterExpression:          aws.String("#sk = :meta AND #t = :t"),
		ProjectionExpression:      aws.String("#id"),
		ExpressionAttributeNames:  map[string]string{"#sk": AttrSK, "#t": AttrAggregateType, "#id": AttrAggregateID},
		ExpressionAttributeValues: item{":meta": ddbattr.S(SKMetadata), ":t": ddbattr.S(aggregateType)},
	}
	var ids []string
	for p := dynamodb.NewScanPaginator(scanner, in); p.HasMorePages(); {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, wrap(err)
		}
		for _, it := range out.Items {
			if id := getOptS(it, AttrAggregateID); id != "" && id > after {
				ids = append(ids, id)
			}
		}
	}
	sort.Strings(ids)
	return ids, nil
}
