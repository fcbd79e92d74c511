package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
)

// EnvChild is the environment variable that tells a test binary started
// by StartChild which main (of RunChild's) to run.
const EnvChild = "EVENTPIPE_TEST_CHILD"

// Main is the main of a child process. It runs until ctx is done (the
// child got SIGTERM or an interrupt) or its work is; args are the
// child's arguments (ChildConfig.Args).
type Main func(ctx context.Context, args []string) error

// RunChild turns the test binary into a child process when StartChild
// started it as one: it runs the main of mains that EnvChild names and
// exits, with status 0 when the main returns nil or the context's error,
// and 1 after printing any other error to stderr. It returns at once in
// the test process itself, and when EnvChild names a main mains lacks
// (another RunChild call may have it). Call it first in TestMain:
//
//	func TestMain(m *testing.M) {
//		integration.RunChild(map[string]integration.Main{"consume": consume})
//		os.Exit(m.Run())
//	}
//
// The args of the main are the command line after "--" (StartChild puts
// it there), or all of it when there is none.
func RunChild(mains map[string]Main) {
	name := os.Getenv(EnvChild)
	main, ok := mains[name]
	if name == "" || !ok {
		return
	}
	args := os.Args[1:]
	if i := slices.Index(args, "--"); i >= 0 {
		args = args[i+1:]
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err := main(ctx, args)
	cancelled := ctx.Err()
	stop()
	if err != nil && (cancelled == nil || !errors.Is(err, cancelled)) {
		fmt.Fprintf(os.Stderr, "%s child: %v\n", name, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// ChildConfig configures StartChild. Exactly one of Main and Program is
// set.
type ChildConfig struct {
	// Main names the main (see RunChild) of the test binary started
	// again as the child, with -test.run=^$ so that it runs no test.
	Main string
	// Program is an executable to run instead: a command of the module,
	// say, built by the test with `go build`.
	Program string
	// Args are the child's arguments.
	Args []string
	// Env are variables added to the test's environment for the child
	// (NAME=value; a later one wins), such as Environ's.
	Env []string
	// Output receives the child's stdout and stderr (default os.Stderr,
	// so that `go test -v` shows them).
	Output io.Writer
	// Ready, when set, tells whether the child is ready to work (say, a
	// health check of its listen address): each start waits until it
	// returns nil, calling it every 100 ms.
	Ready func(ctx context.Context) error
	// ReadyTimeout bounds that wait (default HangAfter(): a child that
	// is slow to start on a loaded machine is no failure, one that never
	// gets ready is).
	ReadyTimeout time.Duration
}

func (c *ChildConfig) setDefaults() {
	if c.Output == nil {
		c.Output = os.Stderr
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = HangAfter()
	}
}

// Validate reports the first invalid field.
func (c ChildConfig) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("integration: ChildConfig: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch {
	case c.Main == "" && c.Program == "":
		return bad("Main", "is empty and so is Program: set one")
	case c.Main != "" && c.Program != "":
		return bad("Program", "%q is set beside Main %q: set one", c.Program, c.Main)
	case c.ReadyTimeout < 0:
		return bad("ReadyTimeout", "%v is negative", c.ReadyTimeout)
	}
	return nil
}

// Child is a child process of a test, started by StartChild. Its
// methods fail the test they were started for; they are safe to call
// from one goroutine at a time.
type Child struct {
	cfg  ChildConfig
	tb   testing.TB
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd was reaped
	err  error         // cmd.Wait's, once done
}

// StartChild starts a child process (ChildConfig), waits until it is
// ready, and kills it with SIGKILL when tb ends, unless it exited
// before.
func StartChild(tb testing.TB, cfg ChildConfig) *Child {
	tb.Helper()
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		tb.Fatal(err)
	}
	c := &Child{cfg: cfg, tb: tb}
	tb.Cleanup(c.Kill)
	c.Start()
	return c
}

// name describes the child in failures.
func (c *Child) name() string {
	if c.cfg.Main != "" {
		return fmt.Sprintf("child %q", c.cfg.Main)
	}
	return "child " + c.cfg.Program
}

// Start starts the child again after it was killed or exited, with the
// same configuration, and waits until it is ready; it fails the test when
// the child is running, does not start, or exits before it is ready.
func (c *Child) Start() {
	c.tb.Helper()
	c.mu.Lock()
	if c.done != nil && !isClosed(c.done) {
		pid := c.cmd.Process.Pid
		c.mu.Unlock()
		c.tb.Fatalf("start %s: it is running (pid %d)", c.name(), pid)
	}
	var cmd *exec.Cmd
	if c.cfg.Main != "" {
		cmd = exec.Command(os.Args[0], append([]string{"-test.run=^$", "--"}, c.cfg.Args...)...)
		cmd.Env = append(os.Environ(), EnvChild+"="+c.cfg.Main)
	} else {
		cmd = exec.Command(c.cfg.Program, c.cfg.Args...)
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, c.cfg.Env...)
	cmd.Stdout, cmd.Stderr = c.cfg.Output, c.cfg.Output
	if err := cmd.Start(); err != nil {
		c.mu.Unlock()
		c.tb.Fatalf("start %s: %v", c.name(), err)
	}
	done := make(chan struct{})
	c.cmd, c.done, c.err = cmd, done, nil
	go func() {
		err := cmd.Wait()
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		close(done)
	}()
	c.mu.Unlock()
	if c.cfg.Ready != nil {
		c.waitReady(done)
	}
}

// waitReady polls Ready until it returns nil; it fails the test when the
// child exits first or the timeout passes.
func (c *Child) waitReady(done chan struct{}) {
	c.tb.Helper()
	deadline := time.Now().Add(c.cfg.ReadyTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), max(time.Until(deadline), time.Second))
		err := c.cfg.Ready(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-done:
			hint := ""
			if c.cfg.Main != "" {
				hint = fmt.Sprintf(" (does TestMain call integration.RunChild with a main %q first?)", c.cfg.Main)
			}
			c.tb.Fatalf("%s exited before it was ready: %v%s; last readiness check: %v", c.name(), c.exitErr(), hint, err)
		default:
		}
		if time.Now().After(deadline) {
			c.tb.Fatalf("%s (pid %d) not ready after %v: %v", c.name(), c.Pid(), c.cfg.ReadyTimeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Pid is the process id of the child (of its latest start).
func (c *Child) Pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// Running reports whether the child (of its latest start) has not exited.
func (c *Child) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done != nil && !isClosed(c.done)
}

// Kill sends SIGKILL to the child and waits until it is gone: no
// shutdown code of its runs. It does nothing when the child is not
// running.
func (c *Child) Kill() {
	c.mu.Lock()
	cmd, done := c.cmd, c.done
	c.mu.Unlock()
	if done == nil || isClosed(done) {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// Restart kills the child (Kill) and starts it again (Start).
func (c *Child) Restart() {
	c.tb.Helper()
	c.Kill()
	c.Start()
}

// Signal sends sig to the running child (say, syscall.SIGTERM, for a
// graceful stop that Wait then waits for).
func (c *Child) Signal(sig os.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil || isClosed(c.done) {
		return fmt.Errorf("signal %s: it is not running", c.name())
	}
	if err := c.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal %s: %w", c.name(), err)
	}
	return nil
}

// Wait waits up to timeout for the child to exit and returns how it
// exited: nil for status 0, an *exec.ExitError otherwise. It fails the
// test when the child is still running after timeout. To wait for an
// exit that is due to come, however slow the machine, pass HangAfter().
func (c *Child) Wait(timeout time.Duration) error {
	c.tb.Helper()
	c.mu.Lock()
	done := c.done
	c.mu.Unlock()
	if done == nil {
		c.tb.Fatalf("wait for %s: it never started", c.name())
	}
	select {
	case <-done:
		return c.exitErr()
	case <-time.After(timeout):
		c.tb.Fatalf("%s (pid %d) still running after %v", c.name(), c.Pid(), timeout)
		return nil
	}
}

// exitErr is how the child's latest start ended.
func (c *Child) exitErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
