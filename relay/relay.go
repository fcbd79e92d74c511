package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"golang.org/x/sync/errgroup"
)

// Relay is one worker: it lists the stream's shards, keeps a lease per
// shard in the lease table, takes free and expired leases (its share when
// several workers run), reads each held shard from its checkpoint and
// publishes the records its Translator maps them to, checkpointing after
// Kafka acknowledged them.
type Relay struct {
	cfg        Config
	leases     *Leases
	translator RecordTranslator
	metrics    *metrics
	log        *slog.Logger

	stream   string
	known    map[string]bool        // shards with a lease item ensured
	observed map[string]observation // last counter seen per shard, for expiry
	lastList time.Time              // when the previous discovery pass began listing the leases
	running  map[string]*reader
	done     chan readerExit
}

type observation struct {
	owner   string
	counter int64
	at      time.Time
}

type readerExit struct {
	shard string
	err   error
}

// New validates cfg, registers the metrics on cfg.Registerer and returns
// a worker; Run starts it. It does no I/O.
func New(cfg Config) (*Relay, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer, cfg.StreamName)
	if err != nil {
		return nil, err
	}
	return &Relay{
		cfg:        cfg,
		leases:     &Leases{Client: cfg.DynamoDB, Table: cfg.LeaseTable},
		translator: cfg.Translator,
		metrics:    m,
		log:        cfg.Logger.With("component", "relay", "stream", cfg.StreamName, "worker", cfg.WorkerID),
		known:      map[string]bool{},
		observed:   map[string]observation{},
		running:    map[string]*reader{},
		done:       make(chan readerExit, 16),
	}, nil
}

// WorkerID is the id this worker writes into the leases it holds.
func (r *Relay) WorkerID() string { return r.cfg.WorkerID }

// StreamName is Config.StreamName: what this worker relays, as its
// metrics and logs name it.
func (r *Relay) StreamName() string { return r.cfg.StreamName }

// StreamARN returns the latest stream of table, the stream a relay
// without Config.StreamARN reads. A table that does not exist or has no
// enabled stream is an error that says to run `eventpipe migrate`.
func StreamARN(ctx context.Context, db TableAPI, table string) (string, error) {
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var missing *types.ResourceNotFoundException
	if errors.As(err, &missing) {
		return "", fmt.Errorf("relay: table %s does not exist (run `eventpipe migrate`): %w", table, err)
	}
	if err != nil {
		return "", fmt.Errorf("relay: describe table %s: %w", table, err)
	}
	arn := aws.ToString(out.Table.LatestStreamArn)
	if arn == "" || out.Table.StreamSpecification == nil || !aws.ToBool(out.Table.StreamSpecification.StreamEnabled) {
		return "", fmt.Errorf("relay: table %s has no enabled stream (run `eventpipe migrate`)", table)
	}
	return arn, nil
}

// Run relays until ctx ends, then stops its readers, checkpoints what
// they published and releases its leases so another worker can take
// them at once. It returns nil after a clean stop, or the error that
// stopped it (e.g. a *TrimmedError).
func (r *Relay) Run(ctx context.Context) error {
	if r.stream = r.cfg.StreamARN; r.stream == "" {
		arn, err := StreamARN(ctx, r.cfg.DynamoDB, r.cfg.EventsTable)
		if err != nil {
			return err
		}
		r.stream = arn
	}
	r.log.InfoContext(ctx, "relay started", "stream_arn", r.stream, "lease_table", r.cfg.LeaseTable, "lease_duration", r.cfg.LeaseDuration)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	err := r.loop(runCtx)
	cancel()
	for len(r.running) > 0 {
		r.reaped(<-r.done)
	}
	r.metrics.held.Set(0)
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	r.log.Info("relay stopped")
	return nil
}

