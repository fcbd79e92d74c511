package rollups_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/order"
	"github.com/eventpipe/eventpipe/eventstore"
	store "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	migrate "github.com/eventpipe/eventpipe/migrations/dynamodb"
	pgmigrate "github.com/eventpipe/eventpipe/migrations/postgres"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/rollups"
	"github.com/eventpipe/eventpipe/rollup"
)

// The built-in roll-up is every kind of projection a roll-up is meant to
// be.
var (
	_ projections.BatchProjection = (*rollups.Projection)(nil)
	_ projections.Rebuildable     = (*rollups.Projection)(nil)
	_ projections.Migrator        = (*rollups.Projection)(nil)
)

// world is a fresh events table and a fresh Postgres schema with
// eventpipe's migrations and the order roll-up's.
type world struct {
	store  *store.Store
	db     *pgxpool.Pool
	schema string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	ddb := testenv.DynamoDB(t)
	table := testenv.UniqueName(t, "events")
	if err := migrate.CreateEventsTable(ctx, ddb, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, ddb, table) })
	s, err := store.New(store.Config{Client: ddb, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	schema, url := testenv.PostgresSchema(t, "ru")
	if err := migrateSchema(ctx, schema, rollups.Orders()); err != nil {
		t.Fatal(err)
	}
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return &world{store: s, db: db, schema: schema}
}

// migrateSchema applies eventpipe's migrations and p's to schema, as
// eventpipe.Migrate does.
func migrateSchema(ctx context.Context, schema string, p *rollups.Projection) error {
	url := testenv.Endpoints().Postgres
	if _, err := pgmigrate.Migrate(ctx, pgmigrate.Config{URL: url, Schema: schema}); err != nil {
		return err
	}
	_, err := pgmigrate.Migrate(ctx, pgmigrate.Config{URL: url, Schema: schema, Migrations: p.Migrations(),
		VersionTable: pgmigrate.ReadModelVersionTable(p.Name())})
	return err
}

func (w *world) applier(t *testing.T, p projections.Projection) *projections.Applier {
	t.Helper()
	a, err := projections.NewApplier(projections.ApplierConfig{DB: w.db, Store: w.store, Projection: p})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// base is the start of the three days the generated orders happen on.
var base = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// appendOrders appends n orders, placed over three days from base (some
// on the first instant of an hour, some on the last second of a day),
// each then paid (mostly), shipped and delivered (some), refunded in part
// or twice (a few), a few hours apart. It returns the stored events.
func (w *world) appendOrders(t *testing.T, rng *rand.Rand, prefix string, n int) []eventstore.Envelope {
	t.Helper()
	var all []eventstore.Envelope
	for i := range n {
		at := base.Add(time.Duration(rng.IntN(72*3600)) * time.Second)
		switch i % 10 {
		case 3:
			at = at.Truncate(time.Hour)
		case 7:
			at = at.Truncate(24 * time.Hour).Add(24*time.Hour - time.Second)
		}
		total := int64(100 + rng.IntN(10_000))
		evs := []eventstore.NewEvent{event(order.OrderPlaced, order.OrderPlacedData{Customer: fmt.Sprint("c", rng.IntN(20)), Total: total}, at)}
		later := func() time.Time {
			at = at.Add(time.Duration(rng.IntN(5*3600)) * time.Second)
			return at
		}
		if rng.IntN(10) < 8 {
			evs = append(evs, event(order.PaymentProcessed, order.PaymentProcessedData{Amount: total}, later()))
			if rng.IntN(2) == 0 {
				evs = append(evs, event(order.OrderShipped, order.OrderShippedData{TrackingNumber: "T"}, later()),
					event(order.OrderDelivered, struct{}{}, later()))
			}
			for range rng.IntN(3) {
				evs = append(evs, event(order.OrderRefunded, order.OrderRefundedData{Amount: 1 + int64(rng.IntN(50))}, later()))
			}
		}
		all = append(all, w.appendEvents(t, eventstore.Ref{Type: order.AggregateType, ID: fmt.Sprintf("%s-%03d", prefix, i)}, 0, evs...)...)
	}
	return all
}

func event(eventType string, v any, at time.Time) eventstore.NewEvent {
	e := eventstore.Event(eventType, v)
	e.OccurredAt = at
	return e
}

func (w *world) appendEvents(t *testing.T, ref eventstore.Ref, version int64, events ...eventstore.NewEvent) []eventstore.Envelope {
	t.Helper()
	req, err := eventstore.Prepare(ref, version, eventstore.Change{Events: events}, eventstore.Schema{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.store.Append(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res.Events
}

// bucketKey is a bucket of the expected roll-up.
type bucketKey struct {
	period rollup.Period
	start  time.Time
}

// expected adds up events the plain way: per event, its hour and its
// day, its payload as appended.
func expected(t *testing.T, events []eventstore.Envelope) map[bucketKey]rollup.Measures {
	t.Helper()
	out := map[bucketKey]rollup.Measures{}
	for _, e := range events {
		var d struct {
			Total  int64 `json:"total"`
			Amount int64 `json:"amount"`
		}
		if err := json.Unmarshal(e.Payload, &d); err != nil {
			t.Fatal(err)
		}
		var count, sum string
		var amount int64
		switch e.EventType {
		case order.OrderPlaced:
			count, sum, amount = "orders", "placed_total", d.Total
		case order.PaymentProcessed:
			count, sum, amount = "payments", "revenue", d.Amount
		case order.OrderRefunded:
			count, sum, amount = "refunds", "refunded", d.Amount
		default:
			continue
		}
		at := e.OccurredAt.UTC()
		hour := time.Date(at.Year(), at.Month(), at.Day(), at.Hour(), 0, 0, 0, time.UTC)
		day := time.Date(at.Year(), at.Month(), at.Day(), 0, 0, 0, 0, time.UTC)
		for _, k := range []bucketKey{{rollup.Hourly, hour}, {rollup.Daily, day}} {
			if out[k] == nil {
				out[k] = rollup.Measures{}
			}
			out[k][count]++
			out[k][sum] += amount
		}
	}
	return out
}

// read reads every bucket of the generated days, both periods.
func read(t *testing.T, db rollups.Querier, name string) map[bucketKey]rollup.Measures {
	t.Helper()
	out := map[bucketKey]rollup.Measures{}
	for _, p := range rollup.Periods {
		rows, err := rollups.Read(context.Background(), db, name, p, base.Add(-24*time.Hour), base.Add(5*24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rows {
			if i > 0 && !rows[i-1].Start.Before(r.Start) {
				t.Fatalf("%s rows out of order: %s after %s", p, r.Bucket, rows[i-1].Bucket)
			}
			if r.Period != p || r.Bucket != p.Bucket(r.Start) || r.Start.Location() != time.UTC {
				t.Fatalf("row %+v of a %s read", r, p)
			}
			out[bucketKey{p, r.Start}] = r.Measures
		}
	}
	return out
}

func equalRollups(t *testing.T, got, want map[bucketKey]rollup.Measures) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d buckets, want %d", len(got), len(want))
	}
	for k, w := range want {
		if g := got[k]; !maps.Equal(g, w) {
			t.Errorf("%s %s: %v, want %v", k.period, k.start.Format(time.RFC3339), g, w)
		}
	}
}

// counting wraps a roll-up to count what the Applier asks of it.
type counting struct {
	*rollups.Projection
	batches, events, statements   int
	applies, statementsOverOnePer int
}

func (c *counting) Apply(ctx context.Context, b *pgx.Batch, e eventstore.Envelope) error {
	c.applies++
	return c.Projection.Apply(ctx, b, e)
}

func (c *counting) ApplyBatch(ctx context.Context, b *pgx.Batch, events []eventstore.Envelope) error {
	before := b.Len()
	err := c.Projection.ApplyBatch(ctx, b, events)
	c.batches++
	c.events += len(events)
	c.statements += b.Len() - before
	if b.Len()-before > 1 {
		c.statementsOverOnePer++
	}
	return err
}

// TestOrderRollupEqualsAnExactCountOverThreeDays appends 150 orders
// spread over three days and delivers their events twice over, shuffled,
// in random batches (so that some arrive before the events before them
// and are repaired from the store) through projections.Applier: every
// hourly and daily bucket equals the count and sums computed event by
// event, each event was added once, and the Applier handed each
// transaction's events to ApplyBatch, which queued one statement, never
// calling Apply.
func TestOrderRollupEqualsAnExactCountOverThreeDays(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	rng := rand.New(rand.NewPCG(15, 1))
	events := w.appendOrders(t, rng, "o", 150)
	deliveries := append(append([]eventstore.Envelope{}, events...), events...)
	rng.Shuffle(len(deliveries), func(i, j int) { deliveries[i], deliveries[j] = deliveries[j], deliveries[i] })

	p := &counting{Projection: rollups.Orders()}
	a := w.applier(t, p)
	transactions, applied, repaired, skipped := 0, 0, 0, 0
	for len(deliveries) > 0 {
		n := min(len(deliveries), 1+rng.IntN(80))
		out, err := a.Apply(ctx, deliveries[:n])
		if err != nil {
			t.Fatal(err)
		}
		if out.Applied+out.Repaired > 0 {
			transactions++
		}
		applied += out.Applied + out.Repaired
		repaired += out.Repaired
		skipped += out.Skipped
		deliveries = deliveries[n:]
	}
	if repaired == 0 || skipped < len(events) {
		t.Fatalf("%d events repaired and %d skipped: the deliveries did not exercise gap repair and duplicates", repaired, skipped)
	}
	want := expected(t, events)
	equalRollups(t, read(t, w.db, rollups.OrdersName), want)
	var hourlyOrders, dailyOrders int64
	for k, m := range want {
		if k.period == rollup.Hourly {
			hourlyOrders += m["orders"]
		} else {
			dailyOrders += m["orders"]
		}
	}
	if hourlyOrders != 150 || dailyOrders != 150 {
		t.Errorf("expected roll-up counts %d orders hourly and %d daily, want 150", hourlyOrders, dailyOrders)
	}
	if applied != len(events) || p.events != len(events) {
		t.Errorf("applied %d events, ApplyBatch got %d; want each of the %d once", applied, p.events, len(events))
	}
	if p.applies != 0 || p.batches != transactions || p.statementsOverOnePer != 0 || p.statements > p.batches || p.statements == 0 {
		t.Errorf("Apply called %d times; ApplyBatch %d times for %d transactions, %d statements (%d calls with more than one)",
			p.applies, p.batches, transactions, p.statements, p.statementsOverOnePer)
	}
}

// TestConcurrentAppliersAddEachEventOnce races 8 appliers, each
// delivering every event of 60 orders in its own shuffled order, in
// transactions that update the same day buckets at the same time: no
// transaction fails (none deadlocks) and every bucket equals the exact
// count.
func TestConcurrentAppliersAddEachEventOnce(t *testing.T) {
	w := newWorld(t)
	events := w.appendOrders(t, rand.New(rand.NewPCG(15, 6)), "o", 60)
	var wg sync.WaitGroup
	for i := range 8 {
		a := w.applier(t, rollups.Orders())
		rng := rand.New(rand.NewPCG(16, uint64(i)))
		mine := append([]eventstore.Envelope{}, events...)
		rng.Shuffle(len(mine), func(i, j int) { mine[i], mine[j] = mine[j], mine[i] })
		wg.Go(func() {
			for len(mine) > 0 {
				n := min(len(mine), 1+rng.IntN(40))
				if _, err := a.Apply(context.Background(), mine[:n]); err != nil {
					t.Error(err)
					return
				}
				mine = mine[n:]
			}
		})
	}
	wg.Wait()
	equalRollups(t, read(t, w.db, rollups.OrdersName), expected(t, events))
}

// TestApplyAloneAddsWhatApplyBatchAdds queues Apply event by event
// outside the Applier: the roll-up equals the exact count too.
func TestApplyAloneAddsWhatApplyBatchAdds(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	events := w.appendOrders(t, rand.New(rand.NewPCG(15, 2)), "o", 30)
	p := rollups.Orders()
	var b pgx.Batch
	for _, e := range events {
		if err := p.Apply(ctx, &b, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.db.SendBatch(ctx, &b).Close(); err != nil {
		t.Fatal(err)
	}
	equalRollups(t, read(t, w.db, rollups.OrdersName), expected(t, events))
}

// TestUnmeasurableEventIsAPermanentErrorAndWritesNothing: an order whose
// payload cannot be decoded fails its whole transaction with a permanent
// error (the Runner then poisons that event alone), leaving the roll-up
// and the positions unchanged.
func TestUnmeasurableEventIsAPermanentErrorAndWritesNothing(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	good := w.appendOrders(t, rand.New(rand.NewPCG(15, 3)), "o", 5)
	bad := w.appendEvents(t, eventstore.Ref{Type: order.AggregateType, ID: "bad"}, 0,
		eventstore.NewEvent{Type: order.OrderPlaced, Payload: json.RawMessage(`{"total":"lots"}`), OccurredAt: base})
	a := w.applier(t, rollups.Orders())
	_, err := a.Apply(ctx, append(good, bad...))
	if err == nil || !eventstore.IsPermanent(err) {
		t.Fatalf("Apply with an undecodable payload = %v, want a permanent error", err)
	}
	if got := read(t, w.db, rollups.OrdersName); len(got) != 0 {
		t.Fatalf("a failed transaction left %d buckets", len(got))
	}
	if has, err := a.HasPositions(ctx); err != nil || has {
		t.Fatalf("a failed transaction left positions: %v, %v", has, err)
	}
	if _, err := a.Apply(ctx, good); err != nil {
		t.Fatal(err)
	}
	equalRollups(t, read(t, w.db, rollups.OrdersName), expected(t, good))
}

// TestRollupOfAUsersOwnStreamCountsOnlyItsEventTypes defines a roll-up
// of its own (shipments per hour and day) beside the order roll-up in
// the same schema: it has its own table, counts only its event types
// although the Applier hands it every order event, and does not touch
// the other roll-up.
func TestRollupOfAUsersOwnStreamCountsOnlyItsEventTypes(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	shipments := w.shipments(t)
	events := w.appendOrders(t, rand.New(rand.NewPCG(15, 4)), "o", 40)
	if _, err := w.applier(t, shipments).Apply(ctx, events); err != nil {
		t.Fatal(err)
	}
	want := map[bucketKey]rollup.Measures{}
	for _, e := range events {
		if e.EventType != order.OrderShipped {
			continue
		}
		for _, p := range rollup.Periods {
			k := bucketKey{p, p.Start(e.OccurredAt)}
			if want[k] == nil {
				want[k] = rollup.Measures{}
			}
			want[k]["shipped"]++
			want[k]["everything"]++
		}
	}
	if len(want) == 0 {
		t.Fatal("the generated orders hold no shipment")
	}
	equalRollups(t, read(t, w.db, "shipments"), want)
	if got := read(t, w.db, rollups.OrdersName); len(got) != 0 {
		t.Fatalf("the order roll-up has %d buckets; only shipments were applied", len(got))
	}
}

// shipments defines a roll-up of the shipments per hour and day, which
// says it counts "everything" but only reads OrderShipped, and migrates
// its table into w's schema.
func (w *world) shipments(t *testing.T) *rollups.Projection {
	t.Helper()
	p, err := rollups.New(rollups.Definition{
		Name:           "shipments",
		AggregateTypes: []string{order.AggregateType},
		EventTypes:     []string{order.OrderShipped},
		Measure: func(e eventstore.Envelope) (rollup.Measures, error) {
			return rollup.Measures{"shipped": 1, "everything": 1}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := migrateSchema(context.Background(), w.schema, p); err != nil {
		t.Fatal(err)
	}
	return p
}
