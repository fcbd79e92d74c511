package relay_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	st "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/oklog/ulid/v2"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/streamsim"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/eventstore"
	store "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	"github.com/eventpipe/eventpipe/internal/dynamoclient"
	"github.com/eventpipe/eventpipe/relay"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// The lease timing of the simulator tests: long enough that 8 relays'
// renewals of ~300 leases (one per lease every 3 s) stay within what a
// DynamoDB Local shared with other tests writes.
const (
	simLeaseDuration = 9 * time.Second
	simDiscovery     = time.Second
)

// simStream is a simulated stream and where its relays keep leases and
// publish: the lease table on DynamoDB Local, the topics on the stack's
// Kafka.
type simStream struct {
	e   *env
	sim *streamsim.Sim
	// passes are the discovery passes each relay process logged, in
	// the order they ended.
	mu     sync.Mutex
	passes map[string][]pass
}

// pass is one discovery pass of a relay, as its log dates it.
type pass struct{ began, ended time.Time }

// roundsEnd is when every relay of live had ended k discovery passes that
// began at or after from: the latest of their k-th passes' ends. ok is
// false while some relay has logged fewer.
func (s *simStream) roundsEnd(live map[string]bool, from time.Time, k int) (end time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for worker := range live {
		n := 0
		for _, p := range s.passes[worker] {
			if p.began.Before(from) {
				continue
			}
			if n++; n == k {
				end = maxTime(end, p.ended)
				break
			}
		}
		if n < k {
			return time.Time{}, false
		}
	}
	return end, true
}

