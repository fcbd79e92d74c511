package relay_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/eventstore"
	store "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	"github.com/eventpipe/eventpipe/internal/dynamoclient"
	migrate "github.com/eventpipe/eventpipe/migrations/dynamodb"
	"github.com/eventpipe/eventpipe/relay"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

func TestMain(m *testing.M) {
	runRelayChildIfRequested()
	runSimRelayChildIfRequested()
	os.Exit(m.Run())
}

// env is one test's world: its own events and lease tables and topic
// namespace on the stack's services.
type env struct {
	ep     endpoints.Endpoints
	db     *dynamodb.Client
	store  *store.Store
	topics bus.Topics
}

func newEnv(t testing.TB) *env {
	t.Helper()
	db := testenv.DynamoDB(t)
	testenv.KafkaBrokers(t)
	ep := testenv.Endpoints()
	ep.EventsTable = testenv.UniqueName(t, "events")
	ep.LeasesTable = testenv.UniqueName(t, "leases")
	ep.TopicPrefix = testenv.UniqueName(t, "ns") + "."
	ctx := context.Background()
	if err := migrate.CreateEventsTable(ctx, db, ep.EventsTable); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, db, ep.EventsTable) })
	if err := migrate.CreateLeasesTable(ctx, db, ep.LeasesTable); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, db, ep.LeasesTable) })
	s, err := store.New(store.Config{Client: db, Table: ep.EventsTable})
	if err != nil {
		t.Fatal(err)
	}
	return &env{ep: ep, db: db, store: s, topics: bus.Topics{Prefix: ep.TopicPrefix}}
}

