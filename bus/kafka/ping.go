package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// PingDialTimeout bounds each TCP connect of Ping, so that an unreachable
// broker fails a ping quickly whatever the caller's deadline.
const PingDialTimeout = 2 * time.Second

// Ping asks cluster's brokers whether they answer, connecting with
// cluster.Security (TLS and SASL): one broker that answers a Metadata
// request (after the ApiVersions and SASL handshakes of the connection)
// is enough. A wrong CA, password or mechanism, or a TLS or SASL mismatch
// with the listener, fails the ping with an error naming the security in
// use (never its secrets). It connects with a client of its own, closed
// before it returns; ctx bounds the whole ping.
func Ping(ctx context.Context, cluster Cluster) error {
	if len(cluster.Brokers) == 0 {
		return errors.New("kafka: ping: Cluster.Brokers is empty")
	}
	secOpts, err := cluster.kgoOpts()
	if err != nil {
		return fmt.Errorf("kafka: ping %v: %w", cluster.Brokers, err)
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(cluster.Brokers...), kgo.ClientID("eventpipe-ping"),
		kgo.DialTimeout(PingDialTimeout)}, secOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka: ping client on %v: %w", cluster.Brokers, err)
	}
	defer cl.Close()
	if err := cl.Ping(ctx); err != nil {
		return cluster.Security.wrapConnErr("ping", cluster.Brokers, err)
	}
	return nil
}

// kgoOpts is Security.KgoOpts after Security.ValidateFor(Brokers).
func (c Cluster) kgoOpts() ([]kgo.Opt, error) {
	if err := c.Security.ValidateFor(c.Brokers); err != nil {
		return nil, fmt.Errorf("kafka: security: %w", err)
	}
	return c.Security.KgoOpts()
}
