package aggregator

import (
	"context"
	"errors"
	"fmt"

	"github.com/eventpipe/eventpipe/internal/pause"

	"golang.org/x/sync/errgroup"

	"github.com/eventpipe/eventpipe/rollup"
)

// BatchOutcome counts what one batch did.
type BatchOutcome struct {
	Applied       int // events counted
	Duplicates    int // copies of events already counted (recent ids)
	Redelivered   int // contributions at or below an item's watermark
	BucketWrites  int // aggregation items written
	SessionWrites int // session items written
	Conflicts     int // conditional writes that had to read again
}

// applyBatch folds the deliveries of one partition (ascending offsets,
// lastOffset the batch's last) into the source's sessions and
// aggregations:
//
//  1. read the sessions the batch touches and fold each session's
//     deliveries into it (recognising copies by their recent ids),
//     which gives every delivery's contributions tagged with its offset;
//  2. read each touched bucket's watermark for this partition, keep the
//     contributions above it, add them up and write each bucket once,
//     conditional on the watermark read;
//  3. only then write the sessions, conditional on their version.
//
// A crash anywhere leaves a state the same batch, delivered again from
// the committed offset and cut anywhere, completes without counting
// anything twice: a bucket already written skips by its watermark, a
// session already written skips by its recent ids, and as sessions are
// written last, a session not yet written folds the same way again.
func (c *Consumer) applyBatch(ctx context.Context, source string, partition int32, deliveries []delivery, lastOffset int64) (BatchOutcome, error) {
	var out BatchOutcome
	bySession := map[string][]delivery{}
	var ids []string
	for _, d := range deliveries {
		id := d.event.SessionID
		if _, ok := bySession[id]; !ok {
			ids = append(ids, id)
		}
		bySession[id] = append(bySession[id], d)
	}
	sessions, err := c.table.readSessions(ctx, source, ids)
	if err != nil {
		return out, err
	}
	var contribs []contribution
	var changed []string
	for _, id := range ids {
		s := sessions[id]
		n := 0
		for _, d := range bySession[id] {
			cs, dup := s.apply(source, d, c.cfg.RecentEvents)
			if dup {
				out.Duplicates++
				continue
			}
			n++
			contribs = append(contribs, cs...)
		}
		out.Applied += n
		if n > 0 {
			changed = append(changed, id)
		}
	}
	written, redelivered, conflicts, err := c.writeBuckets(ctx, partition, contribs, lastOffset)
	out.BucketWrites, out.Redelivered, out.Conflicts = written, redelivered, conflicts
	if err != nil {
		return out, err
	}
	n, conflicts, err := c.writeSessions(ctx, source, changed, sessions, bySession)
	out.SessionWrites, out.Conflicts = n, out.Conflicts+conflicts
	return out, err
}

// writeBuckets writes every bucket the contributions touch, once each.
func (c *Consumer) writeBuckets(ctx context.Context, partition int32, contribs []contribution, lastOffset int64) (written, redelivered, conflicts int, err error) {
	byBucket := map[rollup.Bucket][]contribution{}
	var buckets []rollup.Bucket
	for _, ct := range contribs {
		if _, ok := byBucket[ct.bucket]; !ok {
			buckets = append(buckets, ct.bucket)
		}
		byBucket[ct.bucket] = append(byBucket[ct.bucket], ct)
	}
	if len(buckets) == 0 {
		return 0, 0, 0, nil
	}
	states, err := c.table.readBuckets(ctx, partition, buckets)
	if err != nil {
		return 0, 0, 0, err
	}
	type result struct{ written, redelivered, conflicts int }
	results := make([]result, len(buckets))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.cfg.WriteConcurrency)
	for i, b := range buckets {
		g.Go(func() error {
			st := states[b]
			for attempt := 1; ; attempt++ {
				release, err := c.acquire(gctx)
				if err != nil {
					return err
				}
				w, skipped, err := c.writeBucket(gctx, partition, b, st, byBucket[b], lastOffset)
				release()
				if err == nil {
					results[i] = result{written: w, redelivered: skipped, conflicts: attempt - 1}
					return nil
				}
				if err := c.retryable(gctx, err, attempt, "aggregation "+string(b.Period)+" "+b.Name+" of "+b.Series); err != nil {
					return err
				}
				// Whether or not the write landed, the item read again
				// says what is left to add.
				if st, err = c.table.readBucket(gctx, partition, b); err != nil {
					return err
				}
			}
		})
	}
	err = g.Wait()
	for _, r := range results {
		written += r.written
		redelivered += r.redelivered
		conflicts += r.conflicts
	}
	return written, redelivered, conflicts, err
}

