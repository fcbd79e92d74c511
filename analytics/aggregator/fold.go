package aggregator

import (
	"bytes"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/rollup"
)

// Measures the aggregation consumer counts per bucket; a type's counter
// is analytics.AttrPerTypePrefix + type.
const (
	measureEvents    = analytics.AttrEvents
	measurePageViews = analytics.AttrPageViews
	measureSessions  = analytics.AttrSessions
	// PageViewType is the event type counted as a page view.
	PageViewType = "page_view"
)

// delivery is one decoded message of a partition.
type delivery struct {
	offset int64
	event  analytics.Event
	id     ulid.ULID
}

// contribution is what one delivery adds to one bucket. It carries the
// delivery's offset so that a bucket item whose watermark is at or past
// it skips it.
type contribution struct {
	offset   int64
	bucket   rollup.Bucket
	measures rollup.Measures
	user     string
}

// session is a session item as the consumer keeps it.
type session struct {
	stored   bool  // the item exists in the table
	version  int64 // the stored item's version
	userID   string
	count    int64
	first    ulid.ULID // earliest event (by id, so by createdAt in ms)
	last     ulid.ULID
	firstAt  time.Time
	lastAt   time.Time
	entry    ulid.ULID // earliest event with a URL
	exit     ulid.ULID // latest event with a URL
	entryURL string
	exitURL  string
	recent   []ulid.ULID // ids of the latest events applied, oldest first
}

// seen reports whether id is among the session's recent events.
func (s *session) seen(id ulid.ULID) bool {
	for _, r := range s.recent {
		if r == id {
			return true
		}
	}
	return false
}

// apply folds d into s and returns its contributions, or dup=true when
// the event was already applied (its id is among the recent ones) and
// adds nothing. window bounds the recent ids kept. apply is a pure
// function of s and d, so a batch folded again from the same stored
// session gives the same contributions per offset: that is what makes a
// redelivered batch, cut at other boundaries, count each event once.
func (s *session) apply(source string, d delivery, window int) (contribs []contribution, dup bool) {
	if s.seen(d.id) {
		return nil, true
	}
	e := d.event
	add := func(p rollup.Period, t time.Time, m rollup.Measures, user string) {
		contribs = append(contribs, contribution{offset: d.offset, bucket: rollup.BucketOf(source, p, t), measures: m, user: user})
	}
	m := rollup.Measures{measureEvents: 1, analytics.AttrPerTypePrefix + e.Type: 1}
	if e.Type == PageViewType {
		m[measurePageViews] = 1
	}
	for _, p := range rollup.Periods {
		add(p, e.CreatedAt, m, e.UserID)
	}
	// A session counts as started in the buckets of its earliest event;
	// a late event that moves the start moves the count.
	oldFirst, hadFirst := s.firstAt, s.count > 0
	if !hadFirst || bytes.Compare(d.id[:], s.first[:]) < 0 {
		s.first, s.firstAt = d.id, e.CreatedAt
	}
	if !hadFirst || bytes.Compare(d.id[:], s.last[:]) > 0 {
		s.last, s.lastAt = d.id, e.CreatedAt
	}
	for _, p := range rollup.Periods {
		if hadFirst && p.Bucket(oldFirst) == p.Bucket(s.firstAt) {
			continue
		}
		if hadFirst {
			add(p, oldFirst, rollup.Measures{measureSessions: -1}, "")
		}
		add(p, s.firstAt, rollup.Measures{measureSessions: 1}, "")
	}
	if e.URL != "" {
		if s.entryURL == "" || bytes.Compare(d.id[:], s.entry[:]) < 0 {
			s.entry, s.entryURL = d.id, e.URL
		}
		if s.exitURL == "" || bytes.Compare(d.id[:], s.exit[:]) > 0 {
			s.exit, s.exitURL = d.id, e.URL
		}
	}
	if s.userID == "" {
		s.userID = e.UserID
	}
	s.count++
	s.recent = append(s.recent, d.id)
	if over := len(s.recent) - window; over > 0 {
		s.recent = append(s.recent[:0:0], s.recent[over:]...)
	}
	return contribs, false
}

// duration is the session's length in whole seconds.
func (s *session) duration() int64 { return int64(s.lastAt.Sub(s.firstAt) / time.Second) }
