package rollups

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe/rollup"
)

// MaxBuckets bounds the buckets one Read may span.
const MaxBuckets = 10_000

// QueryError is a read that cannot be run: Param names the parameter at
// fault ("name", "period", "from", "to", or an unknown one). HTTP
// answers it with 400.
type QueryError struct {
	Param  string
	Reason string
}

func (e *QueryError) Error() string {
	return fmt.Sprintf("roll-up parameter %q: %s", e.Param, e.Reason)
}

// Query is the range of a Read: the buckets of Period from the one
// holding From to the one holding To, both included.
type Query struct {
	Period   rollup.Period
	From, To time.Time
}

// Buckets is the number of buckets q spans (0 for an unknown period or
// To before From).
func (q Query) Buckets() int64 {
	length := q.Period.Length()
	if length == 0 || q.From.After(q.To) {
		return 0
	}
	return int64(q.Period.Start(q.To).Sub(q.Period.Start(q.From))/length) + 1
}

// Validate reports the first invalid field as a *QueryError: a period
// other than hourly or daily, To before From, or a range of more than
// MaxBuckets buckets.
func (q Query) Validate() error {
	switch {
	case !q.Period.Valid():
		return &QueryError{Param: "period", Reason: fmt.Sprintf("%q is not a period (hourly, daily)", q.Period)}
	case q.From.IsZero():
		return &QueryError{Param: "from", Reason: "is missing"}
	case q.To.IsZero():
		return &QueryError{Param: "to", Reason: "is missing"}
	case q.From.After(q.To):
		return &QueryError{Param: "to", Reason: fmt.Sprintf("%s is before from %s", q.To.UTC().Format(time.RFC3339), q.From.UTC().Format(time.RFC3339))}
	case q.Buckets() > MaxBuckets:
		return &QueryError{Param: "to", Reason: fmt.Sprintf("the range spans %d %s buckets, at most %d", q.Buckets(), q.Period, MaxBuckets)}
	}
	return nil
}

// ParseQuery reads a Query from the URL parameters period (hourly or
// daily), from and to, all required, each given once; any other
// parameter is an error. from and to are RFC 3339 times
// (2026-05-12T14:30:00Z) or dates (2026-05-12, UTC): a date as from is
// the start of its day, as to the whole day. Every error is a
// *QueryError.
func ParseQuery(v url.Values) (Query, error) {
	known := []string{"period", "from", "to"}
	names := make([]string, 0, len(v))
	for k := range v {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		switch {
		case !slices.Contains(known, k):
			return Query{}, &QueryError{Param: k, Reason: "unknown parameter (known: " + strings.Join(known, ", ") + ")"}
		case len(v[k]) > 1:
			return Query{}, &QueryError{Param: k, Reason: "given more than once"}
		}
	}
	if v.Get("period") == "" {
		return Query{}, &QueryError{Param: "period", Reason: "is missing (hourly, daily)"}
	}
	q := Query{Period: rollup.Period(v.Get("period"))}
	var err error
	if q.From, err = parseTime("from", v.Get("from"), false); err != nil {
		return Query{}, err
	}
	if q.To, err = parseTime("to", v.Get("to"), true); err != nil {
		return Query{}, err
	}
	return q, q.Validate()
}

// parseTime reads an RFC 3339 time or a date; a date is the start of its
// day, or with wholeDay its last instant.
func parseTime(param, s string, wholeDay bool) (time.Time, error) {
	if s == "" {
		return time.Time{}, &QueryError{Param: param, Reason: "is missing (an RFC 3339 time or a date, YYYY-MM-DD)"}
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	d, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return time.Time{}, &QueryError{Param: param, Reason: fmt.Sprintf("%q is neither an RFC 3339 time nor a date (YYYY-MM-DD)", s)}
	}
	if wholeDay {
		d = d.Add(24*time.Hour - time.Nanosecond)
	}
	return d, nil
}

// Row is one bucket of a roll-up.
type Row struct {
	Period rollup.Period `json:"period"`
	// Bucket names the bucket (rollup.Period.Bucket): 2026-05-12T14:00:00Z
	// for an hour, 2026-05-12 for a day.
	Bucket string `json:"bucket"`
	// Start is when the bucket begins, UTC.
	Start time.Time `json:"start"`
	// Measures are the bucket's sums by measure name. A measure no event
	// of the bucket named is absent.
	Measures rollup.Measures `json:"measures"`
}

// Querier runs a query: *pgxpool.Pool, *pgx.Conn and pgx.Tx are ones.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Read returns the buckets of period of the roll-up called name from the
// bucket holding from to the bucket holding to, both included, oldest
// first (none: an empty slice). Buckets nothing was added to are left
// out. A bad name or period,
// from after to, or a range of more than MaxBuckets buckets is a
// *QueryError. It reads the table rollup_<name> of db's search_path.
func Read(ctx context.Context, db Querier, name string, period rollup.Period, from, to time.Time) ([]Row, error) {
	q := Query{Period: period, From: from, To: to}
	wrap := func(err error) error {
		return fmt.Errorf("rollups: read %s %s from %s to %s: %w", name, period, period.Bucket(from), period.Bucket(to), err)
	}
	if !validName.MatchString(name) || len(name) > MaxNameLength {
		return nil, wrap(&QueryError{Param: "name", Reason: fmt.Sprintf("%q is not a roll-up name", name)})
	}
	if err := q.Validate(); err != nil {
		return nil, wrap(err)
	}
	rows, err := db.Query(ctx, `SELECT bucket, measure, value FROM `+pgx.Identifier{Table(name)}.Sanitize()+`
		WHERE period = $1 AND bucket BETWEEN $2 AND $3 ORDER BY bucket, measure`,
		string(period), period.Start(from), period.Start(to))
	if err != nil {
		return nil, wrap(err)
	}
	out := []Row{}
	var (
		bucket  time.Time
		measure string
		value   int64
	)
	_, err = pgx.ForEachRow(rows, []any{&bucket, &measure, &value}, func() error {
		if n := len(out); n == 0 || !out[n-1].Start.Equal(bucket) {
			start := bucket.UTC()
			out = append(out, Row{Period: period, Bucket: period.Bucket(start), Start: start, Measures: rollup.Measures{}})
		}
		out[len(out)-1].Measures[measure] = value
		return nil
	})
	if err != nil {
		return nil, wrap(err)
	}
	return out, nil
}
