package integration_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestMain runs the children of the tests below.
func TestMain(m *testing.M) {
	integration.RunChild(map[string]integration.Main{
		"listen":  listenMain,
		"fail":    func(context.Context, []string) error { return errors.New("it broke") },
		"count":   countMain,
		"consume": consume,
	})
	os.Exit(m.Run())
}

// listenMain accepts connections on args[0] until it is stopped.
func listenMain(ctx context.Context, args []string) error {
	l, err := net.Listen("tcp", args[0])
	if err != nil {
		return err
	}
	go func() { <-ctx.Done(); l.Close() }()
	for {
		c, err := l.Accept()
		if err != nil {
			return ctx.Err()
		}
		c.Close()
	}
}

// countMain appends a line to the file args[0] every 10 ms until it
// holds args[1] lines, resuming from where a killed child stopped.
func countMain(ctx context.Context, args []string) error {
	total, err := strconv.Atoi(args[1])
	if err != nil {
		return err
	}
	f, err := os.OpenFile(args[0], os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	for n := lines(args[0]); n < total; n++ {
		if _, err := fmt.Fprintln(f, n); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

func lines(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		n++
	}
	return n
}

func dial(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	}
}

func TestChildIsKilledRestartedAndWaitedFor(t *testing.T) {
	addr := "127.0.0.1:" + strconv.Itoa(integration.FreePort(t))
	c := integration.StartChild(t, integration.ChildConfig{Main: "listen", Args: []string{addr}, Ready: dial(addr)})
	first := c.Pid()
	if !c.Running() || first == 0 {
		t.Fatalf("running %v, pid %d after StartChild", c.Running(), first)
	}
	c.Kill()
	if c.Running() || dial(addr)(context.Background()) == nil {
		t.Fatal("the child still runs after Kill")
	}
	err := c.Wait(integration.HangAfter())
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("a killed child exited with %v, want SIGKILL", err)
	}
	c.Restart()
	if c.Pid() == first || dial(addr)(context.Background()) != nil {
		t.Fatalf("restarted child: pid %d (was %d), not listening", c.Pid(), first)
	}
	// SIGTERM cancels the main's context: a clean exit.
	if err := c.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(integration.HangAfter()); err != nil {
		t.Fatalf("child stopped by SIGTERM: %v, want status 0", err)
	}
}

func TestChildThatFailsSaysWhy(t *testing.T) {
	var out bytes.Buffer
	c := integration.StartChild(t, integration.ChildConfig{Main: "fail", Output: &out})
	var exit *exec.ExitError
	if err := c.Wait(integration.HangAfter()); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("failing child: %v, want exit status 1", err)
	}
	if !strings.Contains(out.String(), `fail child: it broke`) {
		t.Errorf("failing child printed %q", out.String())
	}
}

func TestKillRepeatedlyKillsAChildMidWork(t *testing.T) {
	file := filepath.Join(t.TempDir(), "count")
	const total = 150
	c := integration.StartChild(t, integration.ChildConfig{Main: "count", Args: []string{file, strconv.Itoa(total)}})
	at := integration.KillRepeatedly(t, c, func() int64 { return int64(lines(file)) }, total, 3)
	if len(at) != 3 {
		t.Fatalf("kills at %v, want 3", at)
	}
	if err := c.Wait(integration.HangAfter()); err != nil {
		t.Fatalf("the last child: %v", err)
	}
}

func TestChildConfigValidate(t *testing.T) {
	for _, cfg := range []integration.ChildConfig{{}, {Main: "a", Program: "b"}, {Main: "a", ReadyTimeout: -1}} {
		if cfg.Validate() == nil {
			t.Errorf("%+v validated", cfg)
		}
	}
}

func TestUniqueNameFitsEveryServiceAndDiffers(t *testing.T) {
	long := strings.Repeat("x", 100)
	for _, prefix := range []string{"events", "ns", long} {
		a, b := integration.UniqueName(t, prefix), integration.UniqueName(t, prefix)
		if a == b || len(a) > integration.MaxNameLen || strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != "" {
			t.Errorf("UniqueName(%q): %q and %q", prefix, a, b)
		}
	}
}

// TestUnreachableServicesFailLoudly runs TestStackChild in a child test
// binary, without -short, against closed ports: it must fail (never
// skip), naming every service, its variable and how to start the stack.
// Under -short the same call skips.
func TestUnreachableServicesFailLoudly(t *testing.T) {
	closed := strconv.Itoa(integration.FreePort(t))
	var out bytes.Buffer
	c := integration.StartChild(t, integration.ChildConfig{
		Program: os.Args[0],
		Args:    []string{"-test.run=^TestStackChild$", "-test.short=false", "-test.v", "-test.count=1"},
		Env: []string{"EVENTPIPE_TEST_STACK_CHILD=1",
			"EVENTPIPE_DYNAMODB_ENDPOINT=http://127.0.0.1:" + closed, "EVENTPIPE_KAFKA_BROKERS=127.0.0.1:" + closed,
			"EVENTPIPE_POSTGRES_URL=postgres://x@127.0.0.1:" + closed + "/x?connect_timeout=2", "ELASTICSEARCH_URL=http://127.0.0.1:" + closed},
		Output: &out,
	})
	if err := c.Wait(integration.HangAfter()); err == nil {
		t.Fatalf("the stack check passed against closed ports:\n%s", out.String())
	}
	for _, want := range []string{"--- FAIL: TestStackChild", "DynamoDB is not reachable", "Kafka is not reachable", "Postgres is not reachable",
		"Elasticsearch is not reachable", "EVENTPIPE_DYNAMODB_ENDPOINT", "EVENTPIPE_KAFKA_BROKERS", "EVENTPIPE_POSTGRES_URL", "ELASTICSEARCH_URL",
		"`eventpipe stack up`"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the failure does not say %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "SKIP") {
		t.Errorf("the stack check skipped:\n%s", out.String())
	}
}

// TestStackChild is the child of TestUnreachableServicesFailLoudly.
func TestStackChild(t *testing.T) {
	if os.Getenv("EVENTPIPE_TEST_STACK_CHILD") == "" {
		return // the child of TestUnreachableServicesFailLoudly; nothing to do here
	}
	integration.Stack(t)
}
