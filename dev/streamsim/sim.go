package streamsim

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// Record is what Put appends: one change of one item. The attribute
// values are github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types
// values, the types a dynamodbstreams.Client decodes records into and
// the relay translates (values of the dynamodb types package must be
// converted first, e.g. with the SDK's attributevalue feature packages).
// Put takes ownership of the maps: do not change them afterwards.
type Record struct {
	// EventName is INSERT, MODIFY or REMOVE (default: INSERT when there
	// is no OldImage, REMOVE when there is no NewImage, else MODIFY).
	EventName types.OperationType
	// Keys are the item's key attributes (default: the KeySchema's
	// attributes taken from NewImage, or OldImage).
	Keys map[string]types.AttributeValue
	// NewImage and OldImage are the item after and before the change;
	// Put drops those the stream's view type excludes.
	NewImage, OldImage map[string]types.AttributeValue
}

// Stored is a record as the simulator holds and serves it.
type Stored struct {
	// ShardID is the shard the record was put in.
	ShardID string
	// PartitionKey is the key Put was called with.
	PartitionKey string
	// Record is the record exactly as GetRecords returns it (sequence
	// number, creation time truncated to seconds, event id, ...).
	Record types.Record
}

// SequenceNumber is the record's sequence number.
func (s Stored) SequenceNumber() string { return aws.ToString(s.Record.Dynamodb.SequenceNumber) }

// ShardRecords is one shard of Truth.
type ShardRecords struct {
	ShardID, ParentShardID string
	// Closed is whether the shard was split.
	Closed bool
	// Trimmed is whether the shard is past the retention and no longer
	// listed by DescribeStream.
	Trimmed bool
	// Records are every record put in the shard, in order, including
	// trimmed ones.
	Records []Stored
}

// Stats are the simulator's counters since Start.
type Stats struct {
	// Calls counts calls per operation name (e.g. "GetRecords"),
	// including throttled and failed ones.
	Calls map[string]int64
	// Throttled counts GetRecords calls answered LimitExceededException.
	Throttled int64
	// RecordsServed counts records returned by GetRecords.
	RecordsServed int64
	// RecordsPut counts records Put.
	RecordsPut int64
	// Splits counts shard splits.
	Splits int64
	// OpenShards and ListedShards count the open shards and the shards
	// DescribeStream lists now.
	OpenShards, ListedShards int
}

// hashRange is an inclusive range of the 64-bit partition key hash.
type hashRange struct{ lo, hi uint64 }

type shard struct {
	id, parent string
	ordinal    uint64
	rng        hashRange
	created    time.Time
	closed     bool
	closedAt   time.Time
	endSeq     uint64
	startSeq   uint64 // first sequence number the shard may hold
	records    []*stored
	seqs       []uint64 // sequence numbers of records, for search
	reads      []time.Time
}

// stored is a record and its pre-encoded wire form.
type stored struct {
	Stored
	seq  uint64
	at   time.Time
	wire []byte
}

// Sim is a simulated DynamoDB Stream and the http.Handler serving it.
// Its methods are safe for concurrent use.
type Sim struct {
	cfg Config

	mu      sync.Mutex
	shards  []*shard          // creation order: parents before children
	byID    map[string]*shard // every shard ever created
	open    []*shard          // open shards sorted by hash range
	nextSeq uint64
	nextOrd uint64
	closed  bool

	calls                            sync.Map // op -> *atomic.Int64
	throttled, served, put, splitCnt atomic.Int64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	srv    *http.Server
	url    string
}

// seqBase makes every sequence number 21 decimal digits long, so string
// and numeric order agree.
const seqBase = uint64(1)

// New returns a simulator that serves through ServeHTTP; Start also
// listens for it.
func New(cfg Config) (*Sim, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sim{cfg: cfg, byID: map[string]*shard{}, ctx: ctx, cancel: cancel}
	now := cfg.Clock()
	step := math.MaxUint64 / uint64(cfg.Shards)
	for i := 0; i < cfg.Shards; i++ {
		r := hashRange{lo: uint64(i) * step, hi: uint64(i+1)*step - 1}
		if i == cfg.Shards-1 {
			r.hi = math.MaxUint64
		}
		s.newShard("", r, now)
	}
	return s, nil
}

