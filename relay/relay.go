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
	for _, sh := range shards {
		if r.known[sh.ShardID] {
			continue
		}
		if err := r.leases.Ensure(ctx, r.stream, sh.ShardID, sh.ParentShardID); err != nil {
			return err
		}
		r.known[sh.ShardID] = true
	}
	leases, err := r.leases.List(ctx, r.stream)
	if err != nil {
		return err
	}
	now := time.Now()
	byID := map[string]Lease{}
	for _, l := range leases {
		byID[l.ShardID] = l
		if o, ok := r.observed[l.ShardID]; !ok || o.counter != l.Counter || o.owner != l.Owner {
			r.observed[l.ShardID] = observation{owner: l.Owner, counter: l.Counter, at: now}
		}
	}
	expired := func(l Lease) bool {
		return l.Owner == "" || l.Owner == r.cfg.WorkerID || now.Sub(r.observed[l.ShardID].at) >= r.cfg.LeaseDuration
	}
	readable := Readable(leases)
	load := map[string]int{r.cfg.WorkerID: 0}
	var free []Lease
	for _, id := range readable {
		l := byID[id]
		if r.running[id] != nil {
			continue
		}
		if expired(l) {
			free = append(free, l)
		} else {
			load[l.Owner]++
		}
	}
	load[r.cfg.WorkerID] = len(r.running)
	target := (len(readable) + len(load) - 1) / len(load)
	for _, l := range free {
		if len(r.running) >= target {
			break
		}
		r.take(ctx, l, l.Owner != "" && l.Owner != r.cfg.WorkerID)
	}
	if len(r.running) < target {
		// Nothing free: steal one lease from the busiest worker if it
		// holds more than its share (it stops at its next lease write).
		victim, most := "", target
		for owner, n := range load {
			if owner != r.cfg.WorkerID && n > most {
				victim, most = owner, n
			}
		}
		if victim != "" {
			for _, id := range readable {
				if l := byID[id]; l.Owner == victim && r.running[id] == nil {
					r.take(ctx, l, true)
					break
				}
			}
		}
	}
	return nil
}

func (r *Relay) take(ctx context.Context, l Lease, takeover bool) {
	taken, err := r.leases.Take(ctx, l, r.cfg.WorkerID)
	if err != nil {
		if !errors.Is(err, ErrLeaseLost) {
			r.log.WarnContext(ctx, "take lease failed", "shard", l.ShardID, "err", err)
		}
		return
	}
	if takeover {
		r.metrics.takeovers.Inc()
	}
	r.log.InfoContext(ctx, "lease taken", "shard", l.ShardID, "previous_owner", l.Owner, "checkpoint", l.Checkpoint)
	rd := &reader{relay: r, stream: taken.StreamARN, shard: taken.ShardID, lease: taken}
	r.running[l.ShardID] = rd
	r.metrics.held.Set(float64(len(r.running)))
	go func() {
		err := rd.run(ctx)
		r.done <- readerExit{shard: l.ShardID, err: err}
	}()
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
