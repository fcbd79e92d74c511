package keyed_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus/kafka/keyed"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/endpoints"
)

// The consumer child: a keyed subscriber in a Router whose handler
// appends "pid partition offset id" to a file, fsynced, before it acks.
const (
	envChildOut   = "EVENTPIPE_TEST_KEYED_CHILD_OUT"
	envChildTopic = "EVENTPIPE_TEST_KEYED_CHILD_TOPIC"
	envChildGroup = "EVENTPIPE_TEST_KEYED_CHILD_GROUP"

	childMaxInFlight = 16
)

// childConfig is the subscriber the child runs: short group timeouts (as
// the other kill tests use) so that a killed member's partitions move on
// within seconds.
func childConfig(brokers []string, group string) keyed.Config {
	return keyed.Config{
		Brokers: brokers, ConsumerGroup: group, MaxInFlight: childMaxInFlight,
		SessionTimeout: 6 * time.Second, HeartbeatInterval: time.Second, RebalanceTimeout: 5 * time.Second,
		RevokeTimeout: 2 * time.Second, CommitInterval: 100 * time.Millisecond, Logger: watermill.NopLogger{},
	}
}

// runConsumerChildIfRequested runs the consumer child when a test started
// this binary as one, until SIGTERM or SIGKILL.
func runConsumerChildIfRequested() {
	out := os.Getenv(envChildOut)
	if out == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := runConsumerChild(ctx, out, os.Getenv(envChildTopic), os.Getenv(envChildGroup)); err != nil {
		fmt.Fprintln(os.Stderr, "keyed consumer child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runConsumerChild(ctx context.Context, out, topic, group string) error {
	f, err := os.OpenFile(out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	w := newSyncWriter(f)
	defer w.close()
	sub, err := keyed.New(childConfig(endpoints.FromEnv().KafkaBrokers, group))
	if err != nil {
		return err
	}
	r, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		return err
	}
	pid := os.Getpid()
	r.AddConsumerHandler("keyed-child", topic, sub, func(msg *message.Message) error {
		p, _ := keyed.MessagePartitionFromCtx(msg.Context())
		o, _ := keyed.MessagePartitionOffsetFromCtx(msg.Context())
		time.Sleep(time.Duration(5+rand.IntN(11)) * time.Millisecond)
		return w.write(fmt.Sprintf("%d %d %d %s\n", pid, p, o, msg.UUID))
	})
	return r.Run(ctx)
}

// syncWriter appends lines to a file in batches, each written with one
// write and fsynced before the writers of its lines return.
type syncWriter struct {
	f     *os.File
	lines chan syncLine
	done  chan struct{}
}

type syncLine struct {
	text string
	err  chan error
}

func newSyncWriter(f *os.File) *syncWriter {
	w := &syncWriter{f: f, lines: make(chan syncLine), done: make(chan struct{})}
	go w.run()
	return w
}

func (w *syncWriter) write(line string) error {
	l := syncLine{text: line, err: make(chan error, 1)}
	select {
	case w.lines <- l:
	case <-w.done:
		return os.ErrClosed
	}
	return <-l.err
}

func (w *syncWriter) close() { close(w.done) }

func (w *syncWriter) run() {
	for {
		var batch []syncLine
		select {
		case l := <-w.lines:
			batch = append(batch, l)
		case <-w.done:
			return
		}
	more:
		for {
			select {
			case l := <-w.lines:
				batch = append(batch, l)
			default:
				break more
			}
		}
		var b strings.Builder
		for _, l := range batch {
			b.WriteString(l.text)
		}
		_, err := w.f.WriteString(b.String())
		if err == nil {
			err = w.f.Sync()
		}
		for _, l := range batch {
			l.err <- err
		}
	}
}

// processed is one line of the child's file.
type processed struct {
	pid       int
	partition int32
	offset    int64
	id        string
}

// readProcessed parses the child's file; a last line without its newline
// (a kill during the write) is ignored.
func readProcessed(t testing.TB, path string) []processed {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []processed
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	complete := strings.HasSuffix(string(data), "\n")
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 {
			if !complete {
				break
			}
			t.Fatalf("malformed line %q", sc.Text())
		}
		pid, err1 := strconv.Atoi(f[0])
		p, err2 := strconv.ParseInt(f[1], 10, 32)
		o, err3 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			if !complete {
				break
			}
			t.Fatalf("malformed line %q", sc.Text())
		}
		out = append(out, processed{pid: pid, partition: int32(p), offset: o, id: f[3]})
	}
	if !complete && len(out) > 0 {
		out = out[:len(out)-1] // the last line may be cut in a field
	}
	return out
}