// Start returns a simulator listening on 127.0.0.1 at a free port; URL
// is its endpoint. Close stops it.
func Start(cfg Config) (*Sim, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("streamsim: listen: %w", err)
	}
	s.url = "http://" + ln.Addr().String()
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.wg.Go(func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.cfg.Logger.Error("streamsim: serve", "err", err)
		}
	})
	return s, nil
}

// URL is the endpoint a client's BaseEndpoint is set to ("" when the
// simulator was made by New rather than Start).
func (s *Sim) URL() string { return s.url }

// StreamARN is the simulated stream's ARN.
func (s *Sim) StreamARN() string { return s.cfg.StreamARN }

// Config returns the configuration with its defaults set.
func (s *Sim) Config() Config { return s.cfg }

// Close stops the server, its connections and every SplitEvery, and
// waits for them. It is idempotent.
func (s *Sim) Close() error {
	s.mu.Lock()
	already := s.closed
	s.closed = true
	s.mu.Unlock()
	if already {
		return nil
	}
	s.cancel()
	var err error
	if s.srv != nil {
		err = s.srv.Close()
	}
	s.wg.Wait()
	if err != nil {
		return fmt.Errorf("streamsim: close: %w", err)
	}
	return nil
}

// newShard creates a shard; s.mu is held (or s is not shared yet).
func (s *Sim) newShard(parent string, r hashRange, now time.Time) *shard {
	s.nextOrd++
	sum := sha256.Sum256([]byte(s.cfg.StreamARN + "/" + strconv.FormatUint(s.nextOrd, 10)))
	sh := &shard{
		id:       fmt.Sprintf("shardId-%020d-%s", s.nextOrd, hex.EncodeToString(sum[:4])),
		parent:   parent,
		ordinal:  s.nextOrd,
		rng:      r,
		created:  now,
		startSeq: s.nextSeq + 1,
	}
	s.shards = append(s.shards, sh)
	s.byID[sh.id] = sh
	s.open = append(s.open, sh)
	sort.Slice(s.open, func(i, j int) bool { return s.open[i].rng.lo < s.open[j].rng.lo })
	return sh
}

func formatSeq(n uint64) string { return fmt.Sprintf("%d%020d", seqBase, n) }

// parseSeq parses a sequence number formatSeq made.
func parseSeq(v string) (uint64, bool) {
	if len(v) != 21 || v[0] != '1' {
		return 0, false
	}
	n, err := strconv.ParseUint(v[1:], 10, 64)
	return n, err == nil
}

// hashKey places a partition key in the 64-bit hash space: the top 64
// bits of its MD5, as Kinesis and DynamoDB hash keys (MD5 spreads short,
// similar keys evenly; it is no security measure here).
func hashKey(pk string) uint64 {
	sum := md5.Sum([]byte(pk))
	return binary.BigEndian.Uint64(sum[:8])
}

// openFor returns the open shard whose range holds h; s.mu is held.
func (s *Sim) openFor(h uint64) *shard {
	i := sort.Search(len(s.open), func(i int) bool { return s.open[i].rng.hi >= h })
	return s.open[i]
}

// Put appends rec for partitionKey to the open shard that covers the
// key's hash and returns it as stored.
func (s *Sim) Put(partitionKey string, rec Record) (Stored, error) {
	if err := s.prepare(&rec); err != nil {
		return Stored{}, err
	}
	keys, err := encodeAttrMap(rec.Keys)
	if err != nil {
		return Stored{}, fmt.Errorf("streamsim: put: Keys: %w", err)
	}
	newImg, err := encodeAttrMap(rec.NewImage)
	if err != nil {
		return Stored{}, fmt.Errorf("streamsim: put: NewImage: %w", err)
	}
	oldImg, err := encodeAttrMap(rec.OldImage)
	if err != nil {
		return Stored{}, fmt.Errorf("streamsim: put: OldImage: %w", err)
	}
	size := int64(len(keys) + len(newImg) + len(oldImg))
	h := hashKey(partitionKey)

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Stored{}, errors.New("streamsim: put: simulator closed")
	}
	now := s.cfg.Clock()
	at := time.Unix(now.Unix(), 0).UTC()
	sh := s.openFor(h)
	s.nextSeq++
	seq := s.nextSeq
	st := &stored{seq: seq, at: at}
	st.ShardID = sh.id
	st.PartitionKey = partitionKey
	st.Record = s.record(seq, at, size, rec)
	st.wire = encodeRecord(&st.Record, keys, newImg, oldImg)
	sh.records = append(sh.records, st)
	sh.seqs = append(sh.seqs, seq)
	s.mu.Unlock()
	s.put.Add(1)
	return st.Stored, nil
}

