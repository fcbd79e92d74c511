package stack

import (
	"context"
	"os"
	"strings"
	"syscall"

	"github.com/eventpipe/eventpipe/internal/endpoints"
	"github.com/eventpipe/eventpipe/internal/probe"
)

// Environment knobs of the stack's Kafka broker.
const (
	EnvKafkaPartitions   = "EVENTPIPE_KAFKA_PARTITIONS"     // default partitions of auto-created topics (12)
	EnvKafkaNoAutoCreate = "EVENTPIPE_KAFKA_NO_AUTO_CREATE" // non-empty: topics must be created explicitly
	EnvKafkaSyncWrites   = "EVENTPIPE_KAFKA_SYNC_WRITES"    // non-empty: fsync every batch
)

func (s *Stack) kafka() *component {
	brokers := s.cfg.Endpoints.KafkaBrokers
	addr := brokers[0]
	host, _, loopback := loopbackHostPort(addr)
	c := &component{
		name:   "kafka",
		addr:   strings.Join(brokers, ","),
		envVar: endpoints.EnvKafkaBrokers,
		// kfake listens on 127.0.0.1 only; one broker.
		managed:    loopback && host == "127.0.0.1" && len(brokers) == 1,
		marker:     s.dataDir("kafka"),
		stopSignal: syscall.SIGTERM,
		health:     func(ctx context.Context) error { return probe.Kafka(ctx, brokers) },
	}
	c.prepare = func(context.Context) error { return os.MkdirAll(s.dataDir("kafka"), 0o755) }
	c.command = func() (*processSpec, error) {
		args := append([]string{}, s.cfg.KafkaBrokerCommand[1:]...)
		args = append(args, "--addr", addr, "--data-dir", s.dataDir("kafka"))
		if p := os.Getenv(EnvKafkaPartitions); p != "" {
			args = append(args, "--partitions", p)
		}
		if os.Getenv(EnvKafkaNoAutoCreate) != "" {
			args = append(args, "--no-auto-create-topics")
		}
		if os.Getenv(EnvKafkaSyncWrites) != "" {
			args = append(args, "--sync-writes")
		}
		return &processSpec{path: s.cfg.KafkaBrokerCommand[0], args: args, env: s.cfg.KafkaBrokerEnv}, nil
	}
	return c
}
