package analytics

import (
	"container/heap"
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"
	"golang.org/x/sync/errgroup"
)

// SourceEvents returns every raw event of a source that the table still
// holds (those created within Config.EventTTL), across all Config.Shards
// shards, in ULID order. Each shard is read with strongly consistent
// queries, at most Config.QueryConcurrency at a time, so an event whose
// ingestion returned before the call began is in the result. It reads the
// source's whole raw history and holds it in memory: EachSourceEvent reads
// a range of it a page at a time.
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

// EachSourceEvent calls fn with every raw event of a source whose id's
// time is in [from, to) (an event's id carries its createdAt unless the
// client gave both), in id order across all Config.Shards shards, and
// stops at fn's first error, returning it. Each shard is read by key
// range (its items outside [from, to) are not read) with strongly
// consistent queries of Config.PageSize items, the first pages at most
// Config.QueryConcurrency at a time: memory holds one page per shard,
// however many events the range has. An event whose ingestion returned
// before the call began is passed to fn if it is in the range. For
// recounting (aggregator.Recount).
func (s *Store) EachSourceEvent(ctx context.Context, sourceID string, from, to time.Time, fn func(Event) error) error {
	wrap := func(err error) error {
		return fmt.Errorf("events of source %s from %s to %s: %w", sourceID, formatTime(from), formatTime(to), err)
	}
	if err := validSource(sourceID); err != nil {
		return wrap(err)
	}
	if from.Before(time.UnixMilli(0)) {
		from = time.UnixMilli(0)
	}
	if !from.Before(to) {
		return nil
	}
	lo, hi := ulid.ULID{}, ulid.ULID{}
	if err := lo.SetTime(ulid.Timestamp(from)); err != nil {
		return wrap(err)
	}
	if err := hi.SetTime(ulid.Timestamp(to) - 1); err != nil {
		return wrap(err)
	}
	_ = hi.SetEntropy([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	cursors := make(shardCursors, s.cfg.Shards)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.cfg.QueryConcurrency)
	for shard := range cursors {
		r := keyRange{hashAttr: AttrPK, hash: EventKey(sourceID, shard, "").PK, rangeAttr: AttrSK, prefix: SKEventPrefix, lo: lo.String(), hi: hi.String()}
		c := &shardCursor{in: r.query(s.cfg.Table)}
		c.in.ConsistentRead, c.in.Limit = aws.Bool(true), aws.Int32(int32(s.cfg.PageSize))
		cursors[shard] = c
		g.Go(func() error { return s.nextPage(gctx, c) })
	}
	if err := g.Wait(); err != nil {
		return wrap(err)
	}
	h := cursors[:0]
	for _, c := range cursors {
		if len(c.page) > 0 {
			h = append(h, c)
		}
	}
	heap.Init(&h)
	for h.Len() > 0 {
		c := h[0]
		e, err := decodeEvent(c.page[0])
		if err != nil {
			return wrap(err)
		}
		if err := fn(e); err != nil {
			return err
		}
		c.page = c.page[1:]
		if len(c.page) == 0 && c.in.ExclusiveStartKey != nil {
			if err := s.nextPage(ctx, c); err != nil {
				return wrap(err)
			}
		}
		if len(c.page) == 0 {
			heap.Pop(&h)
		} else {
			heap.Fix(&h, 0)
		}
	}
	return nil
}

// shardCursor is where EachSourceEvent is in one shard: the query, the
// rest of its current page and (in.ExclusiveStartKey) where the next
// starts, nil at the end.
type shardCursor struct {
	in   *dynamodb.QueryInput
	page []item
}

// nextPage reads c's next non-empty page, or up to the end.
func (s *Store) nextPage(ctx context.Context, c *shardCursor) error {
	for {
		out, err := s.cfg.Client.Query(ctx, c.in)
		if err != nil {
			return fmt.Errorf("query: %w", err)
		}
		c.page, c.in.ExclusiveStartKey = out.Items, out.LastEvaluatedKey
		if len(c.page) > 0 || len(out.LastEvaluatedKey) == 0 {
			if len(out.LastEvaluatedKey) == 0 {
				c.in.ExclusiveStartKey = nil
			}
			return nil
		}
	}
}

func sortKey(it item) string {
	if v, ok := it[AttrSK].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// shardCursors is a min-heap of cursors by their next event's key.
type shardCursors []*shardCursor

func (h shardCursors) Len() int { return len(h) }
func (h shardCursors) Less(i, j int) bool {
	return sortKey(h[i].page[0]) < sortKey(h[j].page[0])
}
func (h shardCursors) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *shardCursors) Push(x any)   { *h = append(*h, x.(*shardCursor)) }
func (h *shardCursors) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// EventTTL is how long the store keeps a raw event after its createdAt
// (Config.EventTTL): raw events older than that may be gone.
func (s *Store) EventTTL() time.Duration { return s.cfg.EventTTL }
