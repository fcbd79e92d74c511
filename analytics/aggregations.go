package analytics

import (
	"context"
	"fmt"
	"time"
)

// MaxBuckets bounds the buckets AggregationsBetween may span.
const MaxBuckets = 10_000

// Aggregations lists a source's aggregations of period, newest bucket
// first (AP6), paged as RecentSessions.
func (s *Store) Aggregations(ctx context.Context, sourceID string, period Period, limit int, cursor string) ([]Aggregation, string, error) {
	what := fmt.Sprintf("%s aggregations of %s", period, sourceID)
	if err := validAggregationRef(sourceID, period); err != nil {
		return nil, "", fmt.Errorf("%s: %w", what, err)
	}
	r := keyRange{hashAttr: AttrPK, hash: SourceKey(sourceID), rangeAttr: AttrSK, prefix: aggregationPrefix(period), descending: true}
	return listPage(ctx, s, r, limit, cursor, decodeAggregation, what)
}

// AggregationsBetween returns a source's aggregations of period from the
// bucket holding from to the bucket holding to, both included, oldest
// first (AP7). Buckets without an item are left out. from after to, or a
// range of more than MaxBuckets buckets, is a *eventstore.ValidationError.
func (s *Store) AggregationsBetween(ctx context.Context, sourceID string, period Period, from, to time.Time) ([]Aggregation, error) {
	wrap := func(err error) error {
		return fmt.Errorf("%s aggregations of %s from %s to %s: %w", period, sourceID, period.Bucket(from), period.Bucket(to), err)
	}
	if err := validAggregationRef(sourceID, period); err != nil {
		return nil, wrap(err)
	}
	if from.After(to) {
		return nil, wrap(invalid("to", "is before from"))
	}
	length := period.Length()
	if n := to.UTC().Truncate(length).Sub(from.UTC().Truncate(length))/length + 1; n > MaxBuckets {
		return nil, wrap(invalid("to", "the range spans %d %s buckets, at most %d", n, period, MaxBuckets))
	}
	r := keyRange{hashAttr: AttrPK, hash: SourceKey(sourceID), rangeAttr: AttrSK, prefix: aggregationPrefix(period), lo: period.Bucket(from), hi: period.Bucket(to)}
	items, err := s.queryAll(ctx, r.query(s.cfg.Table))
	if err != nil {
		return nil, wrap(err)
	}
	aggs, err := decodeAll(items, decodeAggregation)
	if err != nil {
		return nil, wrap(err)
	}
	return aggs, nil
}

func validAggregationRef(sourceID string, period Period) error {
	if err := validSource(sourceID); err != nil {
		return err
	}
	if !period.Valid() {
		return invalid("period", "%q must be hourly or daily", period)
	}
	return nil
}
