package memstore

import (
	"fmt"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
)

// Config configures a Store. The zero Config is usable.
type Config struct {
	// Schema lists the known event types (empty: any type) and the
	// upcasters applied to every event read.
	Schema eventstore.Schema
	// PageSize is the default page size of ListByType, LoadPage,
	// ListAggregates and Changes; default 100, at most eventstore.MaxPageSize.
	PageSize int
	// CommandRetention is how long the record of a command (applied or
	// refused) answers for it; 0 keeps it forever. A command redelivered
	// after its record expired is applied again.
	CommandRetention time.Duration
	// Now is the store's clock (STATE and snapshot times, command
	// expiry); default time.Now. Tests set it to move time on.
	Now func() time.Time
}

func (c *Config) setDefaults() {
	if c.PageSize == 0 {
		c.PageSize = 100
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports the first out-of-range field.
func (c Config) Validate() error {
	if c.PageSize < 1 || c.PageSize > eventstore.MaxPageSize {
		return fmt.Errorf("eventstore/memstore: Config: %w", &eventstore.ValidationError{Field: "PageSize",
			Reason: fmt.Sprintf("%d must be 1–%d", c.PageSize, eventstore.MaxPageSize)})
	}
	if c.CommandRetention < 0 {
		return fmt.Errorf("eventstore/memstore: Config: %w", &eventstore.ValidationError{Field: "CommandRetention",
			Reason: fmt.Sprintf("%v is negative", c.CommandRetention)})
	}
	return nil
}
