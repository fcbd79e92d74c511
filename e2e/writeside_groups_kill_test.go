package e2e_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/dev/testservers"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/endpoints"
)

// The crash tests in this file run their own Kafka broker as a child
// process of the test binary (the project's broker, built from this tree;
// TestMain turns the binary into it), so they test the broker code next
// to them and can watch its groups without other tests' traffic.

// TestCommandGroupRecoversFromTwoQuickDoubleKills kills two `serve`
// processes of one consumer group within three seconds, starts two new
// ones and kills those within three seconds too, while they are still
// joining the group, then starts a last one. Commands are sent all along.
// Every command sent must be answered within 30 s of the last kill: the
// group must not keep dead members, drop the live one, or leave a member
// waiting for a JoinGroup or SyncGroup answer that never comes.
func TestCommandGroupRecoversFromTwoQuickDoubleKills(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	const answerWithin = 30 * time.Second
	rig := newGroupRig(t)
	sender, start, since, procs, watch := rig.sender, rig.start, rig.since, rig.procs, rig.watch

	procs.start("A")
	procs.start("B")
	// Both members hold partitions and answer commands.
	rigs.WaitFor(t, "A and B to share the group", func() bool {
		snap, ok := watch.last()
		return ok && snap.State == "Stable" && len(snap.Members) == 2 &&
			len(snap.Members[0].Partitions) > 0 && len(snap.Members[1].Partitions) > 0
	})
	load := sendCommands(t, sender, since, 200*time.Millisecond)
	defer load.stop()
	rigs.WaitFor(t, "A and B to answer commands", func() bool { return load.answeredCount() >= 5 })

	var inFlight []int
	killPair := func(first, second string) {
		inFlight = append(inFlight, procs.kill(first, load))
		firstAt := time.Now()
		time.Sleep(time.Duration(300+rand.IntN(1200)) * time.Millisecond)
		inFlight = append(inFlight, procs.kill(second, load))
		if gap := time.Since(firstAt); gap >= 3*time.Second {
			t.Fatalf("killing %s and %s took %s, want within 3 s", first, second, gap)
		}
	}
	killPair("A", "B")
	procs.start("C")
	procs.start("D")
	// C and D join while the group still waits for A and B.
	time.Sleep(time.Duration(1500+rand.IntN(2000)) * time.Millisecond)
	killPair("C", "D")
	lastKill := time.Now()
	procs.start("E")
	t.Logf("%s last kill; E started", since())
	time.Sleep(5 * time.Second) // commands keep coming while E joins
	load.stop()

	deadline := lastKill.Add(answerWithin)
	for time.Now().Before(deadline.Add(5*time.Second)) && load.outstandingCount() > 0 {
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("group history:\n%s", watch.history())
	if at, ok := watch.stableAfter(lastKill); ok {
		t.Logf("the group was Stable again %s after the last kill", at.Sub(lastKill).Truncate(time.Millisecond))
	} else {
		t.Errorf("the group was not Stable again after the last kill")
	}
	report := load.report()
	t.Logf("%s sent %d commands, answered %d; commands outstanding at the four kills: %v", since(), report.sent, report.answered, inFlight)

	for i, n := range inFlight {
		if n == 0 {
			t.Errorf("kill %d landed with no command in flight; the test did not exercise a crash under load", i+1)
		}
	}
	if report.sent < 30 {
		t.Errorf("only %d commands were sent", report.sent)
	}
	for _, f := range report.failures {
		t.Error(f)
	}
	late := report.lastAnswer.Sub(lastKill)
	switch {
	case len(report.unanswered) > 0:
		t.Errorf("%d commands were not answered within %s of the last kill (e.g. %s, sent at %s)",
			len(report.unanswered), answerWithin, report.unanswered[0].id, report.unanswered[0].sentAt.Sub(start).Truncate(time.Millisecond))
	case late > answerWithin:
		t.Errorf("the last answer came %s after the last kill, want within %s", late.Truncate(time.Millisecond), answerWithin)
	default:
		t.Logf("every command answered, the last one %s after the last kill (longest gap between answers: %s)",
			late.Truncate(time.Millisecond), report.longestGap.Truncate(time.Millisecond))
	}
}

// TestServeStopsPromptlyWhileItsGroupRebalances stops `serve` processes
// with SIGTERM while their consumer groups wait in a rebalance for a
// member that was killed (its session has seconds left to run). A
// graceful stop must not wait for the rebalance: each process exits, with
// status 0, while the group still waits for the dead member (seen in a
// snapshot of the group taken after both exited), never by a clock.
func TestServeStopsPromptlyWhileItsGroupRebalances(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own

	rig := newGroupRig(t)
	sender, since, procs, watch := rig.sender, rig.since, rig.procs, rig.watch
	load := sendCommands(t, sender, since, 100*time.Millisecond)
	defer load.stop()

	procs.start("A")
	procs.start("B")
	rigs.WaitFor(t, "A and B to share the group and answer commands", func() bool {
		snap, ok := watch.last()
		return ok && snap.State == "Stable" && len(snap.Members) == 2 && load.answeredCount() >= 5
	})
	load.stop()
	// Kill one member and start another: the newcomer joins, the survivor
	// rejoins, and the group waits for the dead member's session (10 s) to
	// run out. The stops must come while it still waits, with most of the
	// session left: on a busy machine the newcomer can
	// take that long to join, so the round is tried again with the next
	// pair, as many times as it takes, until it lands in time.
	live, next := []string{"A", "B"}, 'C'
	var killedAt time.Time
	for round := 1; ; round++ {
		dead, newcomer := live[0], string(next)
		next++
		procs.kill(dead, load)
		killedAt = time.Now()
		procs.start(newcomer)
		live = []string{live[1], newcomer}
		rigs.WaitFor(t, newcomer+" to join the rebalance", func() bool {
			snap, ok := watch.last()
			return ok && snap.State == "PreparingRebalance" && len(snap.Members) == 3
		})
		time.Sleep(time.Second)
		snap, _ := watch.last()
		if snap.State == "PreparingRebalance" && time.Since(killedAt) <= 4*time.Second {
			break
		}
		t.Logf("round %d: the group is %s %s after %s was killed, too late to stop while it waits; again", round, snap.State, time.Since(killedAt).Truncate(time.Millisecond), dead)
		rigs.WaitFor(t, "the group stable with "+live[0]+" and "+live[1], func() bool {
			snap, ok := watch.last()
			return ok && snap.State == "Stable" && len(snap.Members) == 2
		})
	}

	t.Logf("%s SIGTERM to %s and %s, %s after the kill", since(), live[0], live[1], time.Since(killedAt).Truncate(time.Millisecond))
	took := map[string]chan time.Duration{live[0]: make(chan time.Duration, 1), live[1]: make(chan time.Duration, 1)}
	for name, ch := range took {
		go func() { ch <- procs.terminate(name) }()
	}
	for name, ch := range took {
		d := <-ch
		t.Logf("serve %s stopped after %s", name, d.Truncate(time.Millisecond))
	}
	exited := time.Now()
	if snap := watch.snapshotAfter(t, exited); snap.State != "PreparingRebalance" {
		t.Errorf("serve %s and %s stopped only when the group had left the rebalance (%s %s after the kill): a graceful stop waited for it",
			live[0], live[1], snap.State, time.Since(killedAt).Truncate(time.Millisecond))
	}
	t.Logf("group history:\n%s", watch.history())
}

// groupRig is what the group crash tests share: a broker of their own,
// a fresh events table and namespace, a command sender, the serve
// processes of one consumer group and a watcher of the todo commands
// group. Everything stops when t ends.
type groupRig struct {
	sender *kafka.Sender
	start  time.Time
	since  func() string // time since start, for logs
	procs  *serveProcs
	watch  *groupWatch
}

func newGroupRig(t *testing.T) *groupRig {
	t.Helper()
	ep := rigs.Endpoints(t)
	broker := testservers.StartKafkaBrokerWithConfig(t, testservers.KafkaBrokerConfig{DataDir: t.TempDir(), Partitions: 12})
	ep.KafkaBrokers = []string{broker.Addr}
	group := testenv.UniqueName(t, "g")
	topics := bus.Topics{Prefix: ep.TopicPrefix}
	sender, err := kafka.NewSender(kafka.SenderConfig{Brokers: ep.KafkaBrokers, Topics: topics, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sender.Close() })
	r := &groupRig{sender: sender, start: time.Now()}
	r.since = func() string { return time.Since(r.start).Truncate(10 * time.Millisecond).String() }
	r.procs = newServeProcs(t, ep, group)
	r.watch = watchGroup(t, ep.KafkaBrokers, group+"."+topics.Commands(todo.AggregateType), r.procs, r.since)
	t.Cleanup(r.watch.stop)
	return r
}

// serveProcs starts and kills `serve` children of one consumer group on
// the test's own broker.
type serveProcs struct {
	t     *testing.T
	ep    endpoints.Endpoints
	group string
	mu    sync.Mutex
	cmds  map[string]*exec.Cmd
	names map[int]string // pid -> name, also after the process died
}

func newServeProcs(t *testing.T, ep endpoints.Endpoints, group string) *serveProcs {
	return &serveProcs{t: t, ep: ep, group: group, cmds: map[string]*exec.Cmd{}, names: map[int]string{}}
}

func (p *serveProcs) start(name string) {
	p.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envServeChild+"="+p.group,
		endpoints.EnvKafkaBrokers+"="+strings.Join(p.ep.KafkaBrokers, ","),
		endpoints.EnvEventsTable+"="+p.ep.EventsTable, endpoints.EnvKeysTable+"="+p.ep.KeysTable, endpoints.EnvTopicPrefix+"="+p.ep.TopicPrefix,
		"EVENTPIPE_LOG_LEVEL=warn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start serve %s: %v", name, err)
	}
	p.t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	p.mu.Lock()
	p.cmds[name] = cmd
	p.names[cmd.Process.Pid] = name
	p.mu.Unlock()
	p.t.Logf("serve %s started (pid %d)", name, cmd.Process.Pid)
}

