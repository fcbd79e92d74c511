package aggregator_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/rollup"
)

// workloadConfig shapes a generated browsing workload.
type workloadConfig struct {
	Events, Sessions, Users int
	Days                    int
	LateShare, DupShare     float64 // of the events: delivered late, delivered twice
	Seed                    uint64
	Now                     time.Time
}

// workload is a generated set of unique events and the order they are
// delivered in (with late events moved back and copies added).
type workload struct {
	Source    string
	Events    []analytics.Event // unique, by id
	Delivered []analytics.Event // publication order, with copies
	Late      int
	Copies    int
}

var eventTypes = []struct {
	name  string
	share int
	url   bool
}{{"page_view", 60, true}, {"click", 25, false}, {"scroll", 10, false}, {"signup", 5, true}}

// generateWorkload makes cfg.Events events in cfg.Sessions sessions of
// cfg.Users users (a fifth of the sessions anonymous) over cfg.Days
// days before cfg.Now. Sessions last minutes to hours, so many cross an
// hour and some a day. Publication is in time order, except that
// LateShare of the events come at the end (some of them the first
// event of their session, which moves its start) and DupShare of the
// events are published again a little later (as a relay republishing a
// batch would).
func generateWorkload(source string, cfg workloadConfig) workload {
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], cfg.Seed)
	src := rand.NewChaCha8(seed)
	r := rand.New(src)
	entropy := ulid.Monotonic(src, 0)
	w := workload{Source: source}
	span := time.Duration(cfg.Days) * 24 * time.Hour
	origin := cfg.Now.Add(-span).Truncate(time.Millisecond)
	perSession := cfg.Events / cfg.Sessions
	for s := range cfg.Sessions {
		sessionID := ulid.MustNew(ulid.Timestamp(origin), entropy).String()
		user := ""
		if s%5 != 0 {
			user = "u" + strconv.Itoa(r.IntN(cfg.Users))
		}
		n := perSession
		if s < cfg.Events%cfg.Sessions {
			n++
		}
		t := origin.Add(time.Duration(r.Int64N(int64(span - 4*time.Hour))))
		for range n {
			t = t.Add(time.Duration(1+r.IntN(120)) * time.Second)
			typ := pick(r)
			e := analytics.Event{
				SourceID: source, Type: typ.name, SessionID: sessionID, UserID: user,
				CreatedAt: t.UTC(), Shard: r.IntN(100),
			}
			if typ.url {
				e.URL = "/p/" + strconv.Itoa(r.IntN(50))
			}
			e.EventID = ulid.MustNew(ulid.Timestamp(t), entropy).String()
			w.Events = append(w.Events, e)
		}
	}
	order := append([]analytics.Event(nil), w.Events...)
	sort.SliceStable(order, func(i, j int) bool { return order[i].CreatedAt.Before(order[j].CreatedAt) })
	var onTime, late []analytics.Event
	for _, e := range order {
		if r.Float64() < cfg.LateShare {
			late = append(late, e)
			continue
		}
		onTime = append(onTime, e)
	}
	w.Late = len(late)
	r.Shuffle(len(late), func(i, j int) { late[i], late[j] = late[j], late[i] })
	all := append(onTime, late...)
	type placed struct {
		pos float64
		e   analytics.Event
	}
	var out []placed
	for i, e := range all {
		out = append(out, placed{float64(i), e})
		if r.Float64() < cfg.DupShare {
			// The copy comes up to 200 messages later.
			out = append(out, placed{float64(i+1+r.IntN(200)) + 0.5, e})
			w.Copies++
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].pos < out[j].pos })
	for _, p := range out {
		w.Delivered = append(w.Delivered, p.e)
	}
	return w
}

func pick(r *rand.Rand) struct {
	name  string
	share int
	url   bool
} {
	n := r.IntN(100)
	for _, t := range eventTypes {
		if n < t.share {
			return t
		}
		n -= t.share
	}
	return eventTypes[0]
}

// exact is what the aggregations and sessions must say, counted from
// the unique events.
type exact struct {
	buckets  map[string]*exactBucket // "<period> <bucket>"
	sessions map[string]analytics.Session
}

type exactBucket struct {
	Events, PageViews, Sessions int64
	PerType                     map[string]int64
	Users                       map[string]bool
}

func bucketKey(p rollup.Period, t time.Time) string { return string(p) + " " + p.Bucket(t) }

// seedSessionTTL is how long seed 001 keeps a session after its last
// event.
const seedSessionTTL = 90 * 24 * time.Hour

func exactCounts(w workload) exact {
	x := exact{buckets: map[string]*exactBucket{}, sessions: map[string]analytics.Session{}}
	get := func(k string) *exactBucket {
		b := x.buckets[k]
		if b == nil {
			b = &exactBucket{PerType: map[string]int64{}, Users: map[string]bool{}}
			x.buckets[k] = b
		}
		return b
	}
	bySession := map[string][]analytics.Event{}
	for _, e := range w.Events {
		bySession[e.SessionID] = append(bySession[e.SessionID], e)
		for _, p := range rollup.Periods {
			b := get(bucketKey(p, e.CreatedAt))
			b.Events++
			b.PerType[e.Type]++
			if e.Type == "page_view" {
				b.PageViews++
			}
			if e.UserID != "" {
				b.Users[e.UserID] = true
			}
		}
	}
	for id, es := range bySession {
		sort.Slice(es, func(i, j int) bool { return es[i].EventID < es[j].EventID })
		first, last := es[0], es[len(es)-1]
		s := analytics.Session{
			SourceID: w.Source, SessionID: id, UserID: first.UserID, EventCount: int64(len(es)),
			FirstSeenAt: first.CreatedAt, LastSeenAt: last.CreatedAt,
			DurationSeconds: int64(last.CreatedAt.Sub(first.CreatedAt) / time.Second),
			ExpiresAt:       time.Unix(last.CreatedAt.Add(seedSessionTTL).Unix(), 0).UTC(),
		}
		for _, e := range es {
			if e.URL != "" {
				if s.EntryURL == "" {
					s.EntryURL = e.URL
				}
				s.ExitURL = e.URL
			}
		}
		x.sessions[id] = s
		for _, p := range rollup.Periods {
			get(bucketKey(p, first.CreatedAt)).Sessions++
		}
	}
	return x
}

func (b *exactBucket) String() string {
	return fmt.Sprintf("events %d pageViews %d sessions %d perType %v users %d", b.Events, b.PageViews, b.Sessions, b.PerType, len(b.Users))
}