func (r *Relay) loop(ctx context.Context) error {
	tick := time.NewTicker(r.cfg.DiscoveryInterval)
	defer tick.Stop()
	for {
		if err := r.balance(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.log.WarnContext(ctx, "shard discovery failed; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case exit := <-r.done:
			if err := r.reaped(exit); err != nil {
				return err
			}
		case <-tick.C:
		}
	}
}

// reaped forgets a finished reader and returns its error if it must stop
// the worker.
func (r *Relay) reaped(exit readerExit) error {
	delete(r.running, exit.shard)
	r.metrics.held.Set(float64(len(r.running)))
	r.metrics.lag.DeleteLabelValues(exit.shard)
	var trimmed *TrimmedError
	switch {
	case exit.err == nil, errors.Is(exit.err, context.Canceled):
		return nil
	case errors.Is(exit.err, ErrLeaseLost):
		r.log.Warn("lease lost; another worker has the shard", "shard", exit.shard, "err", exit.err)
		return nil
	case errors.As(exit.err, &trimmed):
		r.log.Error(trimmed.Error(), "shard", exit.shard, "checkpoint", trimmed.Checkpoint)
		return exit.err
	default:
		r.log.Error("shard reader failed; the lease will be taken again", "shard", exit.shard, "err", exit.err)
		return nil
	}
}

// Shards lists every shard of the stream (DescribeStream, paginated).
func Shards(ctx context.Context, streams StreamsAPI, stream string) ([]Lease, error) {
	var out []Lease
	var start *string
	for {
		desc, err := streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(stream), ExclusiveStartShardId: start})
		if err != nil {
			return nil, fmt.Errorf("relay: describe stream %s: %w", stream, err)
		}
		for _, sh := range desc.StreamDescription.Shards {
			out = append(out, Lease{StreamARN: stream, ShardID: aws.ToString(sh.ShardId), ParentShardID: aws.ToString(sh.ParentShardId)})
		}
		start = desc.StreamDescription.LastEvaluatedShardId
		if start == nil {
			return out, nil
		}
	}
}

// balance discovers shards, makes sure each has a lease, and takes this
// worker's share of the readable ones.
func (r *Relay) balance(ctx context.Context) error {
	shards, err := Shards(ctx, r.cfg.Streams, r.stream)
	if err != nil {
		return err
	}
	// New shards' lease items, written concurrently: a stream of
	// hundreds of shards would otherwise cost its first pass hundreds of
	// round trips in a row. Each item written counts even when others
	// fail (the next pass retries those): a shard without one is only
	// left out of this pass.
	var fresh []Lease
	for _, sh := range shards {
		if !r.known[sh.ShardID] {
			fresh = append(fresh, sh)
		}
	}
	ensured := make([]error, len(fresh))
	var g errgroup.Group
	g.SetLimit(leaseWriters)
	for i, sh := range fresh {
		g.Go(func() error {
			ensured[i] = r.leases.Ensure(ctx, r.stream, sh.ShardID, sh.ParentShardID)
			return nil
		})
	}
	_ = g.Wait()
	var failed []error
	for i, sh := range fresh {
		if ensured[i] == nil {
			r.known[sh.ShardID] = true
		} else {
			failed = append(failed, ensured[i])
		}
	}
	if len(failed) > 0 {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.log.WarnContext(ctx, "lease items of new shards not written; retrying next pass", "failed", len(failed), "of", len(fresh), "err", failed[0])
	}
	listed := time.Now()
	leases, err := r.leases.List(ctx, r.stream)
	if err != nil {
		return err
	}
	// A lease whose counter moved since the previous listing was written
	// after that listing began: dating the write to then (not to now)
	// makes a dead worker's lease expire within LeaseDuration +
	// DiscoveryInterval (+ a pass's own time) of its last write. It may
	// date a write up to one interval and one pass early, which renewals
	// at most half a LeaseDuration apart absorb.
	now := time.Now()
	seenAt := r.lastList
	if seenAt.IsZero() {
		seenAt = now
	}
	r.lastList = listed
	byID := map[string]Lease{}
	for _, l := range leases {
		byID[l.ShardID] = l
		if o, ok := r.observed[l.ShardID]; !ok || o.counter != l.Counter || o.owner != l.Owner {
			r.observed[l.ShardID] = observation{owner: l.Owner, counter: l.Counter, at: seenAt}
		}
	}
	expired := func(l Lease) bool {
		return l.Owner == "" || l.Owner == r.cfg.WorkerID || now.Sub(r.observed[l.ShardID].at) >= r.cfg.LeaseDuration
	}
	readable := Readable(leases)
	// A worker with an expired lease is taken for dead: its other
	// leases expire over the next renewal period, and counting it in the
	// fair share until the last one does would keep the live workers
	// from taking the expired ones meanwhile.
	dead := map[string]bool{}
	for _, id := range readable {
		if l := byID[id]; r.running[id] == nil && l.Owner != "" && l.Owner != r.cfg.WorkerID && expired(l) {
			dead[l.Owner] = true
		}
	}
	load := map[string]int{r.cfg.WorkerID: 0}
	var free []Lease
	for _, id := range readable {
		l := byID[id]
		if r.running[id] != nil {
			continue
		}
		switch {
		case expired(l):
			free = append(free, l)
		case !dead[l.Owner]:
			load[l.Owner]++
		}
	}
	load[r.cfg.WorkerID] = len(r.running)
	target := (len(readable) + len(load) - 1) / len(load)
	r.take(ctx, free[:min(len(free), max(0, target-len(r.running)))])
	if len(r.running) < target {
		r.steal(ctx, readable, byID, load, target)
	}
	return nil
}

