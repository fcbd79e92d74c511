package dynamodb

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/eventpipe/eventpipe/eventstore"
)

// API is the part of *dynamodb.Client the store uses; tests may wrap it.
type API interface {
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// DefaultTable is the events table name used when Config.Table is empty.
const DefaultTable = "eventpipe-events"

// Config configures a Store.
type Config struct {
	// Client talks to DynamoDB (internal/dynamoclient builds one).
	// Required.
	Client API
	// Table is the events table; default DefaultTable.
	Table string
	// Schema lists the known event types (empty: any type) and the
	// upcasters applied to every event read.
	Schema eventstore.Schema
	// PageSize is the default page size of ListByType, LoadPage and
	// ListAggregates;
	// default 100, at most 1000.
	PageSize int
	// CommandRetention is how long the record of an applied command
	// id is kept (it gets a `ttl` attribute); 0 keeps it forever. A
	// command redelivered after its record expired is applied again.
	CommandRetention time.Duration
	// ConflictRetries bounds how often an append is retried when
	// DynamoDB cancels it for a TransactionConflict (another transaction
	// on the same items in flight) and the version is still the expected
	// one; default 3. A changed version is never retried: it is a
	// *eventstore.ConcurrencyError.
	ConflictRetries int
	// Sealer, when set, seals personal data before it is written (each
	// event's personal fields; STATE, snapshots and outbound payloads
	// whole) and opens it after it is read (Load, LoadPage, ListByType,
	// State, Snapshot): package privacy's Sealer. The table, and so the
	// stream the relay publishes from, then holds it sealed only. Nil
	// stores everything as given.
	Sealer eventstore.Sealer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Table == "" {
		c.Table = DefaultTable
	}
	if c.PageSize == 0 {
		c.PageSize = 100
	}
	if c.ConflictRetries == 0 {
		c.ConflictRetries = 3
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first missing or out-of-range field.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("eventstore/dynamodb: Config: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if c.Client == nil {
		return bad("Client", "is nil")
	}
	if l := len(c.Table); l < 3 || l > 255 {
		return bad("Table", "%q must be 3–255 characters", c.Table)
	}
	if c.PageSize < 1 || c.PageSize > 1000 {
		return bad("PageSize", "%d must be 1–1000", c.PageSize)
	}
	if c.CommandRetention < 0 {
		return bad("CommandRetention", "%v is negative", c.CommandRetention)
	}
	if c.ConflictRetries < 0 {
		return bad("ConflictRetries", "%d is negative", c.ConflictRetries)
	}
	return nil
}

// Store is the DynamoDB event store. It is safe for concurrent use; build
// one per process and share it.
type Store struct {
	cfg Config
}

var _ eventstore.Store = (*Store)(nil)

// New validates cfg and returns a Store. It does not touch the table.
func New(cfg Config) (*Store, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Store{cfg: cfg}, nil
}

// Table returns the name of the events table.
func (s *Store) Table() string { return s.cfg.Table }

// Schema returns the store's schema (for a Facet's Upcasters).
func (s *Store) Schema() eventstore.Schema { return s.cfg.Schema }

// Sealer returns the store's Config.Sealer (nil: it seals nothing), the
// opener its consumers read the bus with.
func (s *Store) Sealer() eventstore.Sealer { return s.cfg.Sealer }