// prepare fills rec's defaults and applies the view type.
func (s *Sim) prepare(rec *Record) error {
	switch s.cfg.StreamViewType {
	case types.StreamViewTypeKeysOnly:
		if rec.Keys == nil {
			rec.Keys = s.keysOf(rec)
		}
		rec.NewImage, rec.OldImage = nil, nil
	case types.StreamViewTypeNewImage:
		if rec.Keys == nil {
			rec.Keys = s.keysOf(rec)
		}
		rec.OldImage = nil
	case types.StreamViewTypeOldImage:
		if rec.Keys == nil {
			rec.Keys = s.keysOf(rec)
		}
		rec.NewImage = nil
	default:
		if rec.Keys == nil {
			rec.Keys = s.keysOf(rec)
		}
	}
	if rec.EventName == "" {
		switch {
		case rec.OldImage == nil:
			rec.EventName = types.OperationTypeInsert
		case rec.NewImage == nil:
			rec.EventName = types.OperationTypeRemove
		default:
			rec.EventName = types.OperationTypeModify
		}
	}
	switch rec.EventName {
	case types.OperationTypeInsert, types.OperationTypeModify, types.OperationTypeRemove:
	default:
		return fmt.Errorf("streamsim: put: EventName %q is not INSERT, MODIFY or REMOVE", rec.EventName)
	}
	if len(rec.Keys) == 0 {
		return errors.New("streamsim: put: the record has no Keys and no image holding the KeySchema's attributes")
	}
	return nil
}

func (s *Sim) keysOf(rec *Record) map[string]types.AttributeValue {
	img := rec.NewImage
	if img == nil {
		img = rec.OldImage
	}
	if img == nil {
		return nil
	}
	keys := map[string]types.AttributeValue{}
	for _, k := range s.cfg.KeySchema {
		if v, ok := img[aws.ToString(k.AttributeName)]; ok {
			keys[aws.ToString(k.AttributeName)] = v
		}
	}
	return keys
}

func (s *Sim) record(seq uint64, at time.Time, size int64, rec Record) types.Record {
	id := sha256.Sum256([]byte(s.cfg.StreamARN + "#" + strconv.FormatUint(seq, 10)))
	return types.Record{
		AwsRegion:    aws.String(s.cfg.Region),
		EventID:      aws.String(hex.EncodeToString(id[:16])),
		EventName:    rec.EventName,
		EventSource:  aws.String("aws:dynamodb"),
		EventVersion: aws.String("1.1"),
		Dynamodb: &types.StreamRecord{
			ApproximateCreationDateTime: aws.Time(at),
			Keys:                        rec.Keys,
			NewImage:                    rec.NewImage,
			OldImage:                    rec.OldImage,
			SequenceNumber:              aws.String(formatSeq(seq)),
			SizeBytes:                   aws.Int64(size),
			StreamViewType:              s.cfg.StreamViewType,
		},
	}
}

// Split closes the open shard id (its EndingSequenceNumber is the last
// sequence number assigned so far) and opens two children, each with
// ParentShardId id, covering the lower and upper half of its hash range.
func (s *Sim) Split(id string) (left, right string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.byID[id]
	switch {
	case s.closed:
		return "", "", errors.New("streamsim: split: simulator closed")
	case sh == nil:
		return "", "", fmt.Errorf("streamsim: split: no shard %s", id)
	}
	return s.split(sh)
}

// SplitOldest splits the open shard created first and returns it and
// its children.
func (s *Sim) SplitOldest() (parent, left, right string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", "", "", errors.New("streamsim: split: simulator closed")
	}
	oldest := s.open[0]
	for _, sh := range s.open {
		if sh.ordinal < oldest.ordinal {
			oldest = sh
		}
	}
	left, right, err = s.split(oldest)
	return oldest.id, left, right, err
}

