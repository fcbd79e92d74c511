package eventpipe

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventpipe/eventpipe/analytics/analyticsbus"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/internal/dynamoclient"
	"github.com/eventpipe/eventpipe/relay"
)

// The streams a relay carries (RelayConfig.Stream), as its metrics
// label (stream=…) and `eventpipe relay --streams` name them.
const (
	// RelayEvents is the events table's stream: EVENT# items as envelopes
	// on events.<aggregate type>, OUTBOUND# items on outbound.<name>,
	// keyed by aggregate id; poison topic poison.relay.
	RelayEvents = relay.DefaultStreamName
	// RelayAnalytics is the analytics table's stream: raw analytics
	// events (analyticsbus.Message) on analytics.<source>, keyed by
	// session id; sessions and aggregations are not published; poison
	// topic poison.relay.analytics.
	RelayAnalytics = "analytics"
)

// RelayStreams returns every stream a relay can carry, in the order
// `eventpipe relay` starts them.
func RelayStreams() []string { return []string{RelayEvents, RelayAnalytics} }

// RelayConfig configures NewRelay. Zero fields take the defaults of
// relay.Config unless said otherwise.
type RelayConfig struct {
	// Stream selects the table whose stream is relayed: RelayEvents (the
	// default: Endpoints.EventsTable) or RelayAnalytics
	// (Endpoints.AnalyticsTable). Relays of both streams may run in one
	// process with the same WorkerID, lease table and Registerer.
	Stream string
	// Process: the catalogue (the upcasters events are published
	// through; the analytics stream does not use it), the endpoints
	// (DynamoDB, the events, analytics and lease tables, the Kafka
	// brokers and the topic prefix) and the logger (defaults: see
	// Process).
	Process
	// Publisher publishes the relayed events (default: a Kafka publisher
	// on Endpoints.KafkaBrokers, closed by Relay.Close).
	Publisher message.Publisher
	// WorkerID is written into held leases (default hostname-pid-random).
	WorkerID string
	// LeaseDuration, DiscoveryInterval and BatchSize: see relay.Config.
	LeaseDuration     time.Duration
	DiscoveryInterval time.Duration
	BatchSize         int32
	// IdlePoll and MaxIdlePoll: the pause after an empty read and its cap
	// (see relay.Config; defaults 100ms and 1s). They are most of the
	// end-to-end latency of a quiet table; DynamoDB Streams allows 5
	// GetRecords per second per shard.
	IdlePoll, MaxIdlePoll time.Duration
	// ShardReadsPerSecond caps the GetRecords calls per shard (see
	// relay.Config). Default: DynamoDB Streams' limit of 5 on AWS, and
	// no cap on a local endpoint (DynamoDB Local has no read limit, and
	// pacing a busy shard would only add latency).
	ShardReadsPerSecond int
	// Registerer receives the relay's metrics, labelled stream=<Stream>
	// (default: none).
	Registerer prometheus.Registerer
}

func (c *RelayConfig) setDefaults() {
	_ = c.FillProcess() // Validate reports Endpoints.Err
	if c.Stream == "" {
		c.Stream = RelayEvents
	}
}

// Validate reports, as an *eventstore.ValidationError, the settings
// from the environment that could not be read, an unknown Stream ("" is
// RelayEvents), a negative duration or batch size, a batch above 1000
// and a read rate below -1, the defaults filled (as NewRelay fills them); relay.New checks the rest.
func (c RelayConfig) Validate() error {
	c.setDefaults()
	if err := c.Process.Validate(); err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	if _, err := relayTable(c.Endpoints, c.Stream); err != nil {
		return err
	}
	for _, d := range []struct {
		field    string
		negative bool
	}{
		{"LeaseDuration", c.LeaseDuration < 0}, {"DiscoveryInterval", c.DiscoveryInterval < 0}, {"BatchSize", c.BatchSize < 0},
		{"IdlePoll", c.IdlePoll < 0}, {"MaxIdlePoll", c.MaxIdlePoll < 0},
	} {
		if d.negative {
			return fmt.Errorf("relay: %w", invalid(d.field, "is negative"))
		}
	}
	switch {
	case c.BatchSize > 1000:
		return fmt.Errorf("relay: %w", invalid("BatchSize", fmt.Sprintf("%d is above 1000, DynamoDB Streams' limit", c.BatchSize)))
	case c.ShardReadsPerSecond < -1:
		return fmt.Errorf("relay: %w", invalid("ShardReadsPerSecond", fmt.Sprintf("%d: want a positive cap, 0 for the default or -1 for none", c.ShardReadsPerSecond)))
	}
	return nil
}

