package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/eventpipe/eventpipe/internal/pause"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	st "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// TrimmedError says a shard's checkpoint is older than the stream's
// retention (24 hours on AWS): records after it were trimmed before the
// relay read them, so they may never have reached the bus. The relay
// stops rather than skip them silently. It is returned only when the
// reader had a position in the shard (a checkpoint, or a record it
// fetched): a shard read from TRIM_HORIZON with nothing read yet starts at
// the oldest record the stream has, cannot have lost anything, and a
// trimmed answer there is retried instead.
type TrimmedError struct {
	StreamARN, ShardID, Checkpoint, LeaseTable string
	Err                                        error
}

func (e *TrimmedError) Error() string {
	return fmt.Sprintf("relay: shard %s: checkpoint %q is past the stream's retention (records were trimmed before they were relayed; "+
		"events after it may be missing from Kafka). Recover from the event store: rebuild read models with `eventpipe replay <projection>`, "+
		"then delete the lease item (stream_arn=%s, shard_id=%s) from table %s to resume this shard from its oldest record: %v",
		e.ShardID, e.Checkpoint, e.StreamARN, e.ShardID, e.LeaseTable, e.Err)
}

func (e *TrimmedError) Unwrap() error { return e.Err }

// batch is one GetRecords result handed from the fetcher to the
// publisher.
type batch struct {
	records []st.Record
	last    string // sequence number of the last record ("" when none)
	closed  bool   // the shard has no more records
}

// reader reads one leased shard: a fetcher goroutine runs GetRecords one
// batch ahead while the publisher loop publishes the previous batch,
// waits for Kafka's acks and checkpoints it.
type reader struct {
	relay         *Relay
	stream, shard string // fixed; the fetcher reads only these
	lease         Lease  // owned by the publish loop

	// Owned by the fetcher: since when the shard, not read yet, has
	// answered "trimmed" to TRIM_HORIZON, when that was last logged as a
	// warning, and the pause before the next try.
	unreadableSince, unreadableWarned time.Time
	unreadableDelay                   time.Duration
}

func (rd *reader) run(ctx context.Context) error {
	r := rd.relay
	ctx, cancel := context.WithCancel(ctx)
	batches := make(chan batch, 1)
	fetchErr := make(chan error, 1)
	var wg sync.WaitGroup
	from := rd.lease.Checkpoint
	wg.Go(func() { fetchErr <- rd.fetch(ctx, from, batches) })
	err := rd.publishLoop(ctx, batches, fetchErr)
	cancel()
	wg.Wait()
	if errors.Is(err, context.Canceled) && !errors.Is(err, ErrLeaseLost) {
		// A clean stop: hand the lease over at once.
		stop, done := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer done()
		if rerr := r.leases.Release(stop, rd.lease); rerr != nil {
			r.log.Warn("release lease failed; it expires on its own", "shard", rd.lease.ShardID, "err", rerr)
		}
	}
	return err
}

func (rd *reader) publishLoop(ctx context.Context, batches <-chan batch, fetchErr <-chan error) error {
	r := rd.relay
	// Renew once the lease has gone renewEvery without a write, checked
	// twice per period: the longest gap between writes is 1.5 renewEvery,
	// half the lease duration.
	renewEvery := r.cfg.LeaseDuration / 3
	renew := time.NewTicker(renewEvery / 2)
	defer renew.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-fetchErr:
			return err
		case <-renew.C:
			if time.Since(rd.lease.UpdatedAt) < renewEvery {
				continue
			}
			if err := rd.renew(ctx); err != nil {
				if errors.Is(err, ErrLeaseLost) || ctx.Err() != nil {
					return err
				}
				// The write failed, not the lease (a lease table too
				// slow to answer within the write's timeout): keep
				// reading and renew again at the next tick. Should the
				// lease expire meanwhile, another worker takes it and
				// this reader's next write fails with ErrLeaseLost.
				r.log.Warn("renew lease failed; retrying", "shard", rd.lease.ShardID, "err", err)
			}
		case b := <-batches:
			if err := rd.handle(ctx, b); err != nil {
				return err
			}
			if b.closed {
				r.log.Info("shard finished", "shard", rd.lease.ShardID, "checkpoint", rd.lease.Checkpoint)
				return nil
			}
		}
	}
}

// renew renews the lease. The write finishes even when ctx ends: a
// renewal that reached DynamoDB but whose answer was dropped would leave
// rd.lease with a stale counter, and the clean stop's release would then
// fail as "lease lost".
func (rd *reader) renew(ctx context.Context) error {
	write, done := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer done()
	l, err := rd.relay.leases.Renew(write, rd.lease)
	if err != nil {
		return err
	}
	rd.lease = l
	return nil
}

