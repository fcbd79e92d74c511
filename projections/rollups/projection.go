package rollups

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/rollup"
)

// MaxNameLength bounds a roll-up's name, so that its table and the
// version table of its migrations (eventpipe_schema_version_<name>) fit
// Postgres' 63-byte identifiers.
const MaxNameLength = 38

var validName = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// Definition says what a roll-up adds up.
type Definition struct {
	// Name names the roll-up: its positions, its consumer group
	// (projection.<name>) and its table (rollup_<name>, '-' as '_').
	// Lower-case letters, digits, '_' and '-', starting with a letter, at
	// most MaxNameLength bytes. Required.
	Name string
	// AggregateTypes are the aggregate types whose events it reads (the
	// topics events.<type>). Required.
	AggregateTypes []string
	// EventTypes are the event types it adds up, and what catch-up and
	// replay read from the store. Events of other types of its aggregate
	// types are skipped, so that the live roll-up and a replay count the
	// same events. Required.
	EventTypes []string
	// Measure returns what e adds to the buckets holding e.OccurredAt
	// (hourly and daily): counters by name, for example {"orders": 1,
	// "placed_total": 120}. Nothing (nil or empty) adds nothing. It is
	// called once per event applied, exactly once in effect, and must
	// depend on e alone: no I/O, no clock, so that a replay adds up the
	// same; appliers may call it concurrently. An error fails the
	// transaction; make it permanent (a *eventstore.DecodeError, as
	// Envelope.DecodePayload returns, or a *eventstore.ValidationError)
	// for an event that can never be measured, and the event goes to the
	// poison topic. Required.
	Measure func(e eventstore.Envelope) (rollup.Measures, error)
}

// Validate reports the first missing or invalid field.
func (d Definition) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("rollups: Definition %s: %w", d.Name, &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch {
	case !validName.MatchString(d.Name):
		return bad("Name", "%q: want lower-case letters, digits, '_' and '-', starting with a letter", d.Name)
	case len(d.Name) > MaxNameLength:
		return bad("Name", "%q: %d bytes, at most %d", d.Name, len(d.Name), MaxNameLength)
	case len(d.AggregateTypes) == 0:
		return bad("AggregateTypes", "is empty")
	case len(d.EventTypes) == 0:
		return bad("EventTypes", "is empty")
	case d.Measure == nil:
		return bad("Measure", "is nil")
	}
	return nil
}

// Table is the table of the roll-up called name: rollup_<name>, with
// every '-' as '_'.
func Table(name string) string { return "rollup_" + strings.ReplaceAll(name, "-", "_") }

// Projection is a roll-up as a projection: a projections.Projection,
// BatchProjection, EventTyper, Rebuildable and Migrator. Build it with
// New; it holds no state between calls and is safe for concurrent use
// when its Measure is.
type Projection struct {
	def    Definition
	counts map[string]bool // event types added up
	insert string          // the statement that adds a batch's cells
}

// New validates def and returns its projection.
func New(def Definition) (*Projection, error) {
	if err := def.Validate(); err != nil {
		return nil, err
	}
	def.AggregateTypes = slices.Clone(def.AggregateTypes)
	def.EventTypes = slices.Clone(def.EventTypes)
	counts := make(map[string]bool, len(def.EventTypes))
	for _, t := range def.EventTypes {
		counts[t] = true
	}
	table := pgx.Identifier{Table(def.Name)}.Sanitize()
	insert := `INSERT INTO ` + table + ` AS r (period, bucket, measure, value)
		SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::bigint[])
		ON CONFLICT (period, bucket, measure) DO UPDATE SET value = r.value + EXCLUDED.value`
	return &Projection{def: def, counts: counts, insert: insert}, nil
}

// Name implements projections.Projection.
func (p *Projection) Name() string { return p.def.Name }

// AggregateTypes implements projections.Projection.
func (p *Projection) AggregateTypes() []string { return slices.Clone(p.def.AggregateTypes) }

// EventTypes implements projections.EventTyper.
func (p *Projection) EventTypes() []string { return slices.Clone(p.def.EventTypes) }

// Tables implements projections.Rebuildable: the roll-up's one table.
func (p *Projection) Tables() []string { return []string{Table(p.def.Name)} }

// Migrations implements projections.Migrator: one migration,
// 001_create.sql, creating the roll-up's table.
func (p *Projection) Migrations() fs.FS { return createTable(Table(p.def.Name)) }

// Apply implements projections.Projection: ApplyBatch of e alone.
func (p *Projection) Apply(ctx context.Context, b *pgx.Batch, e eventstore.Envelope) error {
	return p.ApplyBatch(ctx, b, []eventstore.Envelope{e})
}

// ApplyBatch implements projections.BatchProjection: it adds up what
// Measure says of each event of the roll-up's event types, per hourly
// and daily bucket, and queues one statement adding the sums to the
// table (none when they add nothing). An error of Measure is returned,
// naming the event.
func (p *Projection) ApplyBatch(_ context.Context, b *pgx.Batch, events []eventstore.Envelope) error {
	r := rollup.New(rollup.Periods...)
	for _, e := range events {
		if !p.counts[e.EventType] {
			continue
		}
		m, err := p.def.Measure(e)
		if err != nil {
			return fmt.Errorf("%s: %w", e, err)
		}
		if len(m) > 0 {
			r.Add("", e.OccurredAt, m, "")
		}
	}
	if r.Len() == 0 {
		return nil
	}
	var (
		periods, measures []string
		buckets           []time.Time
		values            []int64
	)
	// Rows in key order, so that concurrent transactions lock the rows
	// they share in the same order and cannot deadlock.
	for _, c := range r.Cells() {
		start := c.Start()
		for _, name := range slices.Sorted(maps.Keys(c.Measures)) {
			periods, buckets = append(periods, string(c.Period)), append(buckets, start)
			measures, values = append(measures, name), append(values, c.Measures[name])
		}
	}
	b.Queue(p.insert, periods, buckets, measures, values)
	return nil
}