// kill waits (up to a second) until a command is in flight, sends SIGKILL
// to the named child, reaps it and returns how many commands were in
// flight at that moment.
func (p *serveProcs) kill(name string, load *commandLoad) int {
	p.t.Helper()
	p.mu.Lock()
	cmd := p.cmds[name]
	p.mu.Unlock()
	for deadline := time.Now().Add(time.Second); load.outstandingCount() == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	inFlight := load.outstandingCount()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_, _ = cmd.Process.Wait()
	p.t.Logf("%s serve %s killed with %d commands in flight", load.since(), name, inFlight)
	return inFlight
}

// terminate sends SIGTERM to the named child, waits for it to exit and
// returns how long that took; it fails the test if the exit was not clean.
func (p *serveProcs) terminate(name string) time.Duration {
	p.mu.Lock()
	cmd := p.cmds[name]
	p.mu.Unlock()
	start := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	state, err := cmd.Process.Wait()
	took := time.Since(start)
	if err != nil || !state.Success() {
		p.t.Errorf("serve %s after SIGTERM: %v, %v", name, state, err)
	}
	return took
}

// label names the child process a member joined from.
func (p *serveProcs) label(clientHost string) (string, bool) {
	_, portStr, err := net.SplitHostPort(clientHost)
	if err != nil {
		return "", false
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return "", false
	}
	p.mu.Lock()
	var pids []int
	for pid := range p.names {
		pids = append(pids, pid)
	}
	p.mu.Unlock()
	pid, ok := testenv.LoopbackPortOwner(pids, port)
	if !ok {
		return "", false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.names[pid], true
}

// groupWatch polls a group's description and keeps every change.
type groupWatch struct {
	mu      sync.Mutex
	lines   []string
	lastSn  testenv.GroupSnapshot
	lastAt  time.Time // when lastSn was asked for
	seen    bool
	stables []time.Time       // when the group was seen Stable
	labels  map[string]string // member id -> child name
	done    chan struct{}
	stopped chan struct{}
}

func watchGroup(t *testing.T, brokers []string, group string, procs *serveProcs, since func() string) *groupWatch {
	obs := testenv.NewGroupObserver(t, brokers)
	w := &groupWatch{labels: map[string]string{}, done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(w.stopped)
		var prev string
		for {
			select {
			case <-w.done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			asked := time.Now()
			snap, err := obs.Describe(group)
			if err != nil {
				continue
			}
			var b strings.Builder
			b.WriteString(snap.State)
			w.mu.Lock()
			for _, m := range snap.Members {
				name, ok := w.labels[m.ID]
				if !ok {
					if name, ok = procs.label(m.ClientHost); ok {
						w.labels[m.ID] = name
					} else {
						name = "?"
					}
				}
				parts := 0
				for _, ps := range m.Partitions {
					parts += len(ps)
				}
				fmt.Fprintf(&b, " %s(%s…,%d partitions)", name, m.ID[len(m.ID)-8:], parts)
			}
			w.lastSn, w.lastAt, w.seen = snap, asked, true
			if snap.State == "Stable" {
				w.stables = append(w.stables, time.Now())
			}
			if line := b.String(); line != prev {
				w.lines = append(w.lines, since()+" "+line)
				prev = line
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *groupWatch) last() (testenv.GroupSnapshot, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastSn, w.seen
}

// snapshotAfter waits for a snapshot of the group asked for after at,
// and returns it.
func (w *groupWatch) snapshotAfter(t *testing.T, at time.Time) testenv.GroupSnapshot {
	t.Helper()
	var snap testenv.GroupSnapshot
	rigs.WaitFor(t, "a snapshot of the group", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		snap = w.lastSn
		return w.seen && w.lastAt.After(at)
	})
	return snap
}

// stableAfter returns the first time after t the group was seen Stable.
func (w *groupWatch) stableAfter(t time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, at := range w.stables {
		if at.After(t) {
			return at, true
		}
	}
	return time.Time{}, false
}

func (w *groupWatch) history() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, "\n")
}

func (w *groupWatch) stop() {
	select {
	case <-w.done:
	default:
		close(w.done)
	}
	<-w.stopped
}

// commandLoad sends a todo Create command at a steady rate, each awaited
// in its own goroutine, and records when each was answered.
type commandLoad struct {
	t           *testing.T
	since       func() string
	mu          sync.Mutex
	sentAt      map[string]time.Time
	answeredAt  map[string]time.Time
	failures    []string
	done        chan struct{}
	wg          sync.WaitGroup
	cancelWaits context.CancelFunc
}

func sendCommands(t *testing.T, sender *kafka.Sender, since func() string, every time.Duration) *commandLoad {
	ctx, cancel := context.WithCancel(context.Background())
	l := &commandLoad{t: t, since: since, sentAt: map[string]time.Time{}, answeredAt: map[string]time.Time{},
		done: make(chan struct{}), cancelWaits: cancel}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-l.done:
				return
			case <-tick.C:
			}
			cmd, err := commands.NewJSON(todo.CreateTodo, todo.AggregateType, fmt.Sprintf("todo-%04d", n), todo.TodoData{Title: "crash"})
			if err != nil {
				l.fail("new command: %v", err)
				return
			}
			l.mu.Lock()
			l.sentAt[cmd.ID] = time.Now()
			l.mu.Unlock()
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				res, err := sender.SendAndWait(ctx, cmd)
				if ctx.Err() != nil {
					return // the test stopped waiting
				}
				if err != nil {
					l.fail("command %s: %v", cmd.ID, err)
					return
				}
				if res.Status != commands.StatusAccepted {
					l.fail("command %s answered %s (%s)", cmd.ID, res.Status, res.Reason)
				}
				l.mu.Lock()
				l.answeredAt[cmd.ID] = time.Now()
				l.mu.Unlock()
			}()
		}
	}()
	return l
}

