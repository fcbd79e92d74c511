package stack

import (
	"context"
	"os"
	"strings"
	"syscall"

	"github.com/eventpipe/eventpipe/dev/kafkabroker"
	"github.com/eventpipe/eventpipe/endpoints"
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
	}
	secure := s.cfg.Secure
	files := secureFiles(s.cfg.Dir)
	c.health = func(ctx context.Context) error {
		sec := s.cfg.Endpoints.Kafka // the environment's, for a broker the stack did not start
		if secure && c.managed {
			var err error
			if sec, err = kafkaSecurity(files); err != nil {
				return err
			}
		}
		return probe.Kafka(ctx, brokers, sec)
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
		env := append([]string{}, s.cfg.KafkaBrokerEnv...)
		if secure {
			// TLS and SCRAM-SHA-512 on the usual port; the password
			// goes by file, never on the command line.
			args = append(args,
				"--tls-cert-file", files.ServerCert,
				"--tls-key-file", files.ServerKey,
				"--tls-ca-file", files.CA,
				"--sasl-mechanism", SecureKafkaMechanism,
				"--sasl-username", SecureKafkaUser)
			env = append(env, kafkabroker.EnvSASLPasswordFile+"="+files.KafkaPassword)
		}
		return &processSpec{path: s.cfg.KafkaBrokerCommand[0], args: args, env: env}, nil
	}
	return c
}
