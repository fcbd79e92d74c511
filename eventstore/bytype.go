package eventstore

import (
	"context"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"
)

// TypeReader reads the events of one type across all aggregates, in
// event id (ULID) order, page by page: what a new read model's catch-up
// and a replay read. eventstore/dynamodb and eventstore/memstore
// implement it.
type TypeReader interface {
	// ListByType returns one page of the events of q.EventType, upcast.
	// A malformed cursor, or one from a listing of another type, is a
	// *ValidationError on "cursor"; so is any other bad field of q.
	ListByType(ctx context.Context, q TypeQuery) (Page, error)
	// CountByType counts the stored events of eventType.
	CountByType(ctx context.Context, eventType string) (int, error)
}

// MaxPageSize bounds TypeQuery.Limit.
const MaxPageSize = 1000

// TypeQuery selects the events of one type across all aggregates.
type TypeQuery struct {
	EventType string
	// From and To bound the events' ULID time (when the store prepared
	// them) to [From, To); either may be zero for no bound.
	From, To time.Time
	// Limit is the page size; 0 means the store's default page size. At
	// most MaxPageSize.
	Limit int
	// Cursor continues from a previous Page.Next; empty starts at the
	// beginning.
	Cursor string
	// After, an event id, starts the listing after that event: only
	// events with a greater id are listed (a resumable reader's
	// checkpoint). Empty: no bound.
	After string
}

// Page is one page of a by-type listing.
type Page struct {
	// Events in ULID order, upcast.
	Events []Envelope
	// Next is the opaque cursor of the following page, empty at the end.
	// A page may be empty with an empty Next (the end was exactly at the
	// previous page's boundary).
	Next string
}

// IDRange is an inclusive range of event ids, compared as strings (ULIDs
// of one length sort as they compare). Lo may be one character longer
// than an id: Lo = id+"0" holds exactly the ids above id.
type IDRange struct{ Lo, Hi string }

// Empty reports whether no id falls in the range.
func (r IDRange) Empty() bool { return r.Lo > r.Hi }

// Contains reports whether id falls in the range.
func (r IDRange) Contains(id string) bool { return id >= r.Lo && id <= r.Hi }

const (
	minULID = "00000000000000000000000000"
	maxULID = "7ZZZZZZZZZZZZZZZZZZZZZZZZZ"
)

// Normalize validates q for a store whose default page size is
// defaultLimit, and returns it with Limit filled in and the range of
// event ids it selects (From, To and After together). Every problem is a
// *ValidationError naming the field; the cursor is the store's to check.
func (q TypeQuery) Normalize(defaultLimit int) (TypeQuery, IDRange, error) {
	if err := ValidateName("event_type", q.EventType); err != nil {
		return q, IDRange{}, err
	}
	if q.Limit == 0 {
		q.Limit = defaultLimit
	}
	if q.Limit < 0 || q.Limit > MaxPageSize {
		return q, IDRange{}, &ValidationError{Field: "limit", Reason: fmt.Sprintf("is %d, want 1–%d", q.Limit, MaxPageSize)}
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		return q, IDRange{}, &ValidationError{Field: "to", Reason: "is not after from"}
	}
	r := IDRange{Lo: minULID, Hi: maxULID}
	if !q.From.IsZero() {
		r.Lo = ulidBound(q.From, 0x00)
	}
	if !q.To.IsZero() {
		r.Hi = ulidBound(q.To.Add(-time.Millisecond), 0xFF)
	}
	if q.After != "" {
		id, err := ulid.ParseStrict(q.After)
		if err != nil {
			return q, IDRange{}, &ValidationError{Field: "after", Reason: fmt.Sprintf("%q is not an event id", q.After)}
		}
		// Event ids are ULIDs of one length: every id greater than
		// After is also greater than After followed by the smallest
		// ULID digit, which the range includes and After is below.
		if after := id.String() + "0"; after > r.Lo {
			r.Lo = after
		}
	}
	return q, r, nil
}

// ulidBound is the smallest (fill 0x00) or largest (fill 0xFF) ULID of t's
// millisecond.
func ulidBound(t time.Time, fill byte) string {
	var u ulid.ULID
	if t.Before(time.UnixMilli(0)) {
		t = time.UnixMilli(0)
	}
	if err := u.SetTime(ulid.Timestamp(t)); err != nil {
		return maxULID
	}
	e := make([]byte, 10)
	for i := range e {
		e[i] = fill
	}
	_ = u.SetEntropy(e)
	return u.String()
}