// writeBucket adds up the contributions above the bucket's watermark
// and writes them; written is 0 when none are left.
func (c *Consumer) writeBucket(ctx context.Context, partition int32, b rollup.Bucket, st bucketState, contribs []contribution, lastOffset int64) (written, skipped int, err error) {
	sum := rollup.New(b.Period)
	sum.Touch(b)
	kept := 0
	for _, ct := range contribs {
		if st.marked && ct.offset <= st.watermark {
			skipped++
			continue
		}
		kept++
		sum.AddTo(b, ct.measures, ct.user)
	}
	if kept == 0 {
		return 0, skipped, nil
	}
	cell := sum.Cells()[0]
	var users []byte
	if cell.Distinct != nil {
		merged, err := rollup.MergeSketches(st.users)
		if err != nil {
			return 0, skipped, err
		}
		if err := merged.Merge(cell.Distinct); err != nil {
			return 0, skipped, fmt.Errorf("merge sketch: %w", err)
		}
		if users, err = merged.MarshalBinary(); err != nil {
			return 0, skipped, fmt.Errorf("encode sketch: %w", err)
		}
	}
	if err := c.table.writeBucket(ctx, partition, b, st, cell.Measures, users, lastOffset); err != nil {
		return 0, skipped, err
	}
	return 1, skipped, nil
}

// acquire takes one of the consumer's write slots (WriteConcurrency
// across every partition), waiting while all are taken; release gives it
// back.
func (c *Consumer) acquire(ctx context.Context) (release func(), err error) {
	if c.writeSlots == nil {
		return func() {}, nil
	}
	select {
	case c.writeSlots <- struct{}{}:
		return func() { <-c.writeSlots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// retryable returns nil when a failed conditional write of what may be
// tried again: a conflict (another writer changed the item) or any other
// failure (the write may or may not have landed: the caller reads the
// item again, and its condition makes the retry skip what landed), at
// most ConflictRetries times, after a back-off for a failure.
func (c *Consumer) retryable(ctx context.Context, err error, attempt int, what string) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if attempt >= c.cfg.ConflictRetries {
		return fmt.Errorf("%s: %d attempts: %w", what, attempt, err)
	}
	if errors.Is(err, errConflict) {
		return nil
	}
	c.log.Warn("write failed; reading the item again and retrying it", "item", what, "attempt", attempt, "err", err)
	return pause.Sleep(ctx, backoff(attempt))
}

// writeSessions writes the changed sessions; one that another writer
// changed meanwhile is read again and its deliveries folded into it
// again (its contributions are already in the buckets).
func (c *Consumer) writeSessions(ctx context.Context, source string, ids []string, sessions map[string]*session, bySession map[string][]delivery) (written, conflicts int, err error) {
	counts := make([]int, len(ids))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.cfg.WriteConcurrency)
	for i, id := range ids {
		g.Go(func() error {
			s := sessions[id]
			for attempt := 1; ; attempt++ {
				release, err := c.acquire(gctx)
				if err != nil {
					return err
				}
				err = c.table.putSession(gctx, source, id, s)
				release()
				if err == nil {
					return nil
				}
				counts[i]++
				if err := c.retryable(gctx, err, attempt, "session "+source+"/"+id); err != nil {
					return err
				}
				if s, err = c.table.readSession(gctx, source, id); err != nil {
					return err
				}
				n := 0
				for _, d := range bySession[id] {
					if _, dup := s.apply(source, d, c.cfg.RecentEvents); !dup {
						n++
					}
				}
				if n == 0 {
					return nil
				}
			}
		})
	}
	err = g.Wait()
	for _, n := range counts {
		conflicts += n
	}
	return len(ids), conflicts, err
}