// relayTable is the table whose stream carries stream.
func relayTable(ep Endpoints, stream string) (string, error) {
	switch stream {
	case "", RelayEvents:
		return ep.EventsTable, nil
	case RelayAnalytics:
		return ep.AnalyticsTable, nil
	}
	return "", fmt.Errorf("eventpipe: relay: %w", invalid("Stream", fmt.Sprintf("%q is unknown (want %q or %q)", stream, RelayEvents, RelayAnalytics)))
}

// Relay is a relay process: a relay.Relay on one table's stream with the
// clients it owns.
type Relay struct {
	*relay.Relay
	closePub func() error
}

// NewRelay connects to DynamoDB, its Streams and (without a Publisher)
// Kafka, and returns the relay of cfg.Stream: the events table's stream
// by default, or the analytics table's. Run it with Run; Close releases
// what NewRelay opened.
func NewRelay(ctx context.Context, cfg RelayConfig) (*Relay, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ep := cfg.Endpoints
	table, _ := relayTable(ep, cfg.Stream)
	topics := bus.Topics{Prefix: ep.TopicPrefix}
	rc := relay.Config{
		EventsTable: table, LeaseTable: ep.LeasesTable, Topics: topics, StreamName: cfg.Stream,
		WorkerID: cfg.WorkerID, LeaseDuration: cfg.LeaseDuration, DiscoveryInterval: cfg.DiscoveryInterval,
		BatchSize: cfg.BatchSize, IdlePoll: cfg.IdlePoll, MaxIdlePoll: cfg.MaxIdlePoll, ShardReadsPerSecond: cfg.ShardReadsPerSecond,
		Registerer: cfg.Registerer, Logger: cfg.Logger,
	}
	if rc.ShardReadsPerSecond == 0 && dynamoConfig(ep).Local() {
		rc.ShardReadsPerSecond = -1
	}
	clientID := "eventpipe-relay"
	switch cfg.Stream {
	case RelayEvents:
		rc.Upcasters = cfg.Catalog.Upcasters()
	case RelayAnalytics:
		rc.Translator = analyticsbus.Translator{Topics: topics}
		clientID += "-" + cfg.Stream
	}
	db, err := dynamoclient.New(ctx, dynamoConfig(ep))
	if err != nil {
		return nil, err
	}
	streams, err := dynamoclient.NewStreams(ctx, dynamoConfig(ep))
	if err != nil {
		return nil, err
	}
	pub, closePub, err := publisher(cfg.Publisher, ep, clientID, cfg.Logger)
	if err != nil {
		return nil, err
	}
	rc.Streams, rc.DynamoDB, rc.Publisher = streams, db, pub
	r, err := relay.New(rc)
	if err != nil {
		_ = closePub()
		return nil, err
	}
	return &Relay{Relay: r, closePub: closePub}, nil
}

// Close releases the publisher NewRelay opened (call it after Run).
func (r *Relay) Close() error { return r.closePub() }

// publisher returns given, or a new Kafka publisher on ep's brokers that
// the returned close func closes.
func publisher(given message.Publisher, ep Endpoints, clientID string, logger *slog.Logger) (message.Publisher, func() error, error) {
	if given != nil {
		return given, func() error { return nil }, nil
	}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: ep.KafkaBrokers, Security: ep.Kafka, ClientID: clientID, Logger: watermill.NewSlogLogger(logger)})
	if err != nil {
		return nil, nil, err
	}
	return pub, pub.Close, nil
}

// RelayStatus returns the events table's stream and its shard leases in
// the lease table of ep (owner, counter, checkpoint, lineage), sorted by
// shard. It is RelayStreamStatus(ctx, ep, RelayEvents).
func RelayStatus(ctx context.Context, ep Endpoints) (stream string, leases []relay.Lease, err error) {
	return RelayStreamStatus(ctx, ep, RelayEvents)
}

// RelayStreamStatus returns the stream ARN of relay stream name
// (RelayEvents or RelayAnalytics) and its shard leases in the lease
// table of ep, sorted by shard: what `eventpipe relay --status` prints
// for each stream.
func RelayStreamStatus(ctx context.Context, ep Endpoints, name string) (stream string, leases []relay.Lease, err error) {
	table, err := relayTable(ep, name)
	if err != nil {
		return "", nil, err
	}
	db, err := dynamoclient.New(ctx, dynamoConfig(ep))
	if err != nil {
		return "", nil, err
	}
	if stream, err = relay.StreamARN(ctx, db, table); err != nil {
		return "", nil, err
	}
	leases, err = relay.Status(ctx, &relay.Leases{Client: db, Table: ep.LeasesTable}, stream)
	return stream, leases, err
}
