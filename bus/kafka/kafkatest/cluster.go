package kafkatest

import (
	"crypto/tls"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/eventpipe/eventpipe/eventstore"
)

// User is a SASL user of a Cluster, a superuser.
type User struct {
	// Mechanism is kafka.SASLPlain, kafka.SASLScramSHA256 or
	// kafka.SASLScramSHA512.
	Mechanism string
	Name      string
	Password  string
}

// ClusterConfig configures StartCluster.
type ClusterConfig struct {
	// Certificate, when set, makes the broker speak only TLS, with this
	// certificate (dev/certs writes one of a throwaway CA).
	Certificate *tls.Certificate
	// Users, when any, make the broker require SASL authentication as one
	// of them.
	Users []User
	// AutoCreateTopics creates a topic on a produce or metadata request
	// that names it, as a development Kafka does.
	AutoCreateTopics bool
	// Partitions is the partition count of topics created without one
	// (default: kfake's).
	Partitions int
}

// Validate reports the first invalid field. The zero ClusterConfig is
// valid: a plain-text cluster without users, with kfake's defaults.
func (c ClusterConfig) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("kafkatest: ClusterConfig: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if c.Partitions < 0 {
		return bad("Partitions", "%d is negative", c.Partitions)
	}
	for i, u := range c.Users {
		switch {
		case u.Mechanism != "PLAIN" && u.Mechanism != "SCRAM-SHA-256" && u.Mechanism != "SCRAM-SHA-512":
			return bad(fmt.Sprintf("Users[%d].Mechanism", i), "%q is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512", u.Mechanism)
		case u.Name == "":
			return bad(fmt.Sprintf("Users[%d].Name", i), "is empty")
		case u.Password == "":
			return bad(fmt.Sprintf("Users[%d].Password", i), "is empty")
		}
	}
	return nil
}

// StartCluster starts an in-process single-broker cluster (franz-go's
// kfake, in memory) on a free loopback port, as cfg says, and returns its
// seed brokers; the cluster stops when tb ends. It fails tb when cfg is
// invalid or the cluster does not start.
func StartCluster(tb testing.TB, cfg ClusterConfig) []string {
	tb.Helper()
	if err := cfg.Validate(); err != nil {
		tb.Fatal(err)
	}
	opts := []kfake.Opt{kfake.NumBrokers(1)}
	if cfg.Certificate != nil {
		opts = append(opts, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{*cfg.Certificate}, MinVersion: tls.VersionTLS12}))
	}
	if len(cfg.Users) > 0 {
		opts = append(opts, kfake.EnableSASL())
		for _, u := range cfg.Users {
			opts = append(opts, kfake.Superuser(u.Mechanism, u.Name, u.Password))
		}
	}
	if cfg.AutoCreateTopics {
		opts = append(opts, kfake.AllowAutoTopicCreation())
	}
	if cfg.Partitions > 0 {
		opts = append(opts, kfake.DefaultNumPartitions(cfg.Partitions))
	}
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		tb.Fatalf("kafkatest: start cluster: %v", err)
	}
	tb.Cleanup(cluster.Close)
	return cluster.ListenAddrs()
}