// split splits sh; s.mu is held.
func (s *Sim) split(sh *shard) (left, right string, err error) {
	if sh.closed {
		return "", "", fmt.Errorf("streamsim: split: shard %s is closed", sh.id)
	}
	if sh.rng.hi == sh.rng.lo {
		return "", "", fmt.Errorf("streamsim: split: shard %s covers a single hash", sh.id)
	}
	now := s.cfg.Clock()
	sh.closed, sh.closedAt, sh.endSeq = true, now, s.nextSeq
	for i, o := range s.open {
		if o == sh {
			s.open = append(s.open[:i], s.open[i+1:]...)
			break
		}
	}
	mid := sh.rng.lo + (sh.rng.hi-sh.rng.lo)/2
	l := s.newShard(sh.id, hashRange{sh.rng.lo, mid}, now)
	r := s.newShard(sh.id, hashRange{mid + 1, sh.rng.hi}, now)
	s.splitCnt.Add(1)
	return l.id, r.id, nil
}

// SplitEvery splits the oldest open shard every interval until it has
// split n shards (n <= 0: without end), ctx ends or the simulator is
// closed; the returned channel is closed then.
func (s *Sim) SplitEvery(ctx context.Context, interval time.Duration, n int) <-chan struct{} {
	done := make(chan struct{})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		close(done)
		return done
	}
	// Added under s.mu: Close marks the simulator closed under s.mu
	// before it waits, so no Add races with that Wait.
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for i := 0; n <= 0 || i < n; i++ {
			select {
			case <-ctx.Done():
				return
			case <-s.ctx.Done():
				return
			case <-t.C:
			}
			if _, _, _, err := s.SplitOldest(); err != nil {
				s.cfg.Logger.Warn("streamsim: scheduled split failed", "err", err)
				return
			}
		}
	}()
	return done
}

// trimmedCount is how many of sh's records are past the retention; s.mu
// is held.
func (s *Sim) trimmedCount(sh *shard, now time.Time) int {
	horizon := now.Add(-s.cfg.Retention)
	return sort.Search(len(sh.records), func(i int) bool { return sh.records[i].at.After(horizon) })
}

// gone is whether sh is past the retention as a whole; s.mu is held.
func (s *Sim) gone(sh *shard, now time.Time) bool {
	return sh.closed && now.Sub(sh.closedAt) > s.cfg.Retention
}

// OpenShards returns the ids of the open shards in hash range order.
func (s *Sim) OpenShards() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.open))
	for i, sh := range s.open {
		out[i] = sh.id
	}
	return out
}

// Truth returns every shard ever created, parents before children, each
// with every record put in it, in order.
func (s *Sim) Truth() []ShardRecords {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Clock()
	out := make([]ShardRecords, len(s.shards))
	for i, sh := range s.shards {
		recs := make([]Stored, len(sh.records))
		for j, r := range sh.records {
			recs[j] = r.Stored
		}
		out[i] = ShardRecords{ShardID: sh.id, ParentShardID: sh.parent, Closed: sh.closed, Trimmed: s.gone(sh, now), Records: recs}
	}
	return out
}

// Stats returns the counters.
func (s *Sim) Stats() Stats {
	st := Stats{
		Calls:         map[string]int64{},
		Throttled:     s.throttled.Load(),
		RecordsServed: s.served.Load(),
		RecordsPut:    s.put.Load(),
		Splits:        s.splitCnt.Load(),
	}
	s.calls.Range(func(k, v any) bool {
		st.Calls[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Clock()
	st.OpenShards = len(s.open)
	for _, sh := range s.shards {
		if !s.gone(sh, now) {
			st.ListedShards++
		}
	}
	return st
}

// Ceiling is the simulator's own read ceiling in records per second for
// the open shards: shards × ReadsPerSecondPerShard × MaxRecordsPerCall
// (+Inf when reads are unlimited). A reader measured near it is bound by
// the simulated limits, not by its own speed.
func (s *Sim) Ceiling() float64 {
	if s.cfg.ReadsPerSecondPerShard < 0 {
		return math.Inf(1)
	}
	s.mu.Lock()
	n := len(s.open)
	s.mu.Unlock()
	return float64(n * s.cfg.ReadsPerSecondPerShard * s.cfg.MaxRecordsPerCall)
}

func (s *Sim) count(op string) {
	v, ok := s.calls.Load(op)
	if !ok {
		v, _ = s.calls.LoadOrStore(op, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(1)
}
