package parking_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/parking"
)

// TestCountsGroupsParkedEventsAndAggregatesByConsumer parks, for consumer
// p, account a at 3 with 4 and 5 behind it and account b at 1, and for
// consumer q account a at 2: Counts has p with 4 events of 2 aggregates
// and q with 1 of 1, and no other consumer. On a schema without the
// table it returns ErrNoTable.
func TestCountsGroupsParkedEventsAndAggregatesByConsumer(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	if got, err := s.Counts(ctx); err != nil || len(got) != 0 {
		t.Fatalf("Counts with nothing parked = %v, %v; want none", got, err)
	}
	for _, p := range []struct {
		consumer string
		e        eventstore.Envelope
	}{{"p", event("a", 3)}, {"p", event("b", 1)}, {"q", event("a", 2)}} {
		if err := s.Park(ctx, p.consumer, p.e, "boom"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.ParkBehind(ctx, "p", []eventstore.Envelope{event("a", 4), event("a", 5)}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]parking.Counts{"p": {Events: 4, Aggregates: 2}, "q": {Events: 1, Aggregates: 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Counts = %v, want %v", got, want)
	}

	_, url := shortSchema(t)
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bare, err := parking.New(parking.Config{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bare.Counts(ctx); !errors.Is(err, parking.ErrNoTable) {
		t.Fatalf("Counts on an unmigrated schema = %v, want ErrNoTable", err)
	}
}
