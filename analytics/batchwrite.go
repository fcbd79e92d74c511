package analytics

import (
	"context"
	"fmt"
	"time"

	"github.com/eventpipe/eventpipe/internal/pause"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// batchSize is the most items one BatchWriteItem call may carry.
const batchSize = 25

// writeItems writes items in calls of batchSize. On failure it returns
// the indexes (ascending) of the items not written: those still pending
// in the failed call and all of the later calls.
func (s *Store) writeItems(ctx context.Context, items []item) ([]int, error) {
	for start := 0; start < len(items); start += batchSize {
		end := min(start+batchSize, len(items))
		left, err := s.writeBatch(ctx, items[start:end])
		if err == nil {
			continue
		}
		var unwritten []int
		for i := start; i < end; i++ {
			if left[skOf(items[i])] {
				unwritten = append(unwritten, i)
			}
		}
		for i := end; i < len(items); i++ {
			unwritten = append(unwritten, i)
		}
		return unwritten, err
	}
	return nil, nil
}

// writeBatch writes up to batchSize items, sending DynamoDB's unprocessed
// items again after a backoff until none are left, Config.WriteAttempts
// calls were made or ctx ends. On failure it returns the sort keys of the
// items not written.
func (s *Store) writeBatch(ctx context.Context, items []item) (map[string]bool, error) {
	reqs := make([]types.WriteRequest, len(items))
	for i, it := range items {
		reqs[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: it}}
	}
	for attempt := 1; ; attempt++ {
		out, err := s.cfg.Client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
			RequestItems: map[string][]types.WriteRequest{s.cfg.Table: reqs},
		})
		if err != nil {
			return pendingKeys(reqs), fmt.Errorf("batch write: %w", err)
		}
		if reqs = out.UnprocessedItems[s.cfg.Table]; len(reqs) == 0 {
			return nil, nil
		}
		if attempt == s.cfg.WriteAttempts {
			return pendingKeys(reqs), fmt.Errorf("batch write: %d items still unprocessed after %d attempts", len(reqs), attempt)
		}
		wait := s.backoff(attempt)
		s.cfg.Logger.DebugContext(ctx, "retrying unprocessed items", "table", s.cfg.Table, "items", len(reqs), "attempt", attempt, "backoff", wait)
		if err := pause.Sleep(ctx, wait); err != nil {
			return pendingKeys(reqs), fmt.Errorf("batch write: backing off with %d items unprocessed: %w", len(reqs), err)
		}
	}
}

func pendingKeys(reqs []types.WriteRequest) map[string]bool {
	keys := make(map[string]bool, len(reqs))
	for _, r := range reqs {
		if r.PutRequest != nil {
			keys[skOf(r.PutRequest.Item)] = true
		}
	}
	return keys
}

// skOf is an item's sort key, "" when it has none.
func skOf(it item) string {
	if sk, ok := it[AttrSK].(*types.AttributeValueMemberS); ok {
		return sk.Value
	}
	return ""
}

// backoff is the wait after the attempt-th call: BackoffBase doubled per
// earlier attempt, capped at BackoffMax, with its upper half random.
func (s *Store) backoff(attempt int) time.Duration {
	d := pause.Backoff(attempt, s.cfg.BackoffBase, s.cfg.BackoffMax)
	half := d / 2
	return d - half + time.Duration(s.cfg.Rand(int(half)+1))
}
