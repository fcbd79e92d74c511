package relay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
// table, and DescribeTable to find the relayed table's stream.
type TableAPI interface {
	LeaseAPI
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// Config configures a relay worker. Several workers (processes) with the
// same EventsTable and LeaseTable share the stream's shards. Relays of
// different tables may share a LeaseTable (leases are keyed by stream
// ARN) and, with different StreamNames, a Registerer.
type Config struct {
	// Streams reads the stream. Required.
	Streams StreamsAPI
	// DynamoDB writes the lease table and describes the relayed table.
	// Required.
	DynamoDB TableAPI
	// EventsTable is the table whose stream is relayed: the event store's
	// table, whose name the field keeps, or another table such as the
	// analytics table together with its own Translator. Required unless
	// StreamARN is set.
	EventsTable string
	// StreamARN overrides the stream (default: the table's latest stream).
	StreamARN string
	// LeaseTable holds one lease per shard (default "eventpipe-leases").
	LeaseTable string
	// Publisher publishes to Kafka; Publish must return only after the
	// broker acknowledged every message (bus/kafka.Publisher does). Required.
	Publisher message.Publisher
	// Topics names the poison topic, and the event and outbound topics of
	// the default Translator.
	Topics bus.Topics
	// Upcasters, when set, upcast events before the default Translator
	// publishes them. Unused when Translator is set.
	Upcasters *eventstore.Upcasters
	// Translator maps each stream record to the message published for it
	// (default Translator{Topics, Upcasters}: the event store's records).
	Translator RecordTranslator
	// StreamName names what is relayed in metrics and logs (default
	// DefaultStreamName): every metric carries it as the const label
	// "stream", so relays with different StreamNames can share one
	// Registerer. 1–64 of [a-zA-Z0-9_.-].
	StreamName string
	// WorkerID names this worker in the lease table (default
	// hostname-pid-random). It must differ between live workers.
	WorkerID string
	// LeaseDuration is how long a lease may go without renewal before
	// another worker takes it over (default 10s). Holders renew every
	// LeaseDuration/3.
	LeaseDuration time.Duration
	// DiscoveryInterval is how often the worker lists shards and leases
	// and takes free or expired ones (default 2s, or LeaseDuration/3 when
	// that is shorter; at most LeaseDuration/3). A dead worker's leases
	// are taken within LeaseDuration + DiscoveryInterval of their last
	// write, plus the time a discovery pass takes to list the stream and
	// the leases.
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
	// ShardReadsPerSecond caps the GetRecords calls on one shard (default
	// DefaultShardReadsPerSecond, DynamoDB Streams' limit per shard; -1:
	// no cap). A busy shard is read again as soon as the cap allows, so
	// the relay stays within the limit instead of being throttled and
	// backing off; each call still takes up to BatchSize records.
	ShardReadsPerSecond int
	// PoisonGroup names the poison topic, Topics.Poison(PoisonGroup)
	// (default PoisonGroupFor(StreamName): DefaultPoisonGroup for the
	// events stream, "relay.<StreamName>" for any other).
	PoisonGroup string
	// Registerer receives the relay's metrics, labelled
	// stream=<StreamName> (default: none). New fails when the registerer
	// already holds a relay's metrics with the same StreamName.
	Registerer prometheus.Registerer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// DefaultShardReadsPerSecond is Config.ShardReadsPerSecond's default:
// DynamoDB Streams allows 5 GetRecords calls per second per shard.
const DefaultShardReadsPerSecond = 5

// DefaultLeaseTable is the lease table's default name.
const DefaultLeaseTable = "eventpipe-leases"

// DefaultPoisonGroup names the events relay's poison topic by default:
// <prefix>poison.relay.
const DefaultPoisonGroup = "relay"

// DefaultStreamName is Config.StreamName's default: the event store's
// stream.
const DefaultStreamName = "events"

// PoisonGroupFor is the default Config.PoisonGroup of a relay whose
// StreamName is streamName: DefaultPoisonGroup for DefaultStreamName (or
// ""), "relay.<streamName>" otherwise, so the poison records of
// different tables never mix.
func PoisonGroupFor(streamName string) string {
	if streamName == "" || streamName == DefaultStreamName {
		return DefaultPoisonGroup
	}
	return DefaultPoisonGroup + "." + streamName
}

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
		c.DiscoveryInterval = min(2*time.Second, c.LeaseDuration/3)
	}
	if c.BatchSize == 0 {
		c.BatchSize = 1000
	}
	if c.ShardReadsPerSecond == 0 {
		c.ShardReadsPerSecond = DefaultShardReadsPerSecond
	}
	if c.IdlePoll == 0 {
		c.IdlePoll = DefaultIdlePoll
	}
	if c.MaxIdlePoll == 0 {
		c.MaxIdlePoll = DefaultMaxIdlePoll
	}
	if c.StreamName == "" {
		c.StreamName = DefaultStreamName
	}
	if c.PoisonGroup == "" {
		c.PoisonGroup = PoisonGroupFor(c.StreamName)
	}
	if c.Translator == nil {
		c.Translator = Translator{Topics: c.Topics, Upcasters: c.Upcasters}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("relay: Config: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch {
	case c.Streams == nil:
		return bad("Streams", "is nil")
	case c.DynamoDB == nil:
		return bad("DynamoDB", "is nil")
	case c.Publisher == nil:
		return bad("Publisher", "is nil")
	case c.EventsTable == "" && c.StreamARN == "":
		return bad("EventsTable", "is empty and so is StreamARN: set one")
	case c.BatchSize < 1 || c.BatchSize > 1000:
		return bad("BatchSize", "%d is outside 1–1000", c.BatchSize)
	case c.LeaseDuration < 3*time.Millisecond:
		return bad("LeaseDuration", "%v is too short", c.LeaseDuration)
	case c.DiscoveryInterval <= 0:
		return bad("DiscoveryInterval", "%v must be positive", c.DiscoveryInterval)
	case c.DiscoveryInterval > c.LeaseDuration/3:
		return bad("DiscoveryInterval", "%v is longer than a third of LeaseDuration %v: "+
			"a worker dates a lease's last renewal to its previous discovery pass, so passes must come at least as often as renewals",
			c.DiscoveryInterval, c.LeaseDuration)
	case c.ShardReadsPerSecond < -1:
		return bad("ShardReadsPerSecond", "%d: want a positive cap, or -1 for none", c.ShardReadsPerSecond)
	case c.IdlePoll <= 0:
		return bad("IdlePoll", "%v must be positive", c.IdlePoll)
	case c.MaxIdlePoll < c.IdlePoll:
		return bad("MaxIdlePoll", "%v is shorter than IdlePoll %v", c.MaxIdlePoll, c.IdlePoll)
	case c.Translator == nil:
		return bad("Translator", "is nil")
	case !validStreamName(c.StreamName):
		return bad("StreamName", "%q must be 1–64 of [a-zA-Z0-9_.-]", c.StreamName)
	}
	if err := bus.ValidateTopic(c.Topics.Poison(c.PoisonGroup)); err != nil {
		return bad("PoisonGroup", "makes an invalid poison topic: %v", err)
	}
	return nil
}

func validStreamName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return false
		}
	}
	return true
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
