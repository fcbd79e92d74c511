package memstore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/eventpipe/eventpipe/eventstore"
)

// typeEntry places one event in its type's listing.
type typeEntry struct {
	ID  string         `json:"i"`
	Ref eventstore.Ref `json:"r"`
	Seq int64          `json:"s"`
}

// less orders entries by event id, then (for equal ids) by aggregate and
// sequence.
func (a typeEntry) less(b typeEntry) bool {
	switch {
	case a.ID != b.ID:
		return a.ID < b.ID
	case a.Ref.Type != b.Ref.Type:
		return a.Ref.Type < b.Ref.Type
	case a.Ref.ID != b.Ref.ID:
		return a.Ref.ID < b.Ref.ID
	}
	return a.Seq < b.Seq
}

// index adds e to its type's listing. The caller holds s.mu.
func (s *Store) index(e eventstore.Envelope) {
	ent := typeEntry{ID: e.EventID, Ref: e.Aggregate(), Seq: e.Sequence}
	list := s.byType[e.EventType]
	i := sort.Search(len(list), func(i int) bool { return ent.less(list[i]) })
	list = append(list, typeEntry{})
	copy(list[i+1:], list[i:])
	list[i] = ent
	s.byType[e.EventType] = list
}

// cursor is what an opaque Page.Next holds: the listing it continues and
// the last entry returned.
type cursor struct {
	Type string    `json:"t"`
	Last typeEntry `json:"l"`
}

// ListByType returns one page of the events of q.EventType across all
// aggregates, in event id (ULID) order, upcast. Unlike the DynamoDB
// store's index it is consistent: an appended event is listed at once.
// Next is set only when more events follow. A malformed cursor, or one
// from a listing of another type, is a *eventstore.ValidationError on
// "cursor".
func (s *Store) ListByType(ctx context.Context, q eventstore.TypeQuery) (eventstore.Page, error) {
	wrap := func(err error) error { return fmt.Errorf("list %s: %w", q.EventType, err) }
	if err := ctx.Err(); err != nil {
		return eventstore.Page{}, wrap(err)
	}
	q, ids, err := q.Normalize(s.cfg.PageSize)
	if err != nil {
		return eventstore.Page{}, wrap(err)
	}
	var after *typeEntry
	if q.Cursor != "" {
		c, err := decodeCursor(q.Cursor)
		if err != nil || c.Type != q.EventType {
			return eventstore.Page{}, wrap(&eventstore.ValidationError{Field: "cursor", Reason: "is not a cursor of this event type's listing"})
		}
		after = &c.Last
	}
	if ids.Empty() {
		return eventstore.Page{}, nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	list := s.byType[q.EventType]
	i := sort.Search(len(list), func(i int) bool { return list[i].ID >= ids.Lo })
	if after != nil {
		if j := sort.Search(len(list), func(j int) bool { return after.less(list[j]) }); j > i {
			i = j
		}
	}
	var stored []eventstore.Envelope
	var last typeEntry
	for ; i < len(list) && ids.Contains(list[i].ID) && len(stored) < q.Limit; i++ {
		last = list[i]
		stored = append(stored, s.aggs[last.Ref].events[last.Seq-1])
	}
	events, err := s.upcast(stored)
	if err != nil {
		return eventstore.Page{}, wrap(err)
	}
	page := eventstore.Page{Events: events}
	if i < len(list) && ids.Contains(list[i].ID) {
		b, err := json.Marshal(cursor{Type: q.EventType, Last: last})
		if err != nil {
			return eventstore.Page{}, wrap(err)
		}
		page.Next = base64.RawURLEncoding.EncodeToString(b)
	}
	return page, nil
}

func decodeCursor(s string) (cursor, error) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return c, err
	}
	if err := eventstore.DecodeStrict("cursor", b, &c); err != nil {
		return c, err
	}
	if c.Type == "" || c.Last.ID == "" {
		return c, fmt.Errorf("incomplete cursor")
	}
	return c, nil
}

// CountByType counts the stored events of eventType.
func (s *Store) CountByType(ctx context.Context, eventType string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("count %s: %w", eventType, err)
	}
	if err := eventstore.ValidateName("event_type", eventType); err != nil {
		return 0, fmt.Errorf("count %s: %w", eventType, err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.byType[eventType]), nil
}