// steal takes leases held by workers above the fair share target until
// this worker holds its share: a new worker catches up in one discovery
// pass instead of one lease per pass. Each victim gives at most what it
// holds above target, the busiest first; it notices at its next lease
// write (ErrLeaseLost) and stops reading the shard. Two workers stealing
// the same lease are kept apart by the lease's conditional write.
func (r *Relay) steal(ctx context.Context, readable []string, byID map[string]Lease, load map[string]int, target int) {
	type victim struct {
		owner string
		over  int
	}
	var victims []victim
	for owner, n := range load {
		if owner != r.cfg.WorkerID && n > target {
			victims = append(victims, victim{owner, n - target})
		}
	}
	sort.Slice(victims, func(i, j int) bool {
		if victims[i].over != victims[j].over {
			return victims[i].over > victims[j].over
		}
		return victims[i].owner < victims[j].owner
	})
	want := target - len(r.running)
	var steal []Lease
	for _, v := range victims {
		for _, id := range readable {
			if len(steal) >= want || v.over == 0 {
				break
			}
			if l := byID[id]; l.Owner == v.owner && r.running[id] == nil {
				steal = append(steal, l)
				v.over--
			}
		}
	}
	r.take(ctx, steal)
}

// leaseWriters bounds the lease writes one discovery pass makes at once.
const leaseWriters = 8

// take takes the leases ls (free, expired or stolen) concurrently and
// starts a reader on each one taken; a lease another worker took first
// is left to it.
func (r *Relay) take(ctx context.Context, ls []Lease) {
	taken := make([]*Lease, len(ls))
	var g errgroup.Group
	g.SetLimit(leaseWriters)
	for i, l := range ls {
		g.Go(func() error {
			t, err := r.leases.Take(ctx, l, r.cfg.WorkerID)
			switch {
			case err == nil:
				taken[i] = &t
			case !errors.Is(err, ErrLeaseLost):
				r.log.WarnContext(ctx, "take lease failed", "shard", l.ShardID, "err", err)
			}
			return nil
		})
	}
	_ = g.Wait()
	for i, l := range ls {
		if taken[i] == nil {
			continue
		}
		if l.Owner != "" && l.Owner != r.cfg.WorkerID {
			r.metrics.takeovers.Inc()
		}
		r.log.InfoContext(ctx, "lease taken", "shard", l.ShardID, "previous_owner", l.Owner, "checkpoint", l.Checkpoint)
		rd := &reader{relay: r, stream: taken[i].StreamARN, shard: taken[i].ShardID, lease: *taken[i]}
		r.running[l.ShardID] = rd
		go func() {
			err := rd.run(ctx)
			r.done <- readerExit{shard: l.ShardID, err: err}
		}()
	}
	r.metrics.held.Set(float64(len(r.running)))
}

// Status returns the stream's leases sorted by shard id, for operators
// (`eventpipe relay --status`).
func Status(ctx context.Context, leases *Leases, stream string) ([]Lease, error) {
	out, err := leases.List(ctx, stream)
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ShardID < out[j].ShardID })
	return out, nil
}
