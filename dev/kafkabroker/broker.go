// Package kafkabroker runs a single-node Kafka-protocol broker built from
// franz-go's kfake, persisted to a data directory so that topics, records and
// committed consumer-group offsets survive a restart or a kill -9. It is the
// local stack's Kafka; users with Docker or in production run Apache Kafka.
package kafkabroker

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/eventstore"
)

// Config configures the broker.
type Config struct {
	// Addr is the 127.0.0.1:port to listen on (default 127.0.0.1:9092).
	Addr string
	// DataDir holds the broker's persisted state. Required.
	DataDir string
	// Partitions is the partition count of auto-created topics (default 12).
	Partitions int
	// DisableAutoCreateTopics turns off topic auto-creation on produce and
	// metadata requests (on by default, as in a development Kafka).
	DisableAutoCreateTopics bool
	// SyncWrites fsyncs every produced batch. Without it data is written to
	// the OS page cache at once, which survives a process kill but not a
	// machine crash.
	SyncWrites bool
	// DisableGroupGuard serves kfake's classic consumer groups without
	// the guard that works around their crash-recovery defects (see
	// groupguard.go). Only for reproducing those defects.
	DisableGroupGuard bool
	// TLSCertFile and TLSKeyFile are the PEM server certificate and key;
	// setting them makes the listener TLS only.
	TLSCertFile, TLSKeyFile string
	// TLSCAFile is the PEM CA that issued TLSCertFile. The broker's own
	// clients (the group guard) trust it; when empty they trust the
	// certificates in TLSCertFile.
	TLSCAFile string
	// SASLMechanism, when set, requires every client to authenticate:
	// SASLPlain, SASLScramSHA256 or SASLScramSHA512.
	SASLMechanism string
	// SASLUsername is the broker's one SASL user, a superuser. Users an
	// earlier run saved in DataDir are dropped at start, so the folder
	// of a broker that ran without SASL (or with another password)
	// serves this user.
	SASLUsername string
	// SASLPassword is that user's password. It has no flag: Run reads it
	// from the file named by EnvSASLPasswordFile when it is empty.
	SASLPassword string
	// Logger receives broker warnings and errors (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Addr == "" {
		c.Addr = endpoints.DefaultKafkaBrokers
	}
	if c.Partitions == 0 {
		c.Partitions = 12
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	host, port, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return badConfig("Addr", "%q: %v", c.Addr, err)
	}
	if host != "127.0.0.1" {
		return badConfig("Addr", "%q: host must be 127.0.0.1 (the broker is for local use and listens on loopback only)", c.Addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return badConfig("Addr", "%q: invalid port", c.Addr)
	}
	if c.DataDir == "" {
		return badConfig("DataDir", "is empty: it is required (without it nothing survives a restart)")
	}
	if c.Partitions < 1 {
		return badConfig("Partitions", "%d: must be at least 1", c.Partitions)
	}
	return c.validateSecurity()
}

