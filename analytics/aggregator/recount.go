package aggregator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/internal/ddbattr"
	"github.com/eventpipe/eventpipe/rollup"
)

// DefaultSettle is RecountConfig.Settle's default: how long before now a
// recounted range must have ended.
const DefaultSettle = 5 * time.Minute

// DefaultMargin is RecountConfig.Margin's default: how far outside the
// range the raw events are read, for the sessions crossing its edges.
const DefaultMargin = 2 * time.Hour

// AttrRecountUsers is the sketch attribute a recount writes: the users of
// the bucket as counted from the raw events. It starts with
// analytics.AttrUsersPrefix, so readers merge it with the per-partition
// sketches the consumer adds later.
const AttrRecountUsers = analytics.AttrUsersPrefix + "recount"

// RecountConfig configures Recount.
type RecountConfig struct {
	// Client reads and writes the analytics table. Required.
	Client API
	// Table is the analytics table (default analytics.DefaultTable).
	Table string
	// Events reads the raw events (analytics.Store.EachSourceEvent) of
	// the same table. Required.
	Events *analytics.Store
	// Source is the source whose range is recounted. Required.
	Source string
	// From and To are the range [From, To), on whole UTC hours, From
	// before To. To must be at least Settle before Now, and From no
	// older than the raw events' TTL (analytics.Store.EventTTL): a range
	// whose raw events may have expired would be counted short.
	From, To time.Time
	// Settle is how long ago the range must have ended (default
	// DefaultSettle): events arriving live, dated now, never fall in it.
	Settle time.Duration
	// Margin is how far before From and after To the raw events are read
	// besides the range's own (default DefaultMargin): what tells a
	// session crossing an edge from one whole in the range. A session
	// whose events before From (or after To) all lie further than Margin
	// away is taken for one that starts (or ends) in the range.
	Margin time.Duration
	// RecentEvents and SessionTTL must be the live consumer's
	// (defaults DefaultRecentEvents, DefaultSessionTTL): a rewritten
	// session remembers its latest RecentEvents event ids, as the
	// consumer's own writes do.
	RecentEvents int
	SessionTTL   time.Duration
	// ConflictRetries bounds the re-reads of one item that the consumer
	// wrote between the recount's read and its write (default 20).
	ConflictRetries int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *RecountConfig) setDefaults() {
	if c.Table == "" {
		c.Table = analytics.DefaultTable
	}
	if c.Settle == 0 {
		c.Settle = DefaultSettle
	}
	if c.Margin == 0 {
		c.Margin = DefaultMargin
	}
	if c.RecentEvents == 0 {
		c.RecentEvents = DefaultRecentEvents
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.ConflictRetries == 0 {
		c.ConflictRetries = 20
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first unusable field as a
// *eventstore.ValidationError.
func (c RecountConfig) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	now := c.Now()
	switch {
	case c.Client == nil:
		return bad("Client", "is nil")
	case c.Events == nil:
		return bad("Events", "is nil")
	case c.Source == "" || strings.Contains(c.Source, "#"):
		return bad("Source", "%q is not a source id", c.Source)
	case c.From.IsZero() || !c.From.Equal(c.From.Truncate(time.Hour)):
		return bad("From", "%v is not a whole UTC hour", c.From)
	case c.To.IsZero() || !c.To.Equal(c.To.Truncate(time.Hour)):
		return bad("To", "%v is not a whole UTC hour", c.To)
	case !c.From.Before(c.To):
		return bad("To", "%v is not after From %v", c.To, c.From)
	case c.Settle < 0:
		return bad("Settle", "%v is negative", c.Settle)
	case c.Margin < 0:
		return bad("Margin", "%v is negative", c.Margin)
	case c.To.After(now.Add(-c.Settle)):
		return bad("To", "%v is less than %v ago: the range is still open to live events (recount closed hours only)", c.To.UTC(), c.Settle)
	case c.From.Before(now.Add(-c.Events.EventTTL())):
		return bad("From", "%v is more than the raw events' TTL (%v) ago: they may have expired", c.From.UTC(), c.Events.EventTTL())
	case c.RecentEvents < 1 || c.RecentEvents > MaxRecentEvents:
		return bad("RecentEvents", "%d must be 1–%d", c.RecentEvents, MaxRecentEvents)
	case c.SessionTTL <= 0:
		return bad("SessionTTL", "%v must be positive", c.SessionTTL)
	case c.ConflictRetries < 1:
		return bad("ConflictRetries", "%d must be positive", c.ConflictRetries)
	}
	return nil
}

// Counts are the counters of one aggregation item.
type Counts struct {
	Events      int64            `json:"events"`
	PageViews   int64            `json:"pageViews"`
	Sessions    int64            `json:"sessions"`
	PerType     map[string]int64 `json:"perType,omitempty"`
	UniqueUsers int64            `json:"uniqueUsers"`
}

func (c Counts) equal(o Counts) bool {
	return c.Events == o.Events && c.PageViews == o.PageViews && c.Sessions == o.Sessions &&
		c.UniqueUsers == o.UniqueUsers && maps.Equal(c.PerType, o.PerType)
}

// BucketRecount is what Recount found and wrote for one aggregation.
type BucketRecount struct {
	Period analytics.Period `json:"period"`
	Bucket string           `json:"bucket"`
	Was    Counts           `json:"was"`
	Now    Counts           `json:"now"`
	// Changed is set when the item was written (Was differed from Now).
	Changed bool `json:"changed"`
}

// SessionRecount is what Recount found and wrote for one session.
type SessionRecount struct {
	SessionID string `json:"sessionId"`
	// WasEvents is the stored item's eventCount (0 without an item),
	// NowEvents the raw events' count.
	WasEvents int64 `json:"wasEvents"`
	NowEvents int64 `json:"nowEvents"`
	Changed   bool  `json:"changed"`
}

// RecountResult is what Recount did.
type RecountResult struct {
	Source string    `json:"source"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	// Events is how many raw events of the source fall in the range.
	Events int `json:"events"`
	// Buckets are the hourly aggregations of the range and the daily
	// ones of its whole days, in period and bucket order.
	Buckets []BucketRecount `json:"buckets"`
	// Sessions are the sessions whose events all fall in the range.
	Sessions []SessionRecount `json:"sessions"`
	// BucketsChanged and SessionsChanged count the items written.
	BucketsChanged  int `json:"bucketsChanged"`
	SessionsChanged int `json:"sessionsChanged"`
}

// Recount recounts the sessions and aggregations of a source's closed
// time range from its raw events, beside a running consumer, with the
// consumer's own fold (each session's events in id order, as the
// consumer would have applied them) so that a fresh count and the
// consumer's count are the same function of the raw events.
//
// What it rewrites: the hourly aggregations of every hour in [From, To),
// the daily aggregations of every whole day in it, and the sessions whose
// every raw event is in it. A session that extends outside the range is
// left to the consumer (it may still be growing), though its start counts
// in the range's "sessions" as it should. Each item is written only when
// it differs from the fresh count (reported unchanged otherwise).
//
// What it reads: the raw events whose ids fall in [From-Margin,
// To+Margin), by key range, a page per shard at a time, folded into their
// sessions as they come (memory holds the sessions' folds, not the
// events); nothing of the source's history further out. The margins tell
// a session crossing an edge from one whole in the range: a session whose
// events outside the range all lie further than Margin from it is taken
// for one that starts (its start counted in the range) or ends there (and
// rewritten), and an event whose id's time (given by the client) is
// further than Margin outside the range is not counted.
//
// How it stays exact beside the consumer: in each pass it reads the
// items first (an aggregation's counters and per-partition watermarks, a
// session's version), then the raw events (strongly consistent), and
// writes each item whose fresh count differs
// conditional on the item being as read (the consumer's own guards).
// An event the consumer applied before the item read was ingested
// before the raw read, so the fresh count holds it; a consumer write
// after the item read fails the condition, and the item goes to the next
// pass (read again, raw events read again), at most ConflictRetries
// passes; a consumer write after the recount's write adds on top. The
// watermarks are kept, so a redelivered batch is still skipped; a
// rewritten session keeps its latest RecentEvents event ids, so a copy
// of an event delivered again is recognised as the consumer would.
//
// The guarantee: the range's items end equal to a from-scratch count of
// the raw events, and stay equal as the consumer adds events ingested
// after the recount's raw read (a late event dated in the range is added
// once, on top), provided no event dated in the range was in flight
// (ingested before the recount's raw read, applied by the consumer after
// its write): such an event is counted twice. A settled range (To at
// least Settle ago, no backfill into it running) has none; otherwise
// recount again once the consumer has caught up.
func Recount(ctx context.Context, cfg RecountConfig) (RecountResult, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return RecountResult{}, fmt.Errorf("recount: %w", err)
	}
	from, to := cfg.From.UTC(), cfg.To.UTC()
	out := RecountResult{Source: cfg.Source, From: from, To: to}
	wrap := func(err error) error {
		return fmt.Errorf("recount %s from %s to %s: %w", cfg.Source, from.Format(time.RFC3339), to.Format(time.RFC3339), err)
	}
	log := cfg.Logger.With("component", "analytics-recount", "source", cfg.Source, "from", from, "to", to)
	t := &table{client: cfg.Client, name: cfg.Table, sessionTTL: cfg.SessionTTL}
	in := func(at time.Time) bool { return !at.Before(from) && at.Before(to) }

	all := rangeBuckets(cfg.Source, from, to)
	pendingBuckets := slices.SortedFunc(maps.Keys(all), compareBuckets)
	var pendingSessions []string // nil before the first read
	bucketResults := map[rollup.Bucket]*BucketRecount{}
	sessionResults := map[string]*SessionRecount{}
	var known *recountRead // the latest raw read
	for pass := 1; len(pendingBuckets) > 0 || len(pendingSessions) > 0 || known == nil; pass++ {
		if pass > cfg.ConflictRetries {
			return out, wrap(fmt.Errorf("%d items still changing after %d passes: %w", len(pendingBuckets)+len(pendingSessions), pass-1, errConflict))
		}
		if known == nil {
			// Which sessions the range holds whole, to read their items
			// before the raw read the counts come from.
			first, err := readRaw(ctx, cfg, in, nil)
			if err != nil {
				return out, wrap(err)
			}
			pendingSessions = first.closed
		}
		// Read the items first, then the raw events: a consumer write
		// before the item read is of an event the raw read holds, one
		// after it fails the write's condition.
		storedBuckets := make(map[rollup.Bucket]storedBucket, len(pendingBuckets))
		for _, b := range pendingBuckets {
			st, err := t.readWholeBucket(ctx, b)
			if err != nil {
				return out, wrap(err)
			}
			storedBuckets[b] = st
		}
		storedSessions := make(map[string]*session, len(pendingSessions))
		for _, id := range pendingSessions {
			st, err := t.readSession(ctx, cfg.Source, id)
			if err != nil {
				return out, wrap(err)
			}
			storedSessions[id] = st
		}
		raw, err := readRaw(ctx, cfg, in, all)
		if err != nil {
			return out, wrap(err)
		}
		known = raw
		out.Events = raw.inRange
		fresh := raw.fresh

		var nextBuckets []rollup.Bucket
		for _, b := range pendingBuckets {
			r := bucketResults[b]
			if r == nil {
				r = &BucketRecount{Period: b.Period, Bucket: b.Name, Was: storedBuckets[b].counts}
				bucketResults[b] = r
			}
			changed, err := t.recountBucket(ctx, r, storedBuckets[b], fresh[b])
			switch {
			case errors.Is(err, errConflict):
				nextBuckets = append(nextBuckets, b)
			case err != nil:
				return out, wrap(err)
			case changed:
				r.Changed = true
				log.InfoContext(ctx, "aggregation rewritten", "period", r.Period, "bucket", r.Bucket, "was_events", r.Was.Events, "now_events", r.Now.Events)
			}
		}
		var nextSessions []string
		for _, id := range pendingSessions {
			folded := raw.sessions[id]
			if folded == nil || !folded.whole {
				continue // it grew outside the range meanwhile: the consumer's
			}
			r := sessionResults[id]
			if r == nil {
				r = &SessionRecount{SessionID: id, WasEvents: storedSessions[id].count}
				sessionResults[id] = r
			}
			changed, err := t.recountSession(ctx, cfg, r, storedSessions[id], folded.s)
			switch {
			case errors.Is(err, errConflict):
				nextSessions = append(nextSessions, id)
			case err != nil:
				return out, wrap(err)
			case changed:
				r.Changed = true
				log.InfoContext(ctx, "session rewritten", "session", id, "was_events", r.WasEvents, "now_events", r.NowEvents)
			}
		}
		if len(nextBuckets)+len(nextSessions) > 0 {
			log.InfoContext(ctx, "the consumer wrote items meanwhile; reading them again", "pass", pass, "aggregations", len(nextBuckets), "sessions", len(nextSessions))
		}
		pendingBuckets, pendingSessions = nextBuckets, nextSessions
	}
	for _, b := range slices.SortedFunc(maps.Keys(bucketResults), compareBuckets) {
		out.Buckets = append(out.Buckets, *bucketResults[b])
		if bucketResults[b].Changed {
			out.BucketsChanged++
		}
	}
	for _, id := range slices.Sorted(maps.Keys(sessionResults)) {
		out.Sessions = append(out.Sessions, *sessionResults[id])
		if sessionResults[id].Changed {
			out.SessionsChanged++
		}
	}
	return out, nil
}

func compareBuckets(a, b rollup.Bucket) int {
	if a.Period != b.Period {
		return strings.Compare(string(a.Period), string(b.Period))
	}
	return strings.Compare(a.Name, b.Name)
}

// recountRead is one read of a source's raw events: every session with
// an event in the range or its margins, folded as the consumer folds it,
// and the fresh count of the buckets asked for. It keeps a session's fold,
// not its events.
type recountRead struct {
	sessions map[string]*foldedSession
	closed   []string // sessions whose events are all in the range, sorted
	inRange  int      // events in the range
	fresh    map[rollup.Bucket]*rollup.Cell
}

// foldedSession is a session's raw events as read, folded in id order.
type foldedSession struct {
	s     *session
	whole bool // every event read is in the range
}

// readRaw reads the source's raw events of the range and of
// cfg.Margin on either side (analytics.Store.EachSourceEvent: by key
// range, a page per shard at a time), in id order, folding each into its
// session as it comes, and counts the contributions to the buckets of
// want (every one of them gets a cell).
func readRaw(ctx context.Context, cfg RecountConfig, in func(time.Time) bool, want map[rollup.Bucket]bool) (*recountRead, error) {
	r := &recountRead{sessions: map[string]*foldedSession{}}
	fresh := rollup.New()
	for b := range want {
		fresh.Touch(b)
	}
	lo, hi := cfg.From.Add(-cfg.Margin), cfg.To.Add(cfg.Margin)
	err := cfg.Events.EachSourceEvent(ctx, cfg.Source, lo, hi, func(e analytics.Event) error {
		id, err := ulid.ParseStrict(e.EventID)
		if err != nil {
			return &eventstore.DecodeError{What: "raw event " + e.EventID, Field: "eventId", Reason: err.Error()}
		}
		f := r.sessions[e.SessionID]
		if f == nil {
			f = &foldedSession{s: &session{}, whole: true}
			r.sessions[e.SessionID] = f
		}
		if in(e.CreatedAt) {
			r.inRange++
		} else {
			f.whole = false
		}
		cs, _ := f.s.apply(cfg.Source, delivery{offset: f.s.count, event: e, id: id}, cfg.RecentEvents)
		for _, c := range cs {
			if want[c.bucket] {
				fresh.AddTo(c.bucket, c.measures, c.user)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, id := range slices.Sorted(maps.Keys(r.sessions)) {
		if r.sessions[id].whole {
			r.closed = append(r.closed, id)
		}
	}
	r.fresh = make(map[rollup.Bucket]*rollup.Cell, len(want))
	for _, c := range fresh.Cells() {
		r.fresh[c.Bucket] = c
	}
	return r, nil
}

// rangeBuckets are the hourly buckets of [from, to) and the daily
// buckets of its whole days.
func rangeBuckets(source string, from, to time.Time) map[rollup.Bucket]bool {
	out := map[rollup.Bucket]bool{}
	for h := from; h.Before(to); h = h.Add(time.Hour) {
		out[rollup.BucketOf(source, analytics.Hourly, h)] = true
	}
	for d := analytics.Daily.Start(from); d.Before(to); d = d.Add(analytics.Daily.Length()) {
		if !d.Before(from) && !d.Add(analytics.Daily.Length()).After(to) {
			out[rollup.BucketOf(source, analytics.Daily, d)] = true
		}
	}
	return out
}

// recountSession writes session r.SessionID as folded from its raw
// events (s) unless stored, the item read before them, already says the
// same; conditional on stored's version (errConflict when the consumer
// wrote it since).
func (t *table) recountSession(ctx context.Context, cfg RecountConfig, r *SessionRecount, stored, s *session) (bool, error) {
	r.NowEvents = s.count
	if sameSession(stored, s) {
		return false, nil
	}
	s.stored, s.version = stored.stored, stored.version
	if err := t.putSession(ctx, cfg.Source, r.SessionID, s); err != nil {
		return false, err
	}
	return true, nil
}

// sameSession compares what a session item says (not its version or
// the order of its recent ids).
func sameSession(a, b *session) bool {
	return a.stored && a.count == b.count && a.userID == b.userID && a.first == b.first && a.last == b.last &&
		a.firstAt.Equal(b.firstAt) && a.lastAt.Equal(b.lastAt) && a.entry == b.entry && a.exit == b.exit &&
		a.entryURL == b.entryURL && a.exitURL == b.exitURL
}

// storedBucket is an aggregation item as the recount reads it.
type storedBucket struct {
	exists   bool
	counters map[string]int64  // events, pageViews, sessions, type#*
	marks    map[string]string // wm#<partition> → its number, as stored
	users    []string          // users#* attributes
	counts   Counts
}

func (t *table) readWholeBucket(ctx context.Context, b rollup.Bucket) (storedBucket, error) {
	k := aggregationKey(b)
	res, err := t.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(t.name), Key: k.Attributes(), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return storedBucket{}, fmt.Errorf("read aggregation %s/%s: %w", k.PK, k.SK, err)
	}
	st := storedBucket{exists: len(res.Item) > 0, counters: map[string]int64{}, marks: map[string]string{}}
	var sketches [][]byte
	for name, v := range res.Item {
		switch {
		case name == analytics.AttrEvents || name == analytics.AttrPageViews || name == analytics.AttrSessions || strings.HasPrefix(name, analytics.AttrPerTypePrefix):
			n, _, err := num(res.Item, name)
			if err != nil {
				return storedBucket{}, fmt.Errorf("read aggregation %s/%s: %w", k.PK, k.SK, err)
			}
			st.counters[name] = n
		case strings.HasPrefix(name, analytics.AttrWatermarkPrefix):
			if n, ok := v.(*types.AttributeValueMemberN); ok {
				st.marks[name] = n.Value
			}
		case strings.HasPrefix(name, analytics.AttrUsersPrefix):
			st.users = append(st.users, name)
			sketches = append(sketches, bin(res.Item, name))
		}
	}
	st.counts = countsOf(st.counters)
	merged, err := rollup.MergeSketches(sketches...)
	if err != nil {
		return storedBucket{}, fmt.Errorf("read aggregation %s/%s: %w", k.PK, k.SK, err)
	}
	st.counts.UniqueUsers = int64(merged.Estimate())
	return st, nil
}

func countsOf(m map[string]int64) Counts {
	c := Counts{Events: m[analytics.AttrEvents], PageViews: m[analytics.AttrPageViews], Sessions: m[analytics.AttrSessions]}
	for name, v := range m {
		if typ, ok := strings.CutPrefix(name, analytics.AttrPerTypePrefix); ok && v != 0 {
			if c.PerType == nil {
				c.PerType = map[string]int64{}
			}
			c.PerType[typ] = v
		}
	}
	return c
}

// recountBucket writes cell's counts as its bucket's item unless st,
// the item read before the raw events, already holds them; conditional
// on the item's counters and watermarks being st's (errConflict when the
// consumer wrote it since).
func (t *table) recountBucket(ctx context.Context, r *BucketRecount, st storedBucket, cell *rollup.Cell) (bool, error) {
	r.Now = countsOf(cell.Measures)
	var users []byte
	if cell.Distinct != nil {
		r.Now.UniqueUsers = int64(cell.Distinct.Estimate())
		var err error
		if users, err = cell.Distinct.MarshalBinary(); err != nil {
			return false, fmt.Errorf("encode sketch: %w", err)
		}
	}
	if st.counts.equal(r.Now) && (st.exists || r.Now.Events == 0) {
		return false, nil
	}
	if err := t.replaceBucket(ctx, cell.Bucket, st, cell.Measures, users); err != nil {
		return false, err
	}
	return true, nil
}

// replaceBucket sets the item's counters to m (removing the per-type
// counters m does not have), its users to one sketch (AttrRecountUsers),
// and keeps its watermarks, if its counters and watermarks are still st's;
// else errConflict.
func (t *table) replaceBucket(ctx context.Context, b rollup.Bucket, st storedBucket, m rollup.Measures, users []byte) error {
	names := map[string]string{}
	values := item{}
	name := func(attr string) string {
		n := "#a" + strconv.Itoa(len(names))
		names[n] = attr
		return n
	}
	value := func(v types.AttributeValue) string {
		n := ":v" + strconv.Itoa(len(values))
		values[n] = v
		return n
	}
	var set, remove, cond []string
	want := map[string]int64{analytics.AttrEvents: 0, analytics.AttrPageViews: 0, analytics.AttrSessions: 0}
	for k, v := range m {
		if v != 0 || !strings.HasPrefix(k, analytics.AttrPerTypePrefix) {
			want[k] = v
		}
	}
	for _, attr := range slices.Sorted(maps.Keys(want)) {
		set = append(set, name(attr)+" = "+value(ddbattr.N(want[attr])))
	}
	for _, attr := range slices.Sorted(maps.Keys(st.counters)) {
		if _, ok := want[attr]; !ok {
			remove = append(remove, name(attr))
		}
	}
	sort.Strings(st.users)
	for _, attr := range st.users {
		if attr != AttrRecountUsers || users == nil {
			remove = append(remove, name(attr))
		}
	}
	if users != nil {
		set = append(set, name(AttrRecountUsers)+" = "+value(&types.AttributeValueMemberB{Value: users}))
	}
	// The guard: nothing the consumer writes has moved since the read.
	if !st.exists {
		cond = append(cond, "attribute_not_exists("+name(analytics.AttrPK)+")")
	}
	for _, attr := range []string{analytics.AttrEvents, analytics.AttrPageViews, analytics.AttrSessions} {
		if v, ok := st.counters[attr]; ok {
			cond = append(cond, name(attr)+" = "+value(ddbattr.N(v)))
		} else if st.exists {
			cond = append(cond, "attribute_not_exists("+name(attr)+")")
		}
	}
	for _, attr := range slices.Sorted(maps.Keys(st.counters)) {
		if strings.HasPrefix(attr, analytics.AttrPerTypePrefix) {
			cond = append(cond, name(attr)+" = "+value(ddbattr.N(st.counters[attr])))
		}
	}
	for _, attr := range slices.Sorted(maps.Keys(st.marks)) {
		cond = append(cond, name(attr)+" = "+value(&types.AttributeValueMemberN{Value: st.marks[attr]}))
	}
	expr := "SET " + strings.Join(set, ", ")
	if len(remove) > 0 {
		expr += " REMOVE " + strings.Join(remove, ", ")
	}
	return t.updateAggregation(ctx, b, expr, strings.Join(cond, " AND "), names, values)
}
