package analytics

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"golang.org/x/sync/errgroup"
)

// SourceEvents returns every raw event of a source that the table still
// holds (those created within Config.EventTTL), across all Config.Shards
// shards, in ULID order. Each shard is read with strongly consistent
// queries, at most Config.QueryConcurrency at a time, so an event whose
// ingestion returned before the call began is in the result. It reads the
// source's whole raw history: it is for rebuilding sessions and
// aggregations (aggregator.Recount), not for dashboards.
func (s *Store) SourceEvents(ctx context.Context, sourceID string) ([]Event, error) {
	wrap := func(err error) error { return fmt.Errorf("events of source %s: %w", sourceID, err) }
	if err := validSource(sourceID); err != nil {
		return nil, wrap(err)
	}
	shards := make([][]item, s.cfg.Shards)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.cfg.QueryConcurrency)
	for shard := range shards {
		g.Go(func() error {
			r := keyRange{hashAttr: AttrPK, hash: EventKey(sourceID, shard, "").PK, rangeAttr: AttrSK, prefix: SKEventPrefix}
			in := r.query(s.cfg.Table)
			in.ConsistentRead = aws.Bool(true)
			items, err := s.queryAll(gctx, in)
			if err != nil {
				return fmt.Errorf("shard %d: %w", shard, err)
			}
			shards[shard] = items
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, wrap(err)
	}
	events, err := decodeAll(slices.Concat(shards...), decodeEvent)
	if err != nil {
		return nil, wrap(err)
	}
	slices.SortFunc(events, func(a, b Event) int { return strings.Compare(a.EventID, b.EventID) })
	return events, nil
}

// EventTTL is how long the store keeps a raw event after its createdAt
// (Config.EventTTL): raw events older than that may be gone.
func (s *Store) EventTTL() time.Duration { return s.cfg.EventTTL }
