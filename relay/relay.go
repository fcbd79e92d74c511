package relay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"sync/atomic"
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

	// For Health, written by the discovery loop, read by probes.
	lastPass, lastBalanced atomic.Int64 // unix nanoseconds
	held                   atomic.Int32
	stopping               atomic.Bool
}

// Health is what a worker's probes ask of it (Relay.Health).
type Health struct {
	// LastPass is when the last discovery pass ended, failed or not: the
	// loop turns while it is recent (within DiscoveryInterval plus the
	// pass's own time).
	LastPass time.Time
	// LastBalanced is when the last pass ended without an error: the
	// worker had listed the shards and leases and taken its share then.
	LastBalanced time.Time
	// Held is the number of shards the worker reads now; it may be zero
	// with a share taken when other workers hold every shard.
	Held int
	// Stopping says Run's context ended: the worker is handing its
	// leases back.
	Stopping bool
	// DiscoveryInterval and LeaseDuration are the worker's settings, the
	// bounds to judge the times by.
	DiscoveryInterval, LeaseDuration time.Duration
}

// Health returns the worker's state for health probes. It is safe for
// concurrent use with Run.
func (r *Relay) Health() Health {
	at := func(n int64) time.Time {
		if n == 0 {
			return time.Time{}
		}
		return time.Unix(0, n)
	}
	return Health{LastPass: at(r.lastPass.Load()), LastBalanced: at(r.lastBalanced.Load()), Held: int(r.held.Load()),
		Stopping: r.stopping.Load(), DiscoveryInterval: r.cfg.DiscoveryInterval, LeaseDuration: r.cfg.LeaseDuration}
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
	r.stopping.Store(true)
	cancel()
	for len(r.running) > 0 {
		r.reaped(<-r.done)
	}
	r.metrics.held.Set(0)
	r.held.Store(0)
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
		// Forget every reader that ended before the pass, not one per
		// pass: after a split or a steal many end at once, and a reader
		// still listed as running keeps its shard from being taken.
		for drained := false; !drained; {
			select {
			case exit := <-r.done:
				if err := r.reaped(exit); err != nil {
					return err
				}
			default:
				drained = true
			}
		}
		began := time.Now()
		err := r.balance(ctx)
		took := time.Since(began)
		r.metrics.passes.Observe(took.Seconds())
		r.lastPass.Store(time.Now().UnixNano())
		r.held.Store(int32(len(r.running)))
		if err == nil {
			r.lastBalanced.Store(time.Now().UnixNano())
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.log.WarnContext(ctx, "shard discovery failed; retrying", "err", err, "took", took)
		} else {
			r.log.DebugContext(ctx, "discovery pass", "took", took, "held", len(r.running))
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
	r.held.Store(int32(len(r.running)))
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
//
// The share is KCL's: the readable shards over the live workers (those
// holding a lease that is not expired, but for a worker with an expired
// lease: it stopped renewing), rounded up. A worker below its
// share takes free leases (no owner, or expired: nobody reads them) and
// steals the rest from workers above theirs, the busiest first, each its
// own part of what the pass moves (claims: the same for every worker
// reading the same lease table, so one pass evens the shares out). A
// lease nobody reads never waits for a worker to have room: each pass
// takes at least this worker's part of the free ones nobody claimed
// (their count over the live workers, rounded up), so a dead worker's
// leases are taken as each one expires.
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
	if len(fresh) > leaseWriters && len(r.known) == 0 {
		// A worker's first pass: most shards have a lease item already
		// (other workers, or this one before a restart); one listing
		// spares a conditional write per shard.
		existing, err := r.leases.List(ctx, r.stream)
		if err != nil {
			return err
		}
		for _, l := range existing {
			r.known[l.ShardID] = true
		}
		fresh = slices.DeleteFunc(fresh, func(sh Lease) bool { return r.known[sh.ShardID] })
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
	now := time.Now()
	r.observe(leases, listed)
	expired := func(l Lease) bool {
		return l.Owner == "" || now.Sub(r.observed[l.ShardID].at) >= r.cfg.LeaseDuration
	}
	readable := Readable(leases)
	byID := make(map[string]Lease, len(leases))
	for _, l := range leases {
		byID[l.ShardID] = l
	}
	// Loads as the lease table shows them. Of this worker's readers only
	// those whose lease it still holds count: a reader whose lease was
	// stolen stops at its next lease write, and a finished shard's reader
	// is no longer readable.
	load := map[string]int{r.cfg.WorkerID: 0}
	var mine, free []Lease // mine: held by this worker without a reader (e.g. after a reader failed)
	for _, id := range readable {
		l := byID[id]
		switch {
		case l.Owner == r.cfg.WorkerID && r.running[id] != nil:
			load[l.Owner]++
		case r.running[id] != nil:
			// Our reader's lease moved on; it stops at its next write.
			if !expired(l) {
				load[l.Owner]++
			}
		case l.Owner == r.cfg.WorkerID:
			mine = append(mine, l)
		case expired(l):
			free = append(free, l)
		default:
			load[l.Owner]++
		}
	}
	held := load[r.cfg.WorkerID] + len(mine)
	// A worker holding an expired lease has stopped renewing (dead, or
	// cut off): its unexpired leases stay its own until they expire too,
	// but it counts in no share and claims nothing (what it would claim
	// would wait for it). This worker is never stalled in its own view.
	stalled := map[string]bool{}
	for _, l := range free {
		if l.Owner != "" && l.Owner != r.cfg.WorkerID {
			stalled[l.Owner] = true
		}
	}
	live := 0
	for w := range load {
		if !stalled[w] {
			live++
		}
	}
	target := (len(readable) + live - 1) / live
	loads := maps.Clone(load)
	loads[r.cfg.WorkerID] = held // the others count this worker's leases without a reader too
	claimFree, claimStolen, leftover := claims(r.cfg.WorkerID, readable, byID, loads, free, target, stalled)
	// What no worker below its share claims of the free leases (every
	// live worker is at its share): each pass takes at least this
	// worker's part of them, picked at random so that workers rarely race
	// for one.
	rand.Shuffle(len(leftover), func(i, j int) { leftover[i], leftover[j] = leftover[j], leftover[i] })
	share := min(len(leftover), (len(leftover)+live-1)/live)
	r.take(ctx, slices.Concat(mine, claimFree, leftover[:share]))
	var steal []Lease
	for _, l := range claimStolen {
		if r.running[l.ShardID] == nil { // a reader of ours still stopping on it: next pass
			steal = append(steal, l)
		}
	}
	r.takeWith(ctx, steal, r.leases.Steal)
	return nil
}

// claims is this worker's part of the pass's moves, computed the same way
// by every worker that lists the same lease table, so that workers below
// their share neither race for the same lease nor, between them, take
// more from a worker above its share than it holds beyond it (the steals
// of a busy worker by several at once used to swing the loads back and
// forth for many passes).
//
// The pool: the free leases in shard order, then each worker's leases
// beyond target (its leases in shard order, the last ones), the workers
// holding most above target first. The claimants: the workers below
// target but those stalled, in worker-id order, each claiming what it
// lacks, in turn, from the pool. self's claim is returned split into free
// leases to take and leases to steal; leftover is the free leases nobody
// claimed.
func claims(self string, readable []string, byID map[string]Lease, loads map[string]int, free []Lease, target int, stalled map[string]bool) (claimFree, claimStolen, leftover []Lease) {
	free = slices.Clone(free)
	slices.SortFunc(free, func(a, b Lease) int { return cmp.Compare(a.ShardID, b.ShardID) })
	type victim struct {
		owner string
		over  int
	}
	var victims []victim
	for owner, n := range loads {
		if n > target {
			victims = append(victims, victim{owner, n - target})
		}
	}
	slices.SortFunc(victims, func(a, b victim) int {
		if c := cmp.Compare(b.over, a.over); c != 0 {
			return c
		}
		return cmp.Compare(a.owner, b.owner)
	})
	held := map[string][]Lease{}
	isFree := make(map[string]bool, len(free))
	for _, l := range free {
		isFree[l.ShardID] = true
	}
	for _, id := range readable { // readable is in shard order
		if l := byID[id]; !isFree[id] && l.Owner != "" {
			held[l.Owner] = append(held[l.Owner], l)
		}
	}
	pool := free
	for _, v := range victims {
		ls := held[v.owner]
		pool = append(pool, ls[max(len(ls)-v.over, 0):]...)
	}
	var claimants []string
	for w, n := range loads {
		if n < target && !stalled[w] {
			claimants = append(claimants, w)
		}
	}
	slices.Sort(claimants)
	offset := 0
	for _, w := range claimants {
		lack := min(target-loads[w], len(pool)-offset)
		if w == self {
			for _, l := range pool[offset : offset+lack] {
				if isFree[l.ShardID] {
					claimFree = append(claimFree, l)
				} else {
					claimStolen = append(claimStolen, l)
				}
			}
		}
		if offset += lack; offset == len(pool) {
			break
		}
	}
	if offset < len(free) {
		leftover = free[offset:]
	}
	return claimFree, claimStolen, leftover
}

// observe dates each lease's last write as this worker sees it, for
// expiry: a lease whose counter or owner moved since the previous listing
// (which began at r.lastList) was written between that listing and this
// one (which began at listed). Within that window the write is dated by
// the writer's own updated_at; a writer's clock running behind dates it
// to the window's start (early, as if no clock were trusted) and one
// running ahead to its end (late: a slower takeover, never an early one).
// A lease seen for the first time is dated to now. The monotonic clock
// of this worker measures the expiry, never another host's wall clock
// alone: a dead worker's lease expires LeaseDuration after its last
// write, give or take its clock's skew, however long a pass takes.
func (r *Relay) observe(leases []Lease, listed time.Time) {
	from := r.lastList
	r.lastList = listed
	for _, l := range leases {
		o, ok := r.observed[l.ShardID]
		if ok && o.counter == l.Counter && o.owner == l.Owner {
			continue
		}
		at := listed
		if ok && !from.IsZero() {
			at = from.Add(min(max(l.UpdatedAt.Sub(from), 0), listed.Sub(from)))
		}
		r.observed[l.ShardID] = observation{owner: l.Owner, counter: l.Counter, at: at}
	}
}

// leaseWriters bounds the lease writes one discovery pass makes at once.
const leaseWriters = 8

// take takes the leases ls (free, expired or stolen) concurrently and
// starts a reader on each one taken; a lease another worker took first
// is left to it.
func (r *Relay) take(ctx context.Context, ls []Lease) {
	r.takeWith(ctx, ls, r.leases.Take)
}

// takeWith is take with the write that takes each lease: Leases.Take
// (free, expired or this worker's own) or Leases.Steal.
func (r *Relay) takeWith(ctx context.Context, ls []Lease, write func(context.Context, Lease, string) (Lease, error)) {
	taken := make([]*Lease, len(ls))
	var g errgroup.Group
	g.SetLimit(leaseWriters)
	for i, l := range ls {
		g.Go(func() error {
			t, err := write(ctx, l, r.cfg.WorkerID)
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
	r.held.Store(int32(len(r.running)))
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
