package streamsim

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/eventpipe/eventpipe/eventstore"
)

// Defaults of Config.
const (
	DefaultRegion                 = "us-east-1"
	DefaultTableName              = "sim-table"
	DefaultReadsPerSecondPerShard = 5
	DefaultRetention              = 24 * time.Hour
	DefaultIteratorTTL            = 15 * time.Minute
	DefaultMaxRecordsPerCall      = 1000
	// DefaultPartitionKey is the hash key's attribute name of the default
	// KeySchema.
	DefaultPartitionKey = "pk"
)

// Config configures a simulated stream.
type Config struct {
	// Shards is the number of open shards the stream starts with
	// (default 1). Their hash ranges split the 64-bit hash space evenly.
	Shards int
	// Region is answered in every record's awsRegion and in the default
	// StreamARN (default DefaultRegion). Clients may use any region.
	Region string
	// TableName is the table whose stream is simulated (default
	// DefaultTableName).
	TableName string
	// StreamARN defaults to
	// arn:aws:dynamodb:<Region>:000000000000:table/<TableName>/stream/2026-01-01T00:00:00.000.
	StreamARN string
	// StreamViewType decides which images records carry (default
	// NEW_AND_OLD_IMAGES): images the view excludes are dropped by Put.
	StreamViewType types.StreamViewType
	// KeySchema is answered by DescribeStream and names the key
	// attributes Put copies from the images into Keys when a Record has
	// none (default: DefaultPartitionKey as HASH).
	KeySchema []types.KeySchemaElement
	// ReadsPerSecondPerShard is how many GetRecords calls one shard
	// answers within any one-second window (default 5, AWS's limit);
	// further calls get LimitExceededException. Negative: unlimited.
	ReadsPerSecondPerShard int
	// CallLatency is added to every call before it is answered (default
	// 0), in real time even with a fake Clock.
	CallLatency time.Duration
	// Retention is how long records stay readable (default 24h, AWS's).
	// Older records are trimmed; a closed shard closed longer ago than
	// the retention disappears from DescribeStream.
	Retention time.Duration
	// IteratorTTL is how long a shard iterator stays valid (default
	// 15m, AWS's); older ones get ExpiredIteratorException.
	IteratorTTL time.Duration
	// MaxRecordsPerCall caps GetRecords' Limit (default 1000, AWS's).
	MaxRecordsPerCall int
	// Clock tells the time for record timestamps, the read limit,
	// iterator expiry and retention (default time.Now). A test may pass
	// a fake clock to trim or expire without waiting; the read limit
	// then counts calls within one fake second, so advance the clock or
	// make ReadsPerSecondPerShard negative.
	Clock func() time.Time
	// Logger logs server errors (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Shards == 0 {
		c.Shards = 1
	}
	if c.Region == "" {
		c.Region = DefaultRegion
	}
	if c.TableName == "" {
		c.TableName = DefaultTableName
	}
	if c.StreamARN == "" {
		c.StreamARN = fmt.Sprintf("arn:aws:dynamodb:%s:000000000000:table/%s/stream/2026-01-01T00:00:00.000", c.Region, c.TableName)
	}
	if c.StreamViewType == "" {
		c.StreamViewType = types.StreamViewTypeNewAndOldImages
	}
	if len(c.KeySchema) == 0 {
		c.KeySchema = []types.KeySchemaElement{{AttributeName: aws.String(DefaultPartitionKey), KeyType: types.KeyTypeHash}}
	}
	if c.ReadsPerSecondPerShard == 0 {
		c.ReadsPerSecondPerShard = DefaultReadsPerSecondPerShard
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.IteratorTTL == 0 {
		c.IteratorTTL = DefaultIteratorTTL
	}
	if c.MaxRecordsPerCall == 0 {
		c.MaxRecordsPerCall = DefaultMaxRecordsPerCall
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first invalid field of a Config whose defaults
// are set (zero fields are valid: they take their defaults).
func (c Config) Validate() error {
	c.setDefaults()
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("streamsim: Config: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch {
	case c.Shards < 1 || c.Shards > 1<<16:
		return bad("Shards", "%d is outside 1–65536", c.Shards)
	case c.CallLatency < 0:
		return bad("CallLatency", "%v is negative", c.CallLatency)
	case c.Retention < 0:
		return bad("Retention", "%v is negative", c.Retention)
	case c.IteratorTTL < 0:
		return bad("IteratorTTL", "%v is negative", c.IteratorTTL)
	case c.MaxRecordsPerCall < 1 || c.MaxRecordsPerCall > 1000:
		return bad("MaxRecordsPerCall", "%d is outside 1–1000", c.MaxRecordsPerCall)
	}
	switch c.StreamViewType {
	case types.StreamViewTypeNewImage, types.StreamViewTypeOldImage, types.StreamViewTypeNewAndOldImages, types.StreamViewTypeKeysOnly:
	default:
		return bad("StreamViewType", "%q is unknown", c.StreamViewType)
	}
	hash := 0
	for i, k := range c.KeySchema {
		if aws.ToString(k.AttributeName) == "" {
			return bad(fmt.Sprintf("KeySchema[%d].AttributeName", i), "is empty")
		}
		if k.KeyType == types.KeyTypeHash {
			hash++
		}
	}
	if hash != 1 {
		return bad("KeySchema", "has %d HASH keys, want 1", hash)
	}
	return nil
}
