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

	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/internal/esserver"
	"github.com/eventpipe/eventpipe/internal/kafkabroker"
	"github.com/eventpipe/eventpipe/internal/probe"
)

const (
	envKafkaBrokerChild = "EVENTPIPE_TESTENV_KAFKA_BROKER_CHILD"
	envESServerChild    = "EVENTPIPE_TESTENV_ES_SERVER_CHILD"
)

// RunChildIfRequested turns the test binary into a child process when a
// test started it as one: the Kafka broker (with the flags of `eventpipe
// stack kafka-broker`) or the Elasticsearch-API server (`eventpipe stack
// es-server`). Call it first in TestMain; it does not return in a child.
func RunChildIfRequested() {
	var (
		name string
		fs   = pflag.NewFlagSet("child", pflag.ContinueOnError)
		run  func(context.Context) error
	)
	switch {
	case os.Getenv(envKafkaBrokerChild) == "1":
		var cfg kafkabroker.Config
		cfg.BindFlags(fs)
		name, run = "kafka broker child", func(ctx context.Context) error { return kafkabroker.Run(ctx, cfg) }
	case os.Getenv(envESServerChild) == "1":
		var cfg esserver.Config
		cfg.BindFlags(fs)
		name, run = "es-server child", func(ctx context.Context) error { return esserver.Run(ctx, cfg) }
	default:
		return
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
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

// ESServerCommand returns the command and extra environment that start
// this test binary as an Elasticsearch-API server child (see
// RunChildIfRequested); the caller appends the server flags.
func ESServerCommand() (cmd []string, env []string) {
	return []string{os.Args[0]}, []string{envESServerChild + "=1"}
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
	// partitions of auto-created topics (0 means 3)
	partitions int
	// args are extra broker flags, env extra environment variables
	args, env []string
	// security is how the health check connects
	security kafka.Security
}

// KafkaBrokerConfig configures StartKafkaBrokerWithConfig.
type KafkaBrokerConfig struct {
	// DataDir is the folder the broker persists to. Required.
	DataDir string
	// Partitions is the partition count of auto-created topics (default 3).
	Partitions int
	// Args are further flags of `eventpipe stack kafka-broker`, e.g.
	// --no-group-guard or the TLS and SASL flags.
	Args []string
	// Env are further environment variables of the child (e.g. the
	// file of its SASL password).
	Env []string
	// Security is how the health check connects (the broker's TLS and
	// SASL).
	Security kafka.Security
}

func (c *KafkaBrokerConfig) setDefaults() {
	if c.Partitions == 0 {
		c.Partitions = 3
	}
}

// Validate reports the first invalid field.
func (c KafkaBrokerConfig) Validate() error {
	if c.DataDir == "" {
		return fmt.Errorf("testenv: KafkaBrokerConfig.DataDir is empty")
	}
	if c.Partitions < 1 {
		return fmt.Errorf("testenv: KafkaBrokerConfig.Partitions %d: must be at least 1", c.Partitions)
	}
	return nil
}

// StartKafkaBrokerWithConfig is StartKafkaBroker with more settings: it
// starts a broker child on a free port, waits until it answers, and kills
// it when tb ends.
func StartKafkaBrokerWithConfig(tb testing.TB, cfg KafkaBrokerConfig) *KafkaBrokerProcess {
	tb.Helper()
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		tb.Fatal(err)
	}
	b := &KafkaBrokerProcess{Addr: "127.0.0.1:" + strconv.Itoa(FreePort(tb)), DataDir: cfg.DataDir, tb: tb, partitions: cfg.Partitions, args: cfg.Args,
		env: cfg.Env, security: cfg.Security}
	b.Start()
	tb.Cleanup(func() { b.Kill() })
	return b
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
	partitions := b.partitions
	if partitions == 0 {
		partitions = 3
	}
	cmd := exec.Command(args[0], append([]string{"--addr", b.Addr, "--data-dir", b.DataDir, "--partitions", strconv.Itoa(partitions)}, b.args...)...)
	cmd.Env = append(append(os.Environ(), env...), b.env...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		b.tb.Fatalf("start kafka broker child: %v", err)
	}
	b.cmd = cmd
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := probe.Kafka(context.Background(), []string{b.Addr}, b.security)
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