func (l *commandLoad) fail(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures = append(l.failures, fmt.Sprintf(format, args...))
}

// stop stops sending; answers are still awaited until stopWaiting.
func (l *commandLoad) stop() {
	select {
	case <-l.done:
	default:
		close(l.done)
		l.t.Cleanup(func() { l.cancelWaits(); l.wg.Wait() })
	}
}

func (l *commandLoad) answeredCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.answeredAt)
}

func (l *commandLoad) outstandingCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sentAt) - len(l.answeredAt)
}

type pendingCommand struct {
	id     string
	sentAt time.Time
}

type loadReport struct {
	sent, answered int
	unanswered     []pendingCommand
	lastAnswer     time.Time
	longestGap     time.Duration
	failures       []string
}

func (l *commandLoad) report() loadReport {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := loadReport{sent: len(l.sentAt), answered: len(l.answeredAt), failures: append([]string(nil), l.failures...)}
	var times []time.Time
	for id, at := range l.sentAt {
		a, ok := l.answeredAt[id]
		if !ok {
			r.unanswered = append(r.unanswered, pendingCommand{id: id, sentAt: at})
			continue
		}
		times = append(times, a)
		if a.After(r.lastAnswer) {
			r.lastAnswer = a
		}
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	for i := 1; i < len(times); i++ {
		if g := times[i].Sub(times[i-1]); g > r.longestGap {
			r.longestGap = g
		}
	}
	return r
}
