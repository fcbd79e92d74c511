package eventpipe

import (
	"context"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/internal/dynamoclient"
	"github.com/eventpipe/eventpipe/relay"
)

// RelayConfig configures NewRelay. Zero fields take the defaults of
// relay.Config unless said otherwise.
type RelayConfig struct {
	// Catalog gives the upcasters events are published through (default
	// Builtin()).
	Catalog *Catalog
	// Endpoints give DynamoDB, the events and lease tables, the Kafka
	// brokers and the topic prefix (default EndpointsFromEnv()).
	Endpoints Endpoints
	// Publisher publishes the relayed events (default: a Kafka publisher
	// on Endpoints.KafkaBrokers, closed by Relay.Close).
	Publisher message.Publisher
	// WorkerID is written into held leases (default hostname-pid-random).
	WorkerID string
	// LeaseDuration, DiscoveryInterval and BatchSize: see relay.Config.
	LeaseDuration     time.Duration
	DiscoveryInterval time.Duration
	BatchSize         int32
	// Registerer receives the relay's metrics (default: none).
	Registerer prometheus.Registerer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *RelayConfig) setDefaults() {
	processDefaults(&c.Catalog, &c.Endpoints, &c.Logger)
}

// Relay is a relay process: a relay.Relay on the events table's stream
// with the clients it owns.
type Relay struct {
	*relay.Relay
	closePub func() error
}

// NewRelay connects to DynamoDB, its Streams and (without a Publisher)
// Kafka, and returns the relay of cfg.Endpoints.EventsTable. Run it with
// Run; Close releases what NewRelay opened.
func NewRelay(ctx context.Context, cfg RelayConfig) (*Relay, error) {
	cfg.setDefaults()
	ep := cfg.Endpoints
	db, err := dynamoclient.New(ctx, dynamoclient.Config{Endpoint: ep.DynamoDB})
	if err != nil {
		return nil, err
	}
	streams, err := dynamoclient.NewStreams(ctx, dynamoclient.Config{Endpoint: ep.DynamoDB})
	if err != nil {
		return nil, err
	}
	pub, closePub, err := publisher(cfg.Publisher, ep, "eventpipe-relay", cfg.Logger)
	if err != nil {
		return nil, err
	}
	r, err := relay.New(relay.Config{
		Streams: streams, DynamoDB: db, EventsTable: ep.EventsTable, LeaseTable: ep.LeasesTable,
		Publisher: pub, Topics: bus.Topics{Prefix: ep.TopicPrefix}, Upcasters: cfg.Catalog.Upcasters(),
		WorkerID: cfg.WorkerID, LeaseDuration: cfg.LeaseDuration, DiscoveryInterval: cfg.DiscoveryInterval,
		BatchSize: cfg.BatchSize, Registerer: cfg.Registerer, Logger: cfg.Logger,
	})
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
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: ep.KafkaBrokers, ClientID: clientID, Logger: watermill.NewSlogLogger(logger)})
	if err != nil {
		return nil, nil, err
	}
	return pub, pub.Close, nil
}

// RelayStatus returns the events table's stream and its shard leases in
// the lease table of ep (owner, counter, checkpoint, lineage), sorted by
// shard: what `eventpipe relay --status` prints.
func RelayStatus(ctx context.Context, ep Endpoints) (stream string, leases []relay.Lease, err error) {
	db, err := dynamoclient.New(ctx, dynamoclient.Config{Endpoint: ep.DynamoDB})
	if err != nil {
		return "", nil, err
	}
	if stream, err = relay.StreamARN(ctx, db, ep.EventsTable); err != nil {
		return "", nil, err
	}
	leases, err = relay.Status(ctx, &relay.Leases{Client: db, Table: ep.LeasesTable}, stream)
	return stream, leases, err
}
