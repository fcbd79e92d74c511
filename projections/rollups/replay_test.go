package rollups_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe/eventstore"
	store "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/rollups"
)

func history(s *store.Store) projections.HistoryPage {
	return func(ctx context.Context, eventType, after, cursor string) ([]eventstore.Envelope, string, error) {
		p, err := s.ListByType(ctx, store.TypeQuery{EventType: eventType, After: after, Cursor: cursor, Limit: 100})
		return p.Events, p.Next, err
	}
}

// tableRows is every row of a roll-up's table and the roll-up's
// positions, as text, in key order.
func tableRows(t *testing.T, db rollups.Querier, p *rollups.Projection) []string {
	t.Helper()
	ctx := context.Background()
	rows, _ := db.Query(ctx, `SELECT period || ' ' || to_char(bucket AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24') || ' ' || measure || '=' || value
		FROM `+pgx.Identifier{p.Tables()[0]}.Sanitize()+` ORDER BY period, bucket, measure`)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	rows, _ = db.Query(ctx, `SELECT aggregate_type || '/' || aggregate_id || '#' || seq FROM projection_positions
		WHERE projection = $1 ORDER BY aggregate_type, aggregate_id`, p.Name())
	positions, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return append(out, positions...)
}

// TestReplayOfTheRollupRebuildsTheSameRows applies 80 orders live, in
// shuffled batches, then rebuilds the order roll-up with
// projections.Replay (history from the store into a shadow table, then
// the swap): its table and positions are the same row for row, the other
// roll-up in the schema is untouched, and orders applied after the swap
// are added to the rebuilt table.
func TestReplayOfTheRollupRebuildsTheSameRows(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	rng := rand.New(rand.NewPCG(15, 5))
	events := w.appendOrders(t, rng, "o", 80)
	rng.Shuffle(len(events), func(i, j int) { events[i], events[j] = events[j], events[i] })
	p := rollups.Orders()
	live := w.applier(t, p)
	for rest := events; len(rest) > 0; {
		n := min(len(rest), 1+rng.IntN(25))
		if _, err := live.Apply(ctx, rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	// Another roll-up beside it, which the replay must leave alone.
	shipments := w.shipments(t)
	if _, err := w.applier(t, shipments).Apply(ctx, events); err != nil {
		t.Fatal(err)
	}
	before, otherBefore := tableRows(t, w.db, p), tableRows(t, w.db, shipments)
	if len(before) == 0 || len(otherBefore) == 0 {
		t.Fatal("nothing applied")
	}

	res, err := projections.Replay(ctx, projections.ReplayConfig{
		DB: w.db, Store: w.store, History: history(w.store), Count: w.store.CountByType, Projection: p,
		CreateTables: func(ctx context.Context, schema string) error { return migrateSchema(ctx, schema, p) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Events != len(events) {
		t.Errorf("replay read %d events, want %d", res.Events, len(events))
	}
	if after := tableRows(t, w.db, p); !slices.Equal(after, before) {
		t.Fatalf("after the replay:\n%v\nbefore:\n%v", after, before)
	}
	if after := tableRows(t, w.db, shipments); !slices.Equal(after, otherBefore) {
		t.Fatalf("the replay of %s changed %s:\n%v\nbefore:\n%v", p.Name(), shipments.Name(), after, otherBefore)
	}
	equalRollups(t, read(t, w.db, rollups.OrdersName), expected(t, events))

	more := w.appendOrders(t, rng, "late", 10)
	if _, err := live.Apply(ctx, more); err != nil {
		t.Fatal(err)
	}
	equalRollups(t, read(t, w.db, rollups.OrdersName), expected(t, append(events, more...)))
}
