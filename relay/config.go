package relay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/eventstore"
)

// StreamsAPI is the part of *dynamodbstreams.Client the relay reads with.
type StreamsAPI interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// TableAPI is the part of *dynamodb.Client the relay needs: the lease
// table, and DescribeTable to find the events table's stream.
type TableAPI interface {
	LeaseAPI
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// Config configures a relay worker. Several workers (processes) with the
// same EventsTable and LeaseTable share the stream's shards.
type Config struct {
	// Streams reads the stream. Required.
	Streams StreamsAPI
	// DynamoDB writes the lease table and describes the events table.
	// Required.
	DynamoDB TableAPI
	// EventsTable is the event store table whose stream is relayed.
	// Required unless StreamARN is set.
	EventsTable string
	// StreamARN overrides the stream (default: the table's latest stream).
	StreamARN string
	// LeaseTable holds one lease per shard (default "eventpipe-leases").
	LeaseTable string
	// Publisher publishes to Kafka; Publish must return only after the
	// broker acknowledged every message (bus/kafka.Publisher does). Required.
	Publisher message.Publisher
	// Topics names the event, outbound and poison topics.
	Topics bus.Topics
	// Upcasters, when set, upcast events before they are published.
	Upcasters *eventstore.Upcasters
	// WorkerID names this worker in the lease table (default
	// hostname-pid-random). It must differ between live workers.
	WorkerID string
	// LeaseDuration is how long a lease may go without renewal before
	// another worker takes it over (default 10s). Holders renew every
	// LeaseDuration/3.
	LeaseDuration time.Duration
	// DiscoveryInterval is how often the worker lists shards and leases
	// and takes free or expired ones (default 2s).
	DiscoveryInterval time.Duration
	// BatchSize is the GetRecords limit (1–1000, default 1000): at most
	// this many records are republished after a crash, per shard.
	BatchSize int32
	// IdlePoll is the pause after an empty read (default 100ms). Each
	// further empty read doubles the pause up to MaxIdlePoll (default 1s);
	// the first read that returns records resets it. With the defaults a
	// shard idle for ~1.5s (100+200+400+800ms) is read once a second, a
	// fifth of DynamoDB Streams' 5 GetRecords/s per shard, so idle relays
	// cost the table little; the price is latency: a record written to an
	// idle shard waits up to MaxIdlePoll (plus one GetRecords) before it
	// is read, while a busy shard is read again at once. Throttled and
	// failed reads back off along the same steps.
	IdlePoll, MaxIdlePoll time.Duration
	// PoisonGroup names the poison topic, Topics.Poison(PoisonGroup)
	// (default DefaultPoisonGroup).
	PoisonGroup string
	// Registerer receives the relay's metrics (default: none).
	Registerer prometheus.Registerer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// DefaultLeaseTable is the lease table's default name.
const DefaultLeaseTable = "eventpipe-leases"

// DefaultPoisonGroup names the relay's poison topic by default:
// <prefix>poison.relay.
const DefaultPoisonGroup = "relay"

// Defaults of Config.IdlePoll and Config.MaxIdlePoll: the idle back-off
// starts at 100ms and doubles up to 1s.
const (
	DefaultIdlePoll    = 100 * time.Millisecond
	DefaultMaxIdlePoll = time.Second
)

func (c *Config) setDefaults() {
	if c.LeaseTable == "" {
		c.LeaseTable = DefaultLeaseTable
	}
	if c.WorkerID == "" {
		c.WorkerID = defaultWorkerID()
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = 10 * time.Second
	}
	if c.DiscoveryInterval == 0 {
		c.DiscoveryInterval = 2 * time.Second
	}
	if c.BatchSize == 0 {
		c.BatchSize = 1000
	}
	if c.IdlePoll == 0 {
		c.IdlePoll = DefaultIdlePoll
	}
	if c.MaxIdlePoll == 0 {
		c.MaxIdlePoll = DefaultMaxIdlePoll
	}
	if c.PoisonGroup == "" {
		c.PoisonGroup = DefaultPoisonGroup
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Streams == nil:
		return errors.New("relay: Config.Streams is nil")
	case c.DynamoDB == nil:
		return errors.New("relay: Config.DynamoDB is nil")
	case c.Publisher == nil:
		return errors.New("relay: Config.Publisher is nil")
	case c.EventsTable == "" && c.StreamARN == "":
		return errors.New("relay: Config needs EventsTable or StreamARN")
	case c.BatchSize < 1 || c.BatchSize > 1000:
		return fmt.Errorf("relay: Config.BatchSize %d is outside 1–1000", c.BatchSize)
	case c.LeaseDuration < 3*time.Millisecond:
		return fmt.Errorf("relay: Config.LeaseDuration %v is too short", c.LeaseDuration)
	case c.DiscoveryInterval <= 0:
		return fmt.Errorf("relay: Config.DiscoveryInterval %v must be positive", c.DiscoveryInterval)
	case c.IdlePoll <= 0:
		return fmt.Errorf("relay: Config.IdlePoll %v must be positive", c.IdlePoll)
	case c.MaxIdlePoll < c.IdlePoll:
		return fmt.Errorf("relay: Config.MaxIdlePoll %v is shorter than IdlePoll %v", c.MaxIdlePoll, c.IdlePoll)
	}
	return bus.ValidateTopic(c.Topics.Poison(c.PoisonGroup))
}

func defaultWorkerID() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "relay"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}