// awaitRounds waits until every relay of live has ended k discovery
// passes that began at or after from, and returns when the last did.
func (s *simStream) awaitRounds(t testing.TB, live map[string]bool, from time.Time, k int) time.Time {
	t.Helper()
	var end time.Time
	integration.Await(t, fmt.Sprintf("every live relay's %d passes after %s", k, from.Format(time.StampMilli)), func() error {
		var ok bool
		if end, ok = s.roundsEnd(live, from, k); !ok {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	return end
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// putEvent puts the record of event seq of aggregate typ/id on the
// simulated stream, as the event store's item would appear there.
func (s *simStream) putEvent(typ, id string, seq int64) error {
	e := eventstore.Envelope{EventID: ulid.Make().String(), EventType: "Ticked", AggregateType: typ, AggregateID: id,
		Sequence: seq, SchemaVersion: 1, OccurredAt: time.Now().UTC(), Payload: []byte(fmt.Sprintf(`{"n":%d}`, seq))}
	img := store.EventStreamImage(e)
	_, err := s.sim.Put(store.PartitionKey(e.Aggregate()), streamsim.Record{EventName: st.OperationTypeInsert, NewImage: img})
	return err
}

// simRelay is a relay worker process reading the simulated stream.
type simRelay struct {
	worker string
	cmd    *exec.Cmd
}

func (s *simStream) startRelay(t testing.TB, worker string) *simRelay {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envSimRelay+"="+worker, envSimURL+"="+s.sim.URL(), envSimARN+"="+s.sim.StreamARN(),
		endpoints.EnvLeasesTable+"="+s.e.ep.LeasesTable, endpoints.EnvTopicPrefix+"="+s.e.ep.TopicPrefix)
	cmd.Stdout = os.Stderr
	logs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go s.readRelayLog(logs)
	r := &simRelay{worker: worker, cmd: cmd}
	t.Cleanup(r.kill)
	return r
}

// readRelayLog reads a relay process's JSON log: each successful
// discovery pass is recorded in passes; warnings, errors and anything
// not JSON are copied to this process's stderr, the rest dropped.
func (s *simStream) readRelayLog(logs io.Reader) {
	lines := bufio.NewScanner(logs)
	lines.Buffer(make([]byte, 64*1024), 1024*1024)
	for lines.Scan() {
		var rec struct {
			Time   time.Time `json:"time"`
			Level  string    `json:"level"`
			Msg    string    `json:"msg"`
			Worker string    `json:"worker"`
			Took   int64     `json:"took"`
		}
		if json.Unmarshal(lines.Bytes(), &rec) != nil {
			fmt.Fprintln(os.Stderr, lines.Text())
			continue
		}
		if rec.Msg == "discovery pass" {
			s.mu.Lock()
			s.passes[rec.Worker] = append(s.passes[rec.Worker], pass{began: rec.Time.Add(-time.Duration(rec.Took)), ended: rec.Time})
			s.mu.Unlock()
		}
		if rec.Level == "WARN" || rec.Level == "ERROR" {
			fmt.Fprintln(os.Stderr, lines.Text())
		}
	}
}

// kill sends SIGKILL and reaps the process.
func (r *simRelay) kill() {
	if r.cmd != nil {
		_ = r.cmd.Process.Kill()
		_, _ = r.cmd.Process.Wait()
		r.cmd = nil
	}
}

// listLeases lists the stream's leases.
func (s *simStream) listLeases() ([]relay.Lease, error) {
	return relay.Status(context.Background(), &relay.Leases{Client: s.e.db, Table: s.e.ep.LeasesTable}, s.sim.StreamARN())
}

// balance summarises the leases: readable shards, how many each live
// worker holds of them, and how many have no live owner.
func balance(ls []relay.Lease, live map[string]bool) (readable int, held map[string]int, orphans int) {
	byID := map[string]relay.Lease{}
	for _, l := range ls {
		byID[l.ShardID] = l
	}
	held = map[string]int{}
	for _, id := range relay.Readable(ls) {
		readable++
		if o := byID[id].Owner; live[o] {
			held[o]++
		} else {
			orphans++
		}
	}
	return readable, held, orphans
}

// TestRelayProcessesShareASplittingStreamOf256Shards runs relay worker
// processes against a simulated stream of 256 shards (AWS's read limit of
// 5 GetRecords/s per shard) while records are written and 64 shards
// split, going from 1 to 2, 4 and 8 processes, then kills one with
// SIGKILL while records flow. It shows: every record reaches Kafka, each
// aggregate's records in order across the splits (a child is read only
// after its parent); once stable no relay holds more than its fair share
// of the readable shards within four discovery passes of every relay
// (after a lease duration); and each of the killed relay's shards is
// taken by the others by their fourth pass that began after its lease
// expired. Both bounds count the relays' own passes, as they log them,
// so a loaded machine slows the passes, not the bounds.
func TestRelayProcessesShareASplittingStreamOf256Shards(t *testing.T) {
	testenv.Integration(t)
	const shards, splits, aggregates, typ = 256, 64, 400, "tick"
	e := newEnv(t)
	sim, err := streamsim.Start(streamsim.Config{Shards: shards, TableName: e.ep.EventsTable,
		KeySchema: []st.KeySchemaElement{{AttributeName: aws.String(store.AttrPK), KeyType: st.KeyTypeHash},
			{AttributeName: aws.String(store.AttrSK), KeyType: st.KeyTypeRange}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() }) // after the relays, which cleanups started later kill first
	s := &simStream{e: e, sim: sim, passes: map[string][]pass{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The writer: one event every 20 ms, round-robin over the aggregates
	// (each record costs a checkpoint write on DynamoDB Local).
	want := map[string]int64{}
	var written atomic.Int64
	var writing sync.WaitGroup
	stopWriting := make(chan struct{})
	writing.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stopWriting:
				return
			case <-tick.C:
			}
			id := fmt.Sprintf("a%03d", i%aggregates)
			want[id]++
			if err := s.putEvent(typ, id, want[id]); err != nil {
				t.Error(err)
				return
			}
			written.Add(1)
		}
	})
	splitDone := sim.SplitEvery(ctx, 300*time.Millisecond, splits)

	// probe lists the stream's shards (as a pass would) and the leases.
	// Every call is within an Await, which asks again after an error: a
	// DynamoDB Local that the rest of the suite keeps busy can fail a
	// listing after the SDK's retries, and only a hang fails the test.
	probe := func() ([]relay.Lease, error) {
		if _, err := relay.Shards(ctx, sim.Client(), sim.StreamARN()); err != nil {
			return nil, err
		}
		return s.listLeases()
	}
	// The bounds below count the relays' own discovery passes, as their
	// logs date them, never wall-clock time: a loaded machine makes every
	// pass slower, not more of them needed. A bound missed is reported at
	// the end, after the delivery check, with what was measured.
	var missed []string
	live := map[string]bool{}
	var relays []*simRelay
	for _, n := range []int{1, 2, 4, 8} {
		for len(relays) < n {
			r := s.startRelay(t, fmt.Sprintf("relay-%d", len(relays)+1))
			relays = append(relays, r)
			live[r.worker] = true
		}
		// Each new relay has made its first pass once it holds a lease.
		var readable, orphans int
		var held map[string]int
		integration.Await(t, fmt.Sprintf("%d relays each holding a lease", n), func() error {
			ls, err := probe()
			if err != nil {
				return err
			}
			if readable, held, orphans = balance(ls, live); len(held) < len(live) {
				return fmt.Errorf("held %v", held)
			}
			return nil
		})
		t.Logf("%d relays: %d readable shards, held %v, %d unheld, %d records written", n, readable, held, orphans, written.Load())
	}
	<-splitDone
	if got := sim.Stats().Splits; got != splits {
		t.Fatalf("%d splits, want %d", got, splits)
	}

	// The stream settles once every split parent is read to its end and
	// its children are readable: until then the fair share moves with
	// every parent that finishes.
	integration.Await(t, "every split parent read to its end", func() error {
		ls, err := probe()
		if err != nil {
			return err
		}
		finished := 0
		for _, l := range ls {
			if l.Finished {
				finished++
			}
		}
		if finished < splits {
			return fmt.Errorf("%d of %d split parents finished", finished, splits)
		}
		return nil
	})

	// Stable: every readable shard held, nobody above its fair share.
	// The bound follows from the lease settings: a lease unheld (free, or
	// its holder's reader failed) is taken within a lease duration; each
	// relay passes every discovery interval (or, when a pass takes longer,
	// at once after it), takes free leases and steals what it lacks of its
	// share in one pass; a second pass mends takes two relays raced for
	// and a third what the second moved. Only a relay that does not
	// balance reaches it.
	// Each probe is dated by when it began: a listing that shows the
	// relays balanced shows a state at or before its end, one that
	// shows them unbalanced a state at or after its start. So the bound
	// is missed only when a probe that began after it still saw them
	// unbalanced; a loaded machine's slow probes and the polling
	// interval never count against the relays.
	stableFrom := time.Now()
	var stableAt, lastUnbalanced time.Time
	var lastState string
	integration.Await(t, "the relays balanced", func() error {
		began := time.Now()
		ls, err := probe()
		if err != nil {
			return err
		}
		readable, held, orphans := balance(ls, live)
		fair := (readable + len(live) - 1) / len(live)
		most := 0
		for _, n := range held {
			most = max(most, n)
		}
		if orphans == 0 && len(held) == len(live) && most <= fair {
			stableAt = time.Now()
			t.Logf("stable by %v after the stream settled (a probe begun %v after it saw them unbalanced): %d readable shards over %d relays, fair share %d, held %v",
				stableAt.Sub(stableFrom).Round(time.Millisecond), lastUnbalanced.Sub(stableFrom).Round(time.Millisecond), readable, len(live), fair, held)
			return nil
		}
		lastUnbalanced = began
		lastState = fmt.Sprintf("%d readable shards, held %v (fair share %d), %d unheld", readable, held, fair, orphans)
		return fmt.Errorf("%s, after %v", lastState, time.Since(stableFrom).Round(time.Millisecond))
	})
	// The bound: a lease duration (what an unheld lease waits for), then
	// four passes of every relay: three as above, and one more because a
	// worker does not steal back a lease its own reader is still
	// stopping on (the reader sees the lease gone at its next write, up
	// to half a lease duration later), so on a loaded machine, where
	// passes take seconds and work from listings seconds old, the last
	// move can wait for the pass after.
	const stablePasses = 4
	if after := stableFrom.Add(simLeaseDuration); stableAt.After(after) {
		if bound := s.awaitRounds(t, live, after, stablePasses); lastUnbalanced.After(bound) {
			missed = append(missed, fmt.Sprintf("a probe begun %v after the stream settled, %v after every relay's pass %d that began a lease duration (%v) after it, saw %s",
				lastUnbalanced.Sub(stableFrom).Round(time.Millisecond), lastUnbalanced.Sub(bound).Round(time.Millisecond), stablePasses, simLeaseDuration, lastState))
		}
	}

	// Kill one relay while records flow, at a moment when it holds
	// shards with records past its checkpoint (work in flight), and
	// watch its leases move.
	victim := relays[3]
	var (
		lastWrite     map[string]time.Time
		behind        int // the victim's shards holding records past its checkpoint
		writtenAtKill int64
	)
	integration.Await(t, victim.worker+" holding records past its checkpoint", func() error {
		lastSeq := map[string]string{}
		for _, sh := range sim.Truth() {
			if n := len(sh.Records); n > 0 {
				lastSeq[sh.ShardID] = sh.Records[n-1].SequenceNumber()
			}
		}
		ls, err := s.listLeases()
		if err != nil {
			return err
		}
		lastWrite, behind = map[string]time.Time{}, 0
		for _, l := range ls {
			if l.Owner != victim.worker || l.Finished {
				continue
			}
			lastWrite[l.ShardID] = l.UpdatedAt
			if lastSeq[l.ShardID] != "" && l.Checkpoint < lastSeq[l.ShardID] {
				behind++
			}
		}
		writtenAtKill = written.Load()
		if behind == 0 {
			return fmt.Errorf("%d shards held, all checkpointed to their last record", len(lastWrite))
		}
		return nil
	})
	victim.kill()
	delete(live, victim.worker)
	takenAt := map[string]time.Time{}
	integration.Await(t, "the killed relay's shards taken over", func() error {
		ls, err := probe()
		if err != nil {
			return err
		}
		now := time.Now()
		for _, l := range ls {
			if _, held := lastWrite[l.ShardID]; !held {
				continue
			}
			if l.Owner == victim.worker {
				lastWrite[l.ShardID] = l.UpdatedAt // a write that landed just before the kill
			} else if _, seen := takenAt[l.ShardID]; !seen && (l.Owner != "" || l.Finished) {
				// The lease's own write time: the take, or a write of the
				// new owner soon after it, whatever this poll's delay.
				at := now
				if !l.UpdatedAt.IsZero() && l.UpdatedAt.Before(now) {
					at = l.UpdatedAt
				}
				takenAt[l.ShardID] = at
			}
		}
		if len(takenAt) < len(lastWrite) {
			return fmt.Errorf("%d of %s's %d shards taken over", len(takenAt), victim.worker, len(lastWrite))
		}
		return nil
	})
	// A lease expires a lease duration after its last write, as each
	// relay dates it. Each live relay's first pass that begins after that
	// takes its part of the free leases (their count over the workers it
	// counts live); what is left, because a relay was late or two raced
	// for one lease, is taken at the others' next passes. A relay dates a
	// write that landed after its previous listing began but was stamped
	// before it to that listing's start (relay.observe), so on a loaded
	// machine, where a lease write takes a while to land, its expiry can
	// fall a pass later than the stamp this test reads. The bound: every
	// live relay's fourth pass that began after the expiry.
	const passBound = 4
	var lastExpiry time.Time
	for id := range takenAt {
		lastExpiry = maxTime(lastExpiry, lastWrite[id].Add(simLeaseDuration))
	}
	s.awaitRounds(t, live, lastExpiry, passBound)
	slowest, rounds := time.Duration(0), 0
	for id, at := range takenAt {
		expiry := lastWrite[id].Add(simLeaseDuration)
		slowest = max(slowest, at.Sub(lastWrite[id]))
		k := 1
		for ; k <= passBound; k++ {
			if end, _ := s.roundsEnd(live, expiry, k); !at.After(end) {
				break
			}
		}
		rounds = max(rounds, k)
		if k > passBound {
			end, _ := s.roundsEnd(live, expiry, passBound)
			missed = append(missed, fmt.Sprintf("shard %s taken %v after its lease expired, %v after every live relay's pass %d that began after the expiry",
				id, at.Sub(expiry).Round(time.Millisecond), at.Sub(end).Round(time.Millisecond), passBound))
		}
	}
	t.Logf("SIGKILLed %s holding %d shards (%d with records past its checkpoint) after %d records were written; all taken over, the slowest %v after its last lease write, by the relays' pass round %d after the expiry",
		victim.worker, len(lastWrite), behind, writtenAtKill, slowest.Round(time.Millisecond), rounds)

	time.Sleep(2 * time.Second) // records keep flowing after the takeover
	close(stopWriting)
	writing.Wait()
	if written.Load() <= writtenAtKill {
		t.Fatal("no record was written after the kill")
	}
	got := readUntil(t, e.ep.KafkaBrokers, e.topics.Events(typ), complete(want))
	dups := coverage(t, got, want)
	st := sim.Stats()
	t.Logf("%d records written on %d shards (%d after splits), %d delivered (%d repeats after the kill), %d GetRecords throttled",
		written.Load(), shards, st.ListedShards, len(got), dups, st.Throttled)
	for _, m := range missed {
		t.Error(m)
	}
}

const (
	envSimRelay = "EVENTPIPE_TEST_SIM_RELAY_WORKER"
	envSimURL   = "EVENTPIPE_TEST_SIM_URL"
	envSimARN   = "EVENTPIPE_TEST_SIM_STREAM_ARN"
)

// runSimRelayChildIfRequested runs a relay worker on a simulated stream
// in this process when a test started it as a child.
func runSimRelayChildIfRequested() {
	runChildIfRequested(envSimRelay, func(ctx context.Context, worker string) error {
		ep := endpoints.FromEnv()
		db, err := dynamoclient.New(ctx, dynamoclient.Config{Endpoint: ep.DynamoDB})
		if err != nil {
			return err
		}
		pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: ep.KafkaBrokers, Logger: watermill.NopLogger{}})
		if err != nil {
			return err
		}
		defer pub.Close()
		r, err := relay.New(relay.Config{Streams: streamsim.NewClient(os.Getenv(envSimURL), streamsim.DefaultRegion), DynamoDB: db,
			StreamARN: os.Getenv(envSimARN), LeaseTable: ep.LeasesTable, Publisher: pub, Topics: bus.Topics{Prefix: ep.TopicPrefix},
			WorkerID: worker, LeaseDuration: simLeaseDuration, DiscoveryInterval: simDiscovery,
			// Debug: the parent reads each discovery pass's duration.
			Logger: slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		if err != nil {
			return err
		}
		return r.Run(ctx)
	})
}

// BenchmarkRelayScalingOnSimulatedShards measures relay throughput as
// relays go 1 → 2 → 4 → 8 (workers in this process, each with its own
// worker id, Kafka publisher and leases in one lease table on DynamoDB
// Local) on a simulated stream of 32 shards that serves at most 20
// records per GetRecords call and 5 calls per second per shard, with 5
// ms added to every call (at most 3,200 records/s: Sim.Ceiling). For
// each count a fresh stream holds a backlog of b.N records per shard on
// average over 1,024 keys, and the relays drain it to Kafka (published
// and acknowledged). The simulator's own read ceiling for that backlog
// is the time its fullest shard takes to read at the limit (keys never
// spread evenly). Reported per count: records/s and its ratio to that
// ceiling (the goal: ≥ 0.8 with enough relays). Nothing about
// time is asserted.
func BenchmarkRelayScalingOnSimulatedShards(b *testing.B) {
	const shards, perCall = 32, 20
	e := newEnv(b)
	for _, relays := range []int{1, 2, 4, 8} {
		sim, err := streamsim.Start(streamsim.Config{Shards: shards, MaxRecordsPerCall: perCall, CallLatency: 5 * time.Millisecond,
			StreamARN: fmt.Sprintf("arn:aws:dynamodb:us-east-1:000000000000:table/%s/stream/bench-%d", e.ep.EventsTable, relays)})
		if err != nil {
			b.Fatal(err)
		}
		s := &simStream{e: e, sim: sim}
		records := b.N * shards
		for i := range records {
			if err := s.putEvent("tick", fmt.Sprintf("r%d-a%04d", relays, i%(32*shards)), int64(i/(32*shards))+1); err != nil {
				b.Fatal(err)
			}
		}
		// The ceiling for this backlog: keys do not spread evenly, and
		// the fullest shard, read at the limit, takes longest.
		fullest := 0
		for _, sh := range sim.Truth() {
			fullest = max(fullest, len(sh.Records))
		}
		calls := (fullest + perCall - 1) / perCall
		ceiling := float64(records) / (float64(calls) / streamsim.DefaultReadsPerSecondPerShard)
		var published atomic.Int64
		var first, last atomic.Int64 // unix nanos of the first and last acknowledged publish
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := range relays {
			cfg := e.relayConfig(b, fmt.Sprintf("bench-%d-%d", relays, w))
			cfg.Streams, cfg.StreamARN, cfg.EventsTable = sim.Client(), sim.StreamARN(), ""
			cfg.LeaseDuration, cfg.DiscoveryInterval = simLeaseDuration, simDiscovery/2
			cfg.Logger = slog.New(slog.DiscardHandler)
			cfg.Publisher = publishHook{Publisher: cfg.Publisher, after: func(n int) {
				now := time.Now().UnixNano()
				first.CompareAndSwap(0, now)
				published.Add(int64(n))
				last.Store(now)
			}}
			r, err := relay.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			wg.Go(func() { _ = r.Run(ctx) })
		}
		deadline := time.Now().Add(5 * time.Minute)
		for published.Load() < int64(records) {
			if time.Now().After(deadline) {
				b.Fatalf("%d relays: %d of %d records published after 5 minutes", relays, published.Load(), records)
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
		wg.Wait()
		sim.Close()
		took := time.Duration(last.Load() - first.Load())
		rate := float64(records) / took.Seconds()
		b.ReportMetric(rate, fmt.Sprintf("%drelays_records/s", relays))
		b.ReportMetric(rate/ceiling, fmt.Sprintf("%drelays_ceiling_ratio", relays))
	}
	b.ReportMetric(0, "ns/op")
}

// publishHook calls after with the number of messages of each
// acknowledged Publish.
type publishHook struct {
	message.Publisher
	after func(n int)
}

func (p publishHook) Publish(topic string, msgs ...*message.Message) error {
	err := p.Publisher.Publish(topic, msgs...)
	if err == nil {
		p.after(len(msgs))
	}
	return err
}
