package rollups_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/projections/rollups"
	"github.com/eventpipe/eventpipe/rollup"
)

// TestReadRejectsBadQueriesWithTypedErrors: a bad name or period, from
// after to, or a range of more buckets than MaxBuckets is a
// *QueryError naming the parameter, before anything is read.
func TestReadRejectsBadQueriesWithTypedErrors(t *testing.T) {
	db := testenv.Postgres(t) // no roll-up table: a query that ran would fail otherwise
	day := base
	for _, c := range []struct {
		name, param string
		rollup      string
		period      rollup.Period
		from, to    time.Time
	}{
		{"unknown period", "period", rollups.OrdersName, "weekly", day, day},
		{"empty period", "period", rollups.OrdersName, "", day, day},
		{"from after to", "to", rollups.OrdersName, rollup.Daily, day.Add(time.Hour), day},
		{"zero from", "from", rollups.OrdersName, rollup.Daily, time.Time{}, day},
		{"too many hours", "to", rollups.OrdersName, rollup.Hourly, day, day.Add(rollups.MaxBuckets * time.Hour)},
		{"too many days", "to", rollups.OrdersName, rollup.Daily, day, day.AddDate(30, 0, 0)},
		{"bad name", "name", "Orders; DROP TABLE x", rollup.Daily, day, day},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := rollups.Read(context.Background(), db, c.rollup, c.period, c.from, c.to)
			var qe *rollups.QueryError
			if !errors.As(err, &qe) || qe.Param != c.param {
				t.Fatalf("Read = %v, want a *QueryError on %q", err, c.param)
			}
		})
	}
	// The widest range allowed is read.
	if _, err := rollups.Read(context.Background(), db, rollups.OrdersName, rollup.Hourly, day, day.Add((rollups.MaxBuckets-1)*time.Hour)); errors.As(err, new(*rollups.QueryError)) {
		t.Fatalf("MaxBuckets hours refused: %v", err)
	}
}

// TestParseQueryReadsTimesAndDatesAndNamesTheBadParameter: from and to
// take RFC 3339 times or dates (to: the whole day); a missing, repeated,
// unknown or malformed parameter is a *QueryError naming it.
func TestParseQueryReadsTimesAndDatesAndNamesTheBadParameter(t *testing.T) {
	q, err := rollups.ParseQuery(url.Values{"period": {"hourly"}, "from": {"2026-03-01"}, "to": {"2026-03-02"}})
	if err != nil {
		t.Fatal(err)
	}
	if !q.From.Equal(base) || q.Period.Bucket(q.To) != "2026-03-02T23:00:00Z" || q.Buckets() != 48 {
		t.Fatalf("dates read as %+v (%d buckets), want 2026-03-01 00:00 to the end of 2026-03-02, 48 hours", q, q.Buckets())
	}
	q, err = rollups.ParseQuery(url.Values{"period": {"daily"}, "from": {"2026-03-01T22:30:00+02:00"}, "to": {"2026-03-03T00:00:00Z"}})
	if err != nil {
		t.Fatal(err)
	}
	if q.Period.Bucket(q.From) != "2026-03-01" || q.Period.Bucket(q.To) != "2026-03-03" || q.Buckets() != 3 {
		t.Fatalf("times read as %+v", q)
	}
	for _, c := range []struct {
		name, query, param string
	}{
		{"no period", "from=2026-03-01&to=2026-03-02", "period"},
		{"bad period", "period=weekly&from=2026-03-01&to=2026-03-02", "period"},
		{"no from", "period=daily&to=2026-03-02", "from"},
		{"no to", "period=daily&from=2026-03-02", "to"},
		{"bad from", "period=daily&from=yesterday&to=2026-03-02", "from"},
		{"bad to", "period=daily&from=2026-03-01&to=2026-13-02", "to"},
		{"to before from", "period=daily&from=2026-03-02&to=2026-03-01", "to"},
		{"too many buckets", "period=hourly&from=2020-01-01&to=2026-03-01", "to"},
		{"repeated", "period=daily&period=hourly&from=2026-03-01&to=2026-03-02", "period"},
		{"unknown", "period=daily&from=2026-03-01&to=2026-03-02&size=3", "size"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := url.ParseQuery(c.query)
			if err != nil {
				t.Fatal(err)
			}
			_, err = rollups.ParseQuery(v)
			var qe *rollups.QueryError
			if !errors.As(err, &qe) || qe.Param != c.param {
				t.Fatalf("ParseQuery(%s) = %v, want a *QueryError on %q", c.query, err, c.param)
			}
		})
	}
}

// TestDefinitionValidateNamesTheBadField and the generated migration is
// a well-formed file system.
func TestDefinitionValidateNamesTheBadField(t *testing.T) {
	good := rollups.OrdersDefinition()
	for _, c := range []struct {
		name, want string
		edit       func(*rollups.Definition)
	}{
		{"empty name", "Name", func(d *rollups.Definition) { d.Name = "" }},
		{"upper case", "Name", func(d *rollups.Definition) { d.Name = "Orders" }},
		{"quote", "Name", func(d *rollups.Definition) { d.Name = `a"b` }},
		{"long name", "Name", func(d *rollups.Definition) { d.Name = strings.Repeat("a", rollups.MaxNameLength+1) }},
		{"no aggregate types", "AggregateTypes", func(d *rollups.Definition) { d.AggregateTypes = nil }},
		{"no event types", "EventTypes", func(d *rollups.Definition) { d.EventTypes = nil }},
		{"no measure", "Measure", func(d *rollups.Definition) { d.Measure = nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := good
			c.edit(&d)
			_, err := rollups.New(d)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New = %v, want an error naming %s", err, c.want)
			}
			if ve := new(eventstore.ValidationError); !errors.As(err, &ve) || ve.Field != c.want {
				t.Fatalf("New = %v, want an *eventstore.ValidationError on %s", err, c.want)
			}
		})
	}
	d := good
	d.Name = strings.Repeat("a", rollups.MaxNameLength)
	d.Measure = func(eventstore.Envelope) (rollup.Measures, error) { return nil, nil }
	p, err := rollups.New(d)
	if err != nil {
		t.Fatal(err)
	}
	if got := rollups.Orders().Tables(); len(got) != 1 || got[0] != "rollup_order_rollups" {
		t.Fatalf("order roll-up tables %v", got)
	}
	if err := fstest.TestFS(p.Migrations(), "001_create.sql"); err != nil {
		t.Fatal(err)
	}
}