// badConfig is Config.Validate's refusal of field.
func badConfig(field, format string, args ...any) error {
	return fmt.Errorf("kafkabroker: Config: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
}

// Run starts the broker and blocks until ctx is cancelled, then closes it,
// which flushes in-flight offset commits to DataDir. The returned error is
// nil after a clean shutdown.
//
// With TLSCertFile the listener speaks TLS only; with SASLMechanism every
// client must authenticate as SASLUsername (the password is read from
// the file named by EnvSASLPasswordFile when SASLPassword is empty).
func Run(ctx context.Context, cfg Config) error {
	cfg.setDefaults()
	if err := cfg.passwordFromEnv(); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	var serverTLS *tls.Config
	if cfg.tlsOn() {
		var err error
		if serverTLS, err = cfg.serverTLS(); err != nil {
			return err
		}
	}
	clientOpts, err := cfg.clientOpts()
	if err != nil {
		return err
	}
	_, portStr, _ := net.SplitHostPort(cfg.Addr)
	port, _ := strconv.Atoi(portStr)

	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(port),
		kfake.DataDir(cfg.DataDir),
		kfake.DefaultNumPartitions(cfg.Partitions),
		kfake.WithLogger(slogAdapter{cfg.Logger}),
	}
	if !cfg.DisableAutoCreateTopics {
		opts = append(opts, kfake.AllowAutoTopicCreation())
	}
	if cfg.SyncWrites {
		opts = append(opts, kfake.SyncWrites())
	}
	if cfg.saslOn() {
		opts = append(opts, kfake.EnableSASL(), kfake.Superuser(cfg.SASLMechanism, cfg.SASLUsername, cfg.SASLPassword))
	}
	var guard *groupGuard
	if !cfg.DisableGroupGuard {
		// The guard wraps the TLS listener itself, so that it taps the
		// plaintext Kafka frames; kfake must then not wrap it again.
		if guard, err = newGroupGuard(groupGuardConfig{Logger: cfg.Logger, TLS: serverTLS, ClientOpts: clientOpts}); err != nil {
			return err
		}
		opts = append(opts, kfake.ListenFn(guard.listen))
	} else if serverTLS != nil {
		opts = append(opts, kfake.TLS(serverTLS))
	}
	if err := forgetPersistedUsers(cfg.DataDir); err != nil {
		return err
	}
	recovered, err := recoverTopics(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("kafkabroker: recover topics in %s: %w", cfg.DataDir, err)
	}
	if len(recovered) > 0 {
		cfg.Logger.Warn("recovered topics missing from the topic list after an unclean stop", "topics", recovered)
	}
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("kafkabroker: start on %s with data dir %s: %w", cfg.Addr, cfg.DataDir, err)
	}
	cfg.Logger.Info("kafka broker listening", "addrs", cluster.ListenAddrs(), "data_dir", cfg.DataDir,
		"partitions", cfg.Partitions, "auto_create_topics", !cfg.DisableAutoCreateTopics, "sync_writes", cfg.SyncWrites,
		"group_guard", guard != nil, "tls", cfg.tlsOn(), "sasl_mechanism", cfg.SASLMechanism, "sasl_user", cfg.SASLUsername)
	guardDone := make(chan struct{})
	guardCtx, stopGuard := context.WithCancel(ctx)
	go func() {
		defer close(guardDone)
		if guard == nil {
			return
		}
		if err := guard.run(guardCtx, cluster.ListenAddrs()[0]); err != nil {
			cfg.Logger.Error("consumer-group guard stopped; groups recover from crashes only as kfake does", "err", err)
		}
	}()
	<-ctx.Done()
	stopGuard()
	<-guardDone
	cluster.Close()
	cfg.Logger.Info("kafka broker stopped")
	return nil
}

type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Logf(level kfake.LogLevel, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	switch level {
	case kfake.LogLevelError:
		a.l.Error(msg, "component", "kfake")
	case kfake.LogLevelWarn:
		a.l.Warn(msg, "component", "kfake")
	case kfake.LogLevelInfo:
		a.l.Info(msg, "component", "kfake")
	default:
		a.l.Debug(msg, "component", "kfake")
	}
}

// BindFlags registers the broker's command-line flags on fs, writing into
// c. `eventpipe stack kafka-broker` and test harnesses share it.
func (c *Config) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Addr, "addr", endpoints.DefaultKafkaBrokers, "listen address (127.0.0.1:port)")
	fs.StringVar(&c.DataDir, "data-dir", "", "folder persisting topics, records and committed offsets (required)")
	fs.IntVar(&c.Partitions, "partitions", 12, "partitions of auto-created topics")
	fs.BoolVar(&c.DisableAutoCreateTopics, "no-auto-create-topics", false, "require topics to be created explicitly")
	fs.BoolVar(&c.SyncWrites, "sync-writes", false, "fsync every produced batch (survives a machine crash, slower)")
	fs.BoolVar(&c.DisableGroupGuard, "no-group-guard", false, "serve consumer groups without the guard against kfake's crash-recovery defects (to reproduce them)")
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", "", "PEM server certificate; with --tls-key-file the listener speaks TLS only")
	fs.StringVar(&c.TLSKeyFile, "tls-key-file", "", "PEM key of --tls-cert-file")
	fs.StringVar(&c.TLSCAFile, "tls-ca-file", "", "PEM CA that issued --tls-cert-file, trusted by the broker's own clients (default: the certificates in --tls-cert-file)")
	fs.StringVar(&c.SASLMechanism, "sasl-mechanism", "", "require SASL authentication: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (password from the file named by "+EnvSASLPasswordFile+")")
	fs.StringVar(&c.SASLUsername, "sasl-username", "", "the SASL user (a superuser)")
}
