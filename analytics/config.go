package analytics

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/privacy"
)

// API is the part of *dynamodb.Client the store uses; tests may wrap it.
type API interface {
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// DefaultTable is the analytics table used when Config.Table is empty.
const DefaultTable = "eventpipe-analytics"

// Limits of the configuration.
const (
	MaxShards     = 1000
	MaxPageSize   = 1000
	maxEventBytes = 256 << 10 // well under DynamoDB's 400 KB item limit
)

// Config configures a Store.
type Config struct {
	// Client talks to DynamoDB (internal/dynamoclient builds one).
	// Required.
	Client API
	// Table is the analytics table; default DefaultTable.
	Table string
	// Shards is how many partitions a source's raw events are spread
	// over; default 100, at most MaxShards. SessionEvents reads shards
	// 0..Shards-1, so do not lower it while events written with more
	// shards are still wanted.
	Shards int
	// EventTTL is how long a raw event is kept after its createdAt;
	// default 7 days.
	EventTTL time.Duration
	// SessionTTL is how long a session is kept after its last event;
	// default 90 days. The session writer (the aggregation consumer)
	// applies it.
	SessionTTL time.Duration
	// MaxEventBytes bounds one event as JSON (EventInput); default 8 KiB,
	// at most 256 KiB.
	MaxEventBytes int
	// MaxBatch bounds the events of one Ingest; default 500.
	MaxBatch int
	// MaxClockSkew is how far in the future an event's createdAt may be;
	// default 5 minutes.
	MaxClockSkew time.Duration
	// MaxAge is how far in the past an event's createdAt may be; default
	// 7 days or EventTTL if shorter, at most EventTTL (an older event
	// would be stored expired).
	MaxAge time.Duration
	// PageSize is the page size of a listing asked for with limit 0;
	// default 50, at most MaxPageSize.
	PageSize int
	// QueryConcurrency bounds the parallel shard queries of
	// SessionEvents; default 16.
	QueryConcurrency int
	// WriteAttempts bounds the BatchWriteItem calls for one chunk of 25
	// events while DynamoDB returns some of them unprocessed; default 8.
	WriteAttempts int
	// WriteConcurrency bounds the parallel conditional PutItem calls
	// that write the events with an id of a batch (a client's EventID or
	// one derived from an idempotency key); default 16.
	WriteConcurrency int
	// IdempotencyTTL is how long an idempotency key (IngestOptions) is
	// remembered after its first use: a retry within it stores nothing
	// twice, the same key with another batch is refused; after it the key
	// is new again. Default 24 hours, at most MaxAge (the events of a
	// retry are dated at the key's first use and must still be
	// accepted).
	IdempotencyTTL time.Duration
	// BackoffBase and BackoffMax shape the wait before another attempt:
	// BackoffBase doubled per attempt up to BackoffMax, of which a random
	// half is added as jitter ([d/2, d]); defaults 50 ms and 5 s.
	BackoffBase, BackoffMax time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Rand returns a uniform int in [0, n) for the shard of an event and
	// the backoff jitter; default math/rand/v2's IntN. It is called
	// concurrently.
	Rand func(n int) int
	// Keys, when set, seals a signed-in user's personal fields
	// (PersonalFields) under the user's key before an event is stored,
	// and opens them on every read (package privacy): the table, its
	// stream and the analytics topics then hold them sealed, and
	// forgetting the user leaves them unreadable (they read as
	// privacy.ForgottenText). Anonymous events are stored in clear:
	// they name no subject who could ask to be forgotten. Nil: every
	// event is stored in clear, and a sealed value is not opened but
	// fails the read.
	Keys *privacy.KeyStore
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if c.Table == "" {
		c.Table = DefaultTable
	}
	def(&c.Shards, 100)
	def(&c.MaxEventBytes, 8<<10)
	def(&c.MaxBatch, 500)
	def(&c.PageSize, 50)
	def(&c.QueryConcurrency, 16)
	def(&c.WriteAttempts, 8)
	def(&c.WriteConcurrency, 16)
	defDur(&c.EventTTL, 7*24*time.Hour)
	defDur(&c.SessionTTL, 90*24*time.Hour)
	defDur(&c.MaxClockSkew, 5*time.Minute)
	defDur(&c.MaxAge, min(7*24*time.Hour, c.EventTTL))
	defDur(&c.IdempotencyTTL, min(24*time.Hour, c.MaxAge))
	defDur(&c.BackoffBase, 50*time.Millisecond)
	defDur(&c.BackoffMax, 5*time.Second)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Rand == nil {
		c.Rand = rand.IntN
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first missing or out-of-range field.
func (c Config) Validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("analytics: Config: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf("%v must be %s", v, want)})
	}
	switch {
	case c.Client == nil:
		return fmt.Errorf("analytics: Config: %w", &eventstore.ValidationError{Field: "Client", Reason: "is nil"})
	case len(c.Table) < 3 || len(c.Table) > 255:
		return bad("Table", fmt.Sprintf("%q", c.Table), "3–255 characters")
	case c.Shards < 1 || c.Shards > MaxShards:
		return bad("Shards", c.Shards, fmt.Sprintf("1–%d", MaxShards))
	case c.EventTTL <= 0:
		return bad("EventTTL", c.EventTTL, "positive")
	case c.SessionTTL <= 0:
		return bad("SessionTTL", c.SessionTTL, "positive")
	case c.MaxEventBytes < 1 || c.MaxEventBytes > maxEventBytes:
		return bad("MaxEventBytes", c.MaxEventBytes, fmt.Sprintf("1–%d", maxEventBytes))
	case c.MaxBatch < 1:
		return bad("MaxBatch", c.MaxBatch, "positive")
	case c.MaxClockSkew < 0:
		return bad("MaxClockSkew", c.MaxClockSkew, "at least 0")
	case c.MaxAge <= 0 || c.MaxAge > c.EventTTL:
		return bad("MaxAge", c.MaxAge, fmt.Sprintf("positive and at most EventTTL (%v)", c.EventTTL))
	case c.PageSize < 1 || c.PageSize > MaxPageSize:
		return bad("PageSize", c.PageSize, fmt.Sprintf("1–%d", MaxPageSize))
	case c.QueryConcurrency < 1:
		return bad("QueryConcurrency", c.QueryConcurrency, "positive")
	case c.WriteAttempts < 1:
		return bad("WriteAttempts", c.WriteAttempts, "positive")
	case c.WriteConcurrency < 1:
		return bad("WriteConcurrency", c.WriteConcurrency, "positive")
	case c.IdempotencyTTL <= 0 || c.IdempotencyTTL > c.MaxAge:
		return bad("IdempotencyTTL", c.IdempotencyTTL, fmt.Sprintf("positive and at most MaxAge (%v)", c.MaxAge))
	case c.BackoffBase <= 0 || c.BackoffMax < c.BackoffBase:
		return bad("BackoffBase", c.BackoffBase, fmt.Sprintf("positive and at most BackoffMax (%v)", c.BackoffMax))
	}
	return nil
}

// Store reads and writes the analytics table. It is safe for concurrent
// use; build one per process and share it.
type Store struct {
	cfg Config
}

// New validates cfg, filling defaults, and returns a Store. It does not
// touch the table.
func New(cfg Config) (*Store, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Store{cfg: cfg}, nil
}

// Table returns the name of the analytics table.
func (s *Store) Table() string { return s.cfg.Table }