// TestKilledConsumerRedeliversOnlyWhatWasNotCommitted publishes 6,000
// messages over 24 keys on 4 partitions and runs the consumer in a child
// process that is killed with SIGKILL 4 times while it consumes, and
// restarted. In the end every message was processed; within each run and
// across runs no message of a key was processed before the earlier ones
// of its key; no run processed a message below an offset committed
// before it started; and the duplicates are at most MaxInFlight per
// partition per kill.
func TestKilledConsumerRedeliversOnlyWhatWasNotCommitted(t *testing.T) {
	const keys, perKey, partitions, kills = 24, 250, 4, 4
	brokers := testenv.KafkaBrokers(t)
	topic := createTopic(t, brokers, "keyed-kill", partitions)
	group := topic + "-group"
	ids := roundRobin(keys, perKey)
	publish(t, brokers, topic, ids)
	out := t.TempDir() + "/processed"

	// Committed offsets, polled all along with the moment each was seen.
	type observation struct {
		at      time.Time
		offsets map[int32]int64
	}
	var (
		mu     sync.Mutex
		seen   []observation
		starts = map[int]time.Time{}
	)
	pollCtx, stopPoll := context.WithCancel(context.Background())
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for pollCtx.Err() == nil {
			offs := testenv.CommittedOffsets(t, brokers, group, topic)
			mu.Lock()
			seen = append(seen, observation{at: time.Now(), offsets: offs})
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	defer func() { stopPoll(); <-polled }()

	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envChildOut+"="+out, envChildTopic+"="+topic, envChildGroup+"="+group)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		mu.Lock()
		defer mu.Unlock()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		starts[cmd.Process.Pid] = time.Now()
		return cmd
	}
	progress := func() int64 {
		distinct := map[string]bool{}
		for _, l := range readProcessed(t, out) {
			distinct[l.id] = true
		}
		return int64(len(distinct))
	}
	killedAt := testenv.KillRepeatedly(t, start, progress, int64(len(ids)), kills)
	stopPoll()
	<-polled

	lines := readProcessed(t, out)
	mu.Lock()
	defer mu.Unlock()
	// Every message, and per key never ahead of an unprocessed one.
	next := map[string]int{}
	done := map[string]bool{}
	duplicates := 0
	perRun := map[int]int{}
	for _, l := range lines {
		perRun[l.pid]++
		key, seq := parseID(t, l.id)
		if seq > next[key] {
			t.Errorf("run %d processed %s before %s", l.pid, l.id, msgID(key, next[key]))
		}
		if done[l.id] {
			duplicates++
		}
		done[l.id] = true
		if seq == next[key] {
			next[key] = seq + 1
		}
	}
	for _, id := range ids {
		if !done[id] {
			t.Errorf("%s never processed", id)
		}
	}
	// Within a run a key's messages are contiguous unless a rebalance
	// inside the run went back to the committed offset.
	runOrder := map[int]map[string]int{}
	backwards := 0
	for _, l := range lines {
		if runOrder[l.pid] == nil {
			runOrder[l.pid] = map[string]int{}
		}
		key, seq := parseID(t, l.id)
		last, ok := runOrder[l.pid][key]
		switch {
		case ok && seq > last+1:
			t.Errorf("run %d processed %s right after %s", l.pid, l.id, msgID(key, last))
		case ok && seq <= last:
			backwards++
		}
		runOrder[l.pid][key] = seq
	}
	// No run processed what was committed before it started.
	redeliveredCommitted := 0
	for _, l := range lines {
		began := starts[l.pid]
		for _, o := range seen {
			if !o.at.Before(began) {
				break
			}
			if c, ok := o.offsets[l.partition]; ok && l.offset < c {
				redeliveredCommitted++
				if redeliveredCommitted <= 5 {
					t.Errorf("run %d processed %s at %d/%d, below offset %d committed before it started", l.pid, l.id, l.partition, l.offset, c)
				}
				break
			}
		}
	}
	bound := childMaxInFlight * partitions * kills
	t.Logf("%d lines from %d runs %v, %d distinct, %d duplicates (bound %d), %d in-run repeats, kills at progress %v, %d committed-offset observations",
		len(lines), len(perRun), perRun, len(done), duplicates, bound, backwards, killedAt, len(seen))
	if duplicates > bound {
		t.Errorf("%d duplicates after %d kills, more than MaxInFlight × partitions × kills = %d", duplicates, kills, bound)
	}
	if len(perRun) < kills+1 {
		t.Errorf("%d runs processed messages, want %d", len(perRun), kills+1)
	}
}
