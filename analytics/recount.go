package analytics

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// SourceEvents returns every raw event of a source that the table still
// holds (those created within Config.EventTTL), across all Config.Shards
// shards, in ULID order. Each shard is read with strongly consistent
// queries, at most Config.QueryConcurrency at a time, so an event whose
// ingestion returned before the call began is in the result. It reads the
// source's whole raw history: it is for recounting sessions and
// aggregations (aggregator.Recount), not for dashboards.
func (s *Store) SourceEvents(ctx context.Context, sourceID string) ([]Event, error) {
	wrap := func(err error) error { return fmt.Errorf("events of source %s: %w", sourceID, err) }
	if err := validSource(sourceID); err != nil {
		return nil, wrap(err)
	}
	events, err := s.shardEvents(ctx, sourceID, func(in *dynamodb.QueryInput) { in.ConsistentRead = aws.Bool(true) })
	if err != nil {
		return nil, wrap(err)
	}
	return events, nil
}

// EventTTL is how long the store keeps a raw event after its createdAt
// (Config.EventTTL): raw events older than that may be gone.
func (s *Store) EventTTL() time.Duration { return s.cfg.EventTTL }
