package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// The drain settings the children run with: the grace period is the
// bound each exit is held to; the relays' lease duration is far above
// their discovery interval, so a takeover within it proves the lease was
// released, not left to expire.
const (
	drainGrace     = 20 * time.Second
	drainDelay     = time.Second
	relayLease     = 30 * time.Second
	relayDiscovery = 500 * time.Millisecond
)

// proc is a child eventpipe process with its probes' address and log.
type proc struct {
	name, addr string
	cmd        *exec.Cmd
	log        *bytes.Buffer
	exited     chan struct{}
	exitedAt   time.Time
}

func startProc(t *testing.T, bin string, env []string, name, addr string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, addr: addr, log: &bytes.Buffer{}, exited: make(chan struct{})}
	var mu sync.Mutex
	w := writerFunc(func(b []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return p.log.Write(b) })
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.exitedAt = time.Now()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			mu.Lock()
			t.Logf("--- %s's log:\n%s", name, p.log.String())
			mu.Unlock()
		}
	})
	return p
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// probeStatus answers GET path's status, 0 when nothing answers.
func probeStatus(addr, path string) int {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitFor waits until cond holds, failing t only when integration.Await
// sees no success for integration.HangAfter (a hang, not a slow machine).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	integration.Await(t, what, func() error {
		if !cond() {
			return errors.New("not yet")
		}
		return nil
	})
}

// drainWatch polls p's /readyz every 10 ms from now until p exits and
// reports when it first answered 503 and when nothing answered any more.
type drainWatch struct {
	notReady, gone atomic.Int64 // unix nanoseconds
	done           chan struct{}
}

func watchDrain(p *proc) *drainWatch {
	w := &drainWatch{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			code := probeStatus(p.addr, "/readyz")
			now := time.Now().UnixNano()
			if code == http.StatusServiceUnavailable {
				w.notReady.CompareAndSwap(0, now)
			}
			if code == 0 {
				w.gone.CompareAndSwap(0, now)
			}
			select {
			case <-p.exited:
				w.gone.CompareAndSwap(0, time.Now().UnixNano())
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return w
}

// terminate sends SIGTERM to p, waits for it to exit within the grace
// period and returns how long it took and its drain watch.
func terminate(t *testing.T, p *proc) (time.Duration, *drainWatch) {
	t.Helper()
	w := watchDrain(p)
	sent := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM %s: %v", p.name, err)
	}
	select {
	case <-p.exited:
	case <-time.After(drainGrace + 10*time.Second):
		t.Fatalf("%s did not exit within %v of SIGTERM", p.name, drainGrace+10*time.Second)
	}
	<-w.done
	took := p.exitedAt.Sub(sent)
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("%s exited with status %d after SIGTERM", p.name, code)
	}
	if took > drainGrace {
		t.Errorf("%s took %v to exit, past its grace period %v", p.name, took, drainGrace)
	}
	nr := w.notReady.Load()
	if nr == 0 {
		t.Errorf("%s: /readyz never answered 503 while it drained", p.name)
	} else if gone := w.gone.Load(); gone != 0 && nr > gone {
		t.Errorf("%s: /readyz answered 503 only after its listener was gone", p.name)
	}
	t.Logf("%s: SIGTERM → /readyz 503 after %v, exit after %v (grace period %v)", p.name,
		time.Duration(nr-sent.UnixNano()).Round(time.Millisecond), took.Round(time.Millisecond), drainGrace)
	return took, w
}

// load posts new todos to serve's API one after another until stopped
// or told serve is not ready, and remembers every id whose create was
// answered 201. Any request sent that got no answer is an error.
type load struct {
	addr     string
	accepted []string
	failures []string
	mu       sync.Mutex
	n        atomic.Int64
}

func (l *load) run(ctx context.Context, prefix string, ready func() bool) {
	c := http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for ctx.Err() == nil && ready() {
		id := fmt.Sprintf("%s-%d", prefix, l.n.Add(1))
		resp, err := c.Post("http://"+l.addr+"/todo", "application/json", strings.NewReader(`{"id":"`+id+`","title":"drain"}`))
		l.mu.Lock()
		switch {
		case err != nil:
			var op *net.OpError
			if errors.As(err, &op) && op.Op == "dial" {
				l.mu.Unlock()
				return // not accepted: the listener is closed
			}
			l.failures = append(l.failures, id+": "+err.Error())
		case resp.StatusCode == http.StatusCreated:
			l.accepted = append(l.accepted, id)
		default:
			l.failures = append(l.failures, fmt.Sprintf("%s: status %d", id, resp.StatusCode))
		}
		l.mu.Unlock()
		if resp != nil {
			resp.Body.Close()
		}
	}
}