// appendTicks appends n "Ticked" events to ref in one transaction after
// version `after`.
func (e *env) appendTicks(t testing.TB, ref eventstore.Ref, after int64, n int) {
	t.Helper()
	ch := eventstore.Change{}
	for i := range n {
		ch.Events = append(ch.Events, eventstore.Event("Ticked", map[string]int64{"n": after + int64(i) + 1}))
	}
	req, err := eventstore.Prepare(ref, after, ch, eventstore.Schema{})
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 0; ; attempt++ {
		_, err := e.store.Append(context.Background(), req)
		if err == nil {
			return
		}
		if attempt == 5 {
			t.Errorf("append %s after %d: %v", ref, after, err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// relayConfig is the in-process relay configuration for e.
func (e *env) relayConfig(t testing.TB, worker string) relay.Config {
	t.Helper()
	streams, err := dynamoclient.NewStreams(context.Background(), dynamoclient.Config{Endpoint: e.ep.DynamoDB})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: e.ep.KafkaBrokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return relay.Config{
		Streams: streams, DynamoDB: e.db, EventsTable: e.ep.EventsTable, LeaseTable: e.ep.LeasesTable,
		Publisher: pub, Topics: e.topics, WorkerID: worker,
		LeaseDuration: 2 * time.Second, DiscoveryInterval: 250 * time.Millisecond,
	}
}

// runRelay runs a relay in this process until the returned stop is
// called; stop returns Run's error.
func runRelay(t testing.TB, cfg relay.Config) (stop func() error) {
	t.Helper()
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	var result error
	stop = func() error {
		once.Do(func() { cancel(); result = <-done })
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func (e *env) leases(t testing.TB) []relay.Lease {
	t.Helper()
	arn, err := relay.StreamARN(context.Background(), e.db, e.ep.EventsTable)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := relay.Status(context.Background(), &relay.Leases{Client: e.db, Table: e.ep.LeasesTable}, arn)
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// delivery is one event as it arrived on Kafka.
type delivery struct {
	partition int32
	offset    int64
	env       eventstore.Envelope
}

// readUntil reads topic from its start with a plain (group-less) client
// until done says every expected event arrived; it fails t when no new
// record arrives for integration.HangAfter. Records come back in
// partition order.
func readUntil(t testing.TB, brokers []string, topic string, done func([]delivery) bool) []delivery {
	t.Helper()
	reader := newTopicReader(t, brokers, topic)
	defer reader.Close()
	hang := integration.HangAfter()
	var got []delivery
	for moved := time.Now(); !done(got); {
		if stuck := time.Since(moved); stuck >= hang {
			t.Fatalf("%s: %d records, then none for %v (%s); not all expected events arrived", topic, len(got), stuck.Round(time.Millisecond), integration.EnvHangAfter)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		recs, err := reader.Poll(ctx)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Logf("read %s: %v", topic, err)
		}
		for _, r := range recs {
			e, err := eventstore.Unmarshal(r.Value)
			if err != nil {
				t.Fatalf("record %s/%d@%d: %v", r.Topic, r.Partition, r.Offset, err)
			}
			got = append(got, delivery{partition: r.Partition, offset: r.Offset, env: e})
			moved = time.Now()
		}
	}
	return got
}

// newTopicReader returns a group-less reader of topics from their start
// (plain text, fetches waiting at most 200 ms); the caller closes it.
func newTopicReader(t testing.TB, brokers []string, topics ...string) *kafka.TopicReader {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	r, err := kafka.NewTopicReader(ctx, kafka.TopicReaderConfig{Cluster: kafka.Cluster{Brokers: brokers}, Topics: topics,
		MaxWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// coverage checks deliveries against want (aggregate id → last sequence):
// every sequence 1..last arrived, and per aggregate each sequence arrived
// for the first time only after all before it (repeats after a crash are
// allowed, gaps and reordering are not). It returns the number of
// duplicates.
func coverage(t testing.TB, got []delivery, want map[string]int64) (dups int) {
	t.Helper()
	high := map[string]int64{}
	for _, d := range got {
		id, seq := d.env.AggregateID, d.env.Sequence
		switch {
		case seq == high[id]+1:
			high[id] = seq
		case seq <= high[id]:
			dups++
		default:
			t.Errorf("%s: sequence %d arrived before %d (partition %d offset %d)", id, seq, high[id]+1, d.partition, d.offset)
			high[id] = max(high[id], seq)
		}
	}
	for id, last := range want {
		if high[id] != last {
			t.Errorf("%s: delivered up to %d, want %d", id, high[id], last)
		}
	}
	return dups
}

// complete reports whether every aggregate in want reached its last
// sequence (ignoring order; coverage checks that).
func complete(want map[string]int64) func([]delivery) bool {
	return func(got []delivery) bool {
		seen := map[string]map[int64]bool{}
		for _, d := range got {
			if seen[d.env.AggregateID] == nil {
				seen[d.env.AggregateID] = map[int64]bool{}
			}
			seen[d.env.AggregateID][d.env.Sequence] = true
		}
		for id, last := range want {
			if int64(len(seen[id])) < last {
				return false
			}
		}
		return true
	}
}

const (
	envRelayChild = "EVENTPIPE_TEST_RELAY_CHILD_WORKER"
	envRelayBatch = "EVENTPIPE_TEST_RELAY_BATCH"
)

// runRelayChildIfRequested runs a relay worker in this process when a
// test started it as a child (the worker id is in the environment).
func runRelayChildIfRequested() {
	runChildIfRequested(envRelayChild, func(ctx context.Context, worker string) error {
		var batch int32
		fmt.Sscan(os.Getenv(envRelayBatch), &batch)
		r, err := eventpipe.NewRelay(ctx, eventpipe.RelayConfig{Process: eventpipe.Process{Catalog: eventpipe.NewCatalog()}, WorkerID: worker,
			LeaseDuration: 2 * time.Second, DiscoveryInterval: 250 * time.Millisecond, BatchSize: batch})
		if err != nil {
			return err
		}
		defer r.Close()
		return r.Run(ctx)
	})
}

// runChildIfRequested is a child process's life when a test started
// this binary with a worker id in envWorker: run the worker until
// SIGTERM or an interrupt, then exit 0 after a clean stop or 1 with the
// error. Without envWorker it returns at once.
func runChildIfRequested(envWorker string, run func(ctx context.Context, worker string) error) {
	worker := os.Getenv(envWorker)
	if worker == "" {
		return
	}
	slog.SetLogLoggerLevel(slog.LevelWarn)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err := run(ctx, worker)
	stop()
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "relay child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// relayChild is a relay worker in a child process.
type relayChild struct {
	t      testing.TB
	e      *env
	name   string
	worker string // name-<generation>: a restarted process is a new worker, as in production
	gen    int
	batch  int
	cmd    *exec.Cmd
}

func startRelayChild(t testing.TB, e *env, worker string, batch int) *relayChild {
	c := &relayChild{t: t, e: e, name: worker, batch: batch}
	c.start()
	t.Cleanup(c.kill)
	return c
}

func (c *relayChild) start() {
	c.t.Helper()
	c.gen++
	c.worker = fmt.Sprintf("%s-%d", c.name, c.gen)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRelayChild+"="+c.worker, fmt.Sprintf("%s=%d", envRelayBatch, c.batch),
		endpoints.EnvEventsTable+"="+c.e.ep.EventsTable, endpoints.EnvLeasesTable+"="+c.e.ep.LeasesTable,
		endpoints.EnvTopicPrefix+"="+c.e.ep.TopicPrefix)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.cmd = cmd
}

// kill sends SIGKILL and reaps the process.
func (c *relayChild) kill() {
	if c.cmd != nil {
		_ = c.cmd.Process.Kill()
		_, _ = c.cmd.Process.Wait()
		c.cmd = nil
	}
}