// handle publishes a batch, retrying until Kafka acknowledges every
// message, then checkpoints it. The checkpoint is written even when ctx
// ends meanwhile, so a clean stop repeats nothing. A message that carries
// a stored trace context is published in a span of its own
// (startPublishSpans).
func (rd *reader) handle(ctx context.Context, b batch) error {
	r := rd.relay
	if len(b.records) > 0 {
		out := make(map[string][]Outgoing)
		var topics []string
		published, skipped, poisoned := 0, 0, 0
		for _, rec := range b.records {
			o, ok, err := r.translator.Translate(rec)
			switch {
			case err != nil:
				r.log.Error("stream record sent to the poison topic", "shard", rd.lease.ShardID, "err", err)
				o = Outgoing{Topic: r.cfg.Topics.Poison(r.cfg.PoisonGroup), Message: PoisonMessage(rd.lease.ShardID, rec, err)}
				poisoned++
			case !ok:
				skipped++
				continue
			default:
				published++
			}
			if _, seen := out[o.Topic]; !seen {
				topics = append(topics, o.Topic)
			}
			out[o.Topic] = append(out[o.Topic], o)
		}
		spans := startPublishSpans(ctx, out)
		for delay := r.cfg.IdlePoll; ; delay = min(2*delay, 5*time.Second) {
			err := rd.publish(topics, out)
			if err == nil {
				break
			}
			spans.failed(err)
			r.log.Warn("publish failed; retrying", "shard", rd.lease.ShardID, "err", err, "retry_in", delay)
			if err := pause.Sleep(ctx, delay); err != nil {
				spans.end(err)
				return err
			}
			if time.Since(rd.lease.UpdatedAt) > r.cfg.LeaseDuration/3 {
				if err := rd.renew(ctx); err != nil {
					spans.end(err)
					return err
				}
			}
		}
		spans.end(nil)
		r.metrics.records.WithLabelValues("published").Add(float64(published))
		r.metrics.records.WithLabelValues("skipped").Add(float64(skipped))
		r.metrics.records.WithLabelValues("poison").Add(float64(poisoned))
		r.metrics.batches.Inc()
		if at := b.records[len(b.records)-1].Dynamodb.ApproximateCreationDateTime; at != nil {
			r.metrics.lag.WithLabelValues(rd.lease.ShardID).Set(max(0, time.Since(*at).Seconds()))
		}
	}
	if len(b.records) == 0 && !b.closed {
		return nil
	}
	write, done := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer done()
	l, err := r.leases.Checkpoint(write, rd.lease, b.last, b.closed)
	if err != nil {
		return err
	}
	rd.lease = l
	return nil
}