// TestSIGTERMDrainsServeRelayAndConsume sends SIGTERM to serve, one of
// two relays and a consumer, each under steady load of todo creates,
// and checks the drains: /readyz turned 503 before each stopped taking
// work, every request serve took was answered, the relay's leases were
// taken by the other relay within its discovery interval rather than
// their expiry, each process exited within its grace period, and the
// read model holds every accepted todo, each applied once.
func TestSIGTERMDrainsServeRelayAndConsume(t *testing.T) {
	ep := integration.Isolate(t)
	bin := eventpipeBinary(t)
	free := func() string { return "127.0.0.1:" + strconv.Itoa(integration.FreePort(t)) }
	ep.HTTPAddr = free()
	env := append(integration.Environ(ep), "EVENTPIPE_AUTH=off", envGracePeriod+"="+drainGrace.String(), envDrainDelay+"="+drainDelay.String())
	mig := exec.Command(bin, "migrate")
	mig.Env = append(os.Environ(), env...)
	if out, err := mig.CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	ready := func(p *proc) func() bool {
		return func() bool { return probeStatus(p.addr, "/readyz") == http.StatusOK }
	}
	relayArgs := func(worker, addr string) []string {
		return []string{"relay", "--streams", eventpipe.RelayEvents, "--worker-id", worker, "--metrics-addr", addr,
			"--lease-duration", relayLease.String(), "--discovery-interval", relayDiscovery.String()}
	}
	serve := startProc(t, bin, env, "serve", ep.HTTPAddr, "serve", "--group", integration.UniqueName(t, "cmds"))
	a := free()
	relayA := startProc(t, bin, env, "relay-a", a, relayArgs("relay-a", a)...)
	b := free()
	relayB := startProc(t, bin, env, "relay-b", b, relayArgs("relay-b", b)...)
	c := free()
	consumer := startProc(t, bin, env, "consume", c, "consume", "todos", "--metrics-addr", c)
	for _, p := range []*proc{serve, relayA, relayB, consumer} {
		waitFor(t, p.name+" /startupz", func() bool { return probeStatus(p.addr, "/startupz") == http.StatusOK })
	}
	for _, p := range []*proc{serve, relayA, relayB} {
		waitFor(t, p.name+" /readyz", ready(p))
	}
	if code := probeStatus(serve.addr, "/livez"); code != http.StatusOK {
		t.Fatalf("serve /livez: %d", code)
	}

	// serve: load until /readyz says not ready, as a load balancer.
	var accepted []string
	{
		l := &load{addr: serve.addr}
		var notReady atomic.Bool
		var wg sync.WaitGroup
		wg.Go(func() { l.run(t.Context(), "serve", func() bool { return !notReady.Load() }) })
		wg.Go(func() {
			for !notReady.Load() {
				if probeStatus(serve.addr, "/readyz") == http.StatusServiceUnavailable {
					notReady.Store(true)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
		waitFor(t, "load on serve", func() bool { return l.n.Load() >= 20 })
		terminate(t, serve)
		notReady.Store(true)
		wg.Wait()
		if len(l.failures) > 0 {
			t.Fatalf("requests serve took without answering them (%d of %d): %v", len(l.failures), l.n.Load(), l.failures)
		}
		t.Logf("serve: %d creates answered 201 before and during its drain", len(l.accepted))
		accepted = append(accepted, l.accepted...)
	}

	// A new serve carries the load for the relay's and the consumer's drains.
	serve = startProc(t, bin, env, "serve-2", ep.HTTPAddr, "serve", "--group", integration.UniqueName(t, "cmds"))
	waitFor(t, "serve-2 /readyz", ready(serve))
	l := &load{addr: serve.addr}
	ctx, stopLoad := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { l.run(ctx, "steady", func() bool { return true }) })
	defer func() { stopLoad(); wg.Wait() }()
	waitFor(t, "consume /readyz", ready(consumer))

	// relay: the owner of the shards drains; the other takes them.
	leases := func() []string {
		_, ls, err := eventpipe.RelayStreamStatus(t.Context(), ep, eventpipe.RelayEvents)
		if err != nil {
			t.Fatal(err)
		}
		var owners []string
		for _, l := range ls {
			if !l.Finished {
				owners = append(owners, l.Owner)
			}
		}
		return owners
	}
	waitFor(t, "leases held", func() bool {
		o := leases()
		return len(o) > 0 && !slices.Contains(o, "")
	})
	victim, other := relayA, relayB
	if !slices.Contains(leases(), "relay-a") {
		victim, other = relayB, relayA
	}
	n0 := l.n.Load()
	waitFor(t, "load during the relay's drain", func() bool { return l.n.Load() >= n0+10 })
	terminate(t, victim)
	waitFor(t, "the other relay holds every shard", func() bool {
		for _, o := range leases() {
			if o != other.name {
				return false
			}
		}
		return true
	})
	takeover := time.Since(victim.exitedAt)
	if takeover >= relayLease {
		t.Fatalf("the shards were taken %v after %s exited: by expiry (lease duration %v), not release", takeover, victim.name, relayLease)
	}
	t.Logf("relay: %s held every shard %v after %s exited (discovery interval %v, lease duration %v)", other.name, takeover.Round(time.Millisecond), victim.name, relayDiscovery, relayLease)

	// consume: drains under load; a new one takes over the group.
	n0 = l.n.Load()
	waitFor(t, "load during the consumer's drain", func() bool { return l.n.Load() >= n0+10 })
	terminate(t, consumer)
	c2 := free()
	consumer = startProc(t, bin, env, "consume-2", c2, "consume", "todos", "--metrics-addr", c2)
	waitFor(t, "consume-2 /readyz", ready(consumer))
	n0 = l.n.Load()
	waitFor(t, "load after the drains", func() bool { return l.n.Load() >= n0+10 })
	stopLoad()
	wg.Wait()
	if len(l.failures) > 0 {
		t.Fatalf("requests serve-2 took without answering them: %v", l.failures)
	}
	accepted = append(accepted, l.accepted...)

	// Every accepted todo in the read model, each applied once.
	pool, err := pgxpool.New(t.Context(), ep.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var rows, once int
	waitFor(t, fmt.Sprintf("the read model holds the %d accepted todos", len(accepted)), func() bool {
		err := pool.QueryRow(t.Context(), `SELECT count(*), count(*) FILTER (WHERE version = 1 AND apply_count = 1) FROM todos WHERE todo_id = ANY($1)`, accepted).Scan(&rows, &once)
		if err != nil {
			t.Fatal(err)
		}
		return rows == len(accepted)
	})
	if once != rows {
		t.Fatalf("%d of %d todos were applied more than once or created twice", rows-once, rows)
	}
	t.Logf("read model: all %d accepted todos, each applied once", rows)
}
