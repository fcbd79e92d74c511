package testservers

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/spf13/pflag"

	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/esserver"
	"github.com/eventpipe/eventpipe/dev/kafkabroker"
	"github.com/eventpipe/eventpipe/dev/kmsserver"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/internal/probe"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// The mains of the children RunChildIfRequested runs (integration.RunChild).
const (
	mainKafkaBroker = "eventpipe.kafka-broker"
	mainESServer    = "eventpipe.es-server"
	mainKMSServer   = "eventpipe.kms-server"
)

// RunChildIfRequested turns the test binary into a child process when a
// test started it as one: the Kafka broker (with the flags of `eventpipe
// stack kafka-broker`), the Elasticsearch-API server (`eventpipe stack
// es-server`) or the KMS (`eventpipe stack kms-server`). Call it first in TestMain; it does not return in a child.
func RunChildIfRequested() {
	integration.RunChild(map[string]integration.Main{
		mainKafkaBroker: func(ctx context.Context, args []string) error {
			var cfg kafkabroker.Config
			if err := parseFlags(&cfg, args); err != nil {
				return err
			}
			return kafkabroker.Run(ctx, cfg)
		},
		mainESServer: func(ctx context.Context, args []string) error {
			var cfg esserver.Config
			if err := parseFlags(&cfg, args); err != nil {
				return err
			}
			return esserver.Run(ctx, cfg)
		},
		mainKMSServer: func(ctx context.Context, args []string) error {
			var cfg kmsserver.Config
			if err := parseFlags(&cfg, args); err != nil {
				return err
			}
			return kmsserver.Run(ctx, cfg)
		},
	})
}

// parseFlags binds cfg's flags and parses args into them.
func parseFlags(cfg interface{ BindFlags(*pflag.FlagSet) }, args []string) error {
	fs := pflag.NewFlagSet("child", pflag.ContinueOnError)
	cfg.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("flags: %w", err)
	}
	return nil
}

// KafkaBrokerCommand returns the command and extra environment that start
// this test binary as a Kafka broker child (see RunChildIfRequested); the
// caller appends the broker flags.
func KafkaBrokerCommand() (cmd []string, env []string) {
	return []string{os.Args[0]}, []string{integration.EnvChild + "=" + mainKafkaBroker}
}

// ESServerCommand returns the command and extra environment that start
// this test binary as an Elasticsearch-API server child (see
// RunChildIfRequested); the caller appends the server flags.
func ESServerCommand() (cmd []string, env []string) {
	return []string{os.Args[0]}, []string{integration.EnvChild + "=" + mainESServer}
}

// KMSServerCommand returns the command and extra environment that start
// this test binary as a KMS child (see RunChildIfRequested); the caller
// appends the server flags.
func KMSServerCommand() (cmd []string, env []string) {
	return []string{os.Args[0]}, []string{integration.EnvChild + "=" + mainKMSServer}
}

// KafkaBrokerProcess is a Kafka broker running as a child process of the
// test, so a test can kill -9 it and start it again on the same data.
type KafkaBrokerProcess struct {
	Addr    string
	DataDir string
	child   *integration.Child
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
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("testenv: KafkaBrokerConfig: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if c.DataDir == "" {
		return bad("DataDir", "is empty")
	}
	if c.Partitions < 1 {
		return bad("Partitions", "%d: must be at least 1", c.Partitions)
	}
	return nil
}

// StartKafkaBrokerWithConfig is StartKafkaBroker with more settings: it
// starts a broker child on a free port, waits until it answers, and kills
// it when tb ends.
func StartKafkaBrokerWithConfig(tb testing.TB, cfg KafkaBrokerConfig) *KafkaBrokerProcess {
	tb.Helper()
	testenv.Integration(tb)
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		tb.Fatal(err)
	}
	b := &KafkaBrokerProcess{Addr: "127.0.0.1:" + strconv.Itoa(integration.FreePort(tb)), DataDir: cfg.DataDir, tb: tb, partitions: cfg.Partitions, args: cfg.Args,
		env: cfg.Env, security: cfg.Security}
	b.Start()
	tb.Cleanup(func() { b.Kill() })
	return b
}

// StartKafkaBroker starts a broker child on a free port persisting to
// dataDir, waits until it answers, and kills it when tb ends.
func StartKafkaBroker(tb testing.TB, dataDir string) *KafkaBrokerProcess {
	tb.Helper()
	b := &KafkaBrokerProcess{Addr: "127.0.0.1:" + strconv.Itoa(integration.FreePort(tb)), DataDir: dataDir, tb: tb}
	b.Start()
	tb.Cleanup(func() { b.Kill() })
	return b
}

// Start (re)starts the broker on the same address and data folder and
// waits until it answers a Metadata request.
func (b *KafkaBrokerProcess) Start() {
	b.tb.Helper()
	if b.child != nil {
		b.child.Start()
		return
	}
	partitions := b.partitions
	if partitions == 0 {
		partitions = 3
	}
	b.child = integration.StartChild(b.tb, integration.ChildConfig{
		Main: mainKafkaBroker,
		Args: append([]string{"--addr", b.Addr, "--data-dir", b.DataDir, "--partitions", strconv.Itoa(partitions)}, b.args...),
		Env:  b.env,
		Ready: func(ctx context.Context) error {
			return probe.Kafka(ctx, []string{b.Addr}, b.security)
		},
	})
}

// Kill sends SIGKILL to the broker and reaps it; no shutdown code runs.
func (b *KafkaBrokerProcess) Kill() {
	if b.child != nil {
		b.child.Kill()
	}
}
