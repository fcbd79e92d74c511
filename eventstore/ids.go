package eventstore

import (
	"crypto/rand"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// idSource hands out ULIDs that strictly increase within this process,
// even within one millisecond, from a mutex-guarded monotonic entropy
// source seeded by crypto/rand.
var idSource = struct {
	mu      sync.Mutex
	entropy *ulid.MonotonicEntropy
	last    uint64 // millisecond of the last id
}{entropy: ulid.Monotonic(rand.Reader, 0)}

// NewEventID returns a new ULID string for t (normally time.Now()). IDs
// returned by one process are strictly increasing as long as t does not go
// backwards; if it does, the last ID's time is reused so the order holds.
// Safe for concurrent use.
func NewEventID(t time.Time) string {
	idSource.mu.Lock()
	defer idSource.mu.Unlock()
	ms := ulid.Timestamp(t)
	if ms < idSource.last {
		ms = idSource.last
	}
	id, err := ulid.New(ms, idSource.entropy)
	if err != nil {
		// The entropy of this millisecond is exhausted (2^80 ids): move to
		// the next millisecond, which resets the monotonic increment.
		ms++
		id = ulid.MustNew(ms, idSource.entropy)
	}
	idSource.last = ms
	return id.String()
}