// publish sends each topic's messages in one Publish call, topics in
// parallel; one aggregate's messages are all on one topic, in order.
func (rd *reader) publish(topics []string, out map[string][]Outgoing) error {
	errs := make([]error, len(topics))
	var wg sync.WaitGroup
	for i, topic := range topics {
		wg.Go(func() {
			msgs := make([]*message.Message, len(out[topic]))
			for j, o := range out[topic] {
				msgs[j] = o.Message
			}
			errs[i] = rd.relay.cfg.Publisher.Publish(topic, msgs...)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// fetch reads the shard after sequence number `after` ("" = from its
// oldest record) and hands every non-empty batch, and the final one of a
// closed shard, to out.
func (rd *reader) fetch(ctx context.Context, after string, out chan<- batch) error {
	r := rd.relay
	iter, err := rd.iterator(ctx, after)
	if err != nil {
		return err
	}
	idle := r.cfg.IdlePoll
	// The gap between the starts of two reads: 5% over the shard's read
	// limit, so that a call delayed on its way (network, scheduling)
	// does not reach the service within a second of the fifth before it.
	var gap time.Duration
	if r.cfg.ShardReadsPerSecond > 0 {
		gap = time.Second * 105 / 100 / time.Duration(r.cfg.ShardReadsPerSecond)
	}
	var last time.Time
	for {
		if wait := time.Until(last.Add(gap)); wait > 0 {
			if err := pause.Sleep(ctx, wait); err != nil {
				return err
			}
		}
		last = time.Now()
		res, err := r.cfg.Streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(r.cfg.BatchSize)})
		var expired *st.ExpiredIteratorException
		var limit *st.LimitExceededException
		var trimmed *st.TrimmedDataAccessException
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.As(err, &expired):
			if iter, err = rd.iterator(ctx, after); err != nil {
				return err
			}
			continue
		case errors.As(err, &trimmed) && after == "":
			// Nothing read yet: the iterator is stale, not the data lost.
			if err := rd.notReadableYet(ctx, err); err != nil {
				return err
			}
			if iter, err = rd.iterator(ctx, after); err != nil {
				return err
			}
			continue
		case errors.As(err, &trimmed):
			return rd.trimmed(after, err)
		case errors.As(err, &limit):
			r.log.Warn("GetRecords throttled; backing off", "shard", rd.shard, "retry_in", idle)
			if err := pause.Sleep(ctx, idle); err != nil {
				return err
			}
			idle = min(2*idle, r.cfg.MaxIdlePoll)
			continue
		default:
			r.log.Warn("GetRecords failed; retrying", "shard", rd.shard, "err", err, "retry_in", idle)
			if err := pause.Sleep(ctx, idle); err != nil {
				return err
			}
			idle = min(2*idle, r.cfg.MaxIdlePoll)
			if iter, err = rd.iterator(ctx, after); err != nil {
				return err
			}
			continue
		}
		rd.unreadableSince = time.Time{}
		b := batch{records: res.Records, closed: res.NextShardIterator == nil}
		if n := len(res.Records); n > 0 {
			b.last = aws.ToString(res.Records[n-1].Dynamodb.SequenceNumber)
			after = b.last
		}
		if len(b.records) > 0 || b.closed {
			select {
			case out <- b:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if b.closed {
			return nil
		}
		iter = res.NextShardIterator
		if len(res.Records) == 0 {
			r.metrics.lag.WithLabelValues(rd.shard).Set(0)
			if err := pause.Sleep(ctx, idle); err != nil {
				return err
			}
			idle = min(2*idle, r.cfg.MaxIdlePoll)
		} else {
			idle = r.cfg.IdlePoll
		}
	}
}

// iterator starts reading after sequence number `after`, or at the
// shard's oldest record when it is "".
func (rd *reader) iterator(ctx context.Context, after string) (*string, error) {
	r := rd.relay
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(rd.stream), ShardId: aws.String(rd.shard)}
	if after == "" {
		in.ShardIteratorType = st.ShardIteratorTypeTrimHorizon
	} else {
		in.ShardIteratorType = st.ShardIteratorTypeAfterSequenceNumber
		in.SequenceNumber = aws.String(after)
	}
	for delay := r.cfg.IdlePoll; ; delay = min(2*delay, r.cfg.MaxIdlePoll) {
		out, err := r.cfg.Streams.GetShardIterator(ctx, in)
		var trimmed *st.TrimmedDataAccessException
		var gone *st.ResourceNotFoundException
		switch {
		case err == nil:
			return out.ShardIterator, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.As(err, &trimmed) && after == "":
			if err := rd.notReadableYet(ctx, err); err != nil {
				return nil, err
			}
			continue
		case errors.As(err, &trimmed), errors.As(err, &gone):
			// A shard that is gone was trimmed whole: its unread
			// records are lost to the stream.
			return nil, rd.trimmed(after, err)
		}
		r.log.Warn("GetShardIterator failed; retrying", "shard", rd.shard, "err", err, "retry_in", delay)
		if err := pause.Sleep(ctx, delay); err != nil {
			return nil, err
		}
	}
}

// unreadableWarnEvery is how long a shard not read yet may keep answering
// "trimmed" to TRIM_HORIZON before that is logged as a warning (and then
// again at this interval); until then each retry is logged at debug level.
const unreadableWarnEvery = time.Minute

// notReadableYet handles a TrimmedDataAccessException for a shard read
// from TRIM_HORIZON before any record was read from it (no checkpoint).
// Such a start is at the oldest record the stream still has, so it can
// never be past anything and the answer is transient: on AWS the records
// at the horizon aged out between GetShardIterator and GetRecords, and a
// fresh iterator starts at the new oldest one; DynamoDB Local answers it
// for an iterator taken while the shard was empty once the shard's first
// record arrives with a sequence number beyond the shard's start (it
// numbers the writes of all tables with one counter). It logs and waits
// (ctx permitting) IdlePoll, doubling on each further such answer up to
// MaxIdlePoll, until a read succeeds; the caller then asks for a fresh
// TRIM_HORIZON iterator.
func (rd *reader) notReadableYet(ctx context.Context, err error) error {
	now := time.Now()
	cfg := rd.relay.cfg
	if rd.unreadableSince.IsZero() {
		rd.unreadableSince, rd.unreadableDelay = now, cfg.IdlePoll
	} else {
		rd.unreadableDelay = min(2*rd.unreadableDelay, cfg.MaxIdlePoll)
	}
	delay := rd.unreadableDelay
	log := rd.relay.log
	if waited := now.Sub(rd.unreadableSince); waited >= unreadableWarnEvery && now.Sub(rd.unreadableWarned) >= unreadableWarnEvery {
		rd.unreadableWarned = now
		log.Warn("shard without checkpoint still answers trimmed for TRIM_HORIZON; retrying",
			"shard", rd.shard, "waited", waited.Round(time.Second), "retry_in", delay, "err", err)
	} else {
		log.Debug("shard without checkpoint has nothing to read yet (trimmed answer for TRIM_HORIZON); retrying",
			"shard", rd.shard, "retry_in", delay, "err", err)
	}
	return pause.Sleep(ctx, delay)
}

func (rd *reader) trimmed(after string, err error) error {
	return &TrimmedError{StreamARN: rd.stream, ShardID: rd.shard, Checkpoint: after, LeaseTable: rd.relay.cfg.LeaseTable, Err: err}
}
