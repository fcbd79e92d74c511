package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/eventpipe/eventpipe/internal/kafkabroker"
	"github.com/eventpipe/eventpipe/internal/probe"
)

const envKafkaBrokerChild = "EVENTPIPE_TESTENV_KAFKA_BROKER_CHILD"

// RunChildIfRequested turns the test binary into a child process when a
// test started it as one (currently: the Kafka broker, with the flags of
// `eventpipe stack kafka-broker`). Call it first in TestMain; it does not
// return in a child.
func RunChildIfRequested() {
	if os.Getenv(envKafkaBrokerChild) != "1" {
		return
	}
	var cfg kafkabroker.Config
	fs := pflag.NewFlagSet("kafka-broker", pflag.ContinueOnError)
	cfg.BindFlags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kafka broker child:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := kafkabroker.Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "kafka broker child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// KafkaBrokerCommand returns the command and extra environment that start
// this test binary as a Kafka broker child (see RunChildIfRequested); the
// caller appends the broker flags.
func KafkaBrokerCommand() (cmd []string, env []string) {
	return []string{os.Args[0]}, []string{envKafkaBrokerChild + "=1"}
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// KafkaBrokerProcess is a Kafka broker running as a child process of the
// test, so a test can kill -9 it and start it again on the same data.
type KafkaBrokerProcess struct {
	Addr    string
	DataDir string
	cmd     *exec.Cmd
	tb      testing.TB
}

// StartKafkaBroker starts a broker child on a free port persisting to
// dataDir, waits until it answers, and kills it when tb ends.
func StartKafkaBroker(tb testing.TB, dataDir string) *KafkaBrokerProcess {
	tb.Helper()
	b := &KafkaBrokerProcess{Addr: "127.0.0.1:" + strconv.Itoa(FreePort(tb)), DataDir: dataDir, tb: tb}
	b.Start()
	tb.Cleanup(func() { b.Kill() })
	return b
}

// Start (re)starts the broker on the same address and data folder and
// waits until it answers a Metadata request.
func (b *KafkaBrokerProcess) Start() {
	b.tb.Helper()
	args, env := KafkaBrokerCommand()
	cmd := exec.Command(args[0], "--addr", b.Addr, "--data-dir", b.DataDir, "--partitions", "3")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		b.tb.Fatalf("start kafka broker child: %v", err)
	}
	b.cmd = cmd
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := probe.Kafka(context.Background(), []string{b.Addr})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			b.tb.Fatalf("kafka broker child at %s not healthy: %v", b.Addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Kill sends SIGKILL to the broker and reaps it; no shutdown code runs.
func (b *KafkaBrokerProcess) Kill() {
	if b.cmd == nil || b.cmd.Process == nil {
		return
	}
	_ = b.cmd.Process.Signal(syscall.SIGKILL)
	_, _ = b.cmd.Process.Wait()
	b.cmd = nil
}
