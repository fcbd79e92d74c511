package parking_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/eventstore"
	pgmigrate "github.com/eventpipe/eventpipe/migrations/postgres"
	"github.com/eventpipe/eventpipe/parking"
)

// newStore returns a Store on a fresh, migrated schema.
func newStore(t *testing.T) (*parking.Store, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	schema, url := shortSchema(t)
	if _, err := pgmigrate.Migrate(ctx, pgmigrate.Config{URL: testenv.Endpoints().Postgres, Schema: schema}); err != nil {
		t.Fatal(err)
	}
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	s, err := parking.New(parking.Config{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	return s, db
}

// shortSchema creates a schema with a short unique name (long test
// names would pass Postgres' 63-byte identifier limit and lose their
// unique suffix) and returns it with the URL that selects it; it is
// dropped when t ends.
func shortSchema(t *testing.T) (schema, url string) {
	t.Helper()
	admin := testenv.Postgres(t)
	schema = fmt.Sprintf("park_%016x", rand.Uint64())
	if _, err := admin.Exec(context.Background(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	url = testenv.Endpoints().Postgres
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return schema, url + sep + "search_path=" + schema
}

func event(id string, seq int64) eventstore.Envelope {
	return eventstore.Envelope{
		EventID: eventstore.NewEventID(time.Now()), AggregateType: "account", AggregateID: id, Sequence: seq,
		EventType: "Thing", SchemaVersion: 1, OccurredAt: time.Now().UTC(), Payload: json.RawMessage(`{"n":1}`),
	}
}

type permanent string

func (p permanent) Error() string   { return string(p) }
func (p permanent) Permanent() bool { return true }

// sink applies events in order exactly once per aggregate, in memory,
// and fails on a gap, as the Applier would apply out of order.
type sink struct {
	mu      sync.Mutex
	pos     map[string]int64
	applied map[string][]int64
	refuse  func(eventstore.Envelope) error
}

func newSink() *sink { return &sink{pos: map[string]int64{}, applied: map[string][]int64{}} }

func (s *sink) apply(_ context.Context, events []eventstore.Envelope) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pos := map[string]int64{}
	for k, v := range s.pos {
		pos[k] = v
	}
	var done []eventstore.Envelope
	for _, e := range events {
		switch {
		case e.Sequence <= pos[e.AggregateID]:
			continue
		case e.Sequence != pos[e.AggregateID]+1:
			return 0, fmt.Errorf("%s after %d: a gap", e, pos[e.AggregateID])
		}
		if s.refuse != nil {
			if err := s.refuse(e); err != nil {
				return 0, err
			}
		}
		pos[e.AggregateID] = e.Sequence
		done = append(done, e)
	}
	s.pos = pos
	for _, e := range done {
		s.applied[e.AggregateID] = append(s.applied[e.AggregateID], e.Sequence)
	}
	return len(done), nil
}

func TestParkBehindParksFromTheFirstParkedSequenceOnAndOnlyOnce(t *testing.T) {
	s, db := newStore(t)
	ctx := context.Background()
	a3 := event("a", 3)
	if err := s.Park(ctx, "p", a3, "boom"); err != nil {
		t.Fatal(err)
	}
	if err := s.Park(ctx, "p", a3, "again"); err != nil { // a redelivery
		t.Fatal(err)
	}
	first, err := s.Parked(ctx, "p", []eventstore.Ref{{Type: "account", ID: "a"}, {Type: "account", ID: "b"}})
	if err != nil || len(first) != 1 || first[eventstore.Ref{Type: "account", ID: "a"}] != 3 {
		t.Fatalf("Parked = %v, %v", first, err)
	}
	batch := []eventstore.Envelope{event("a", 2), a3, event("a", 4), event("b", 1), event("a", 5)}
	parked, err := s.ParkBehind(ctx, "p", batch)
	if err != nil || fmt.Sprint(parked) != "[false true true false true]" {
		t.Fatalf("ParkBehind = %v, %v", parked, err)
	}
	if parked, err = s.ParkBehind(ctx, "p", batch); err != nil || fmt.Sprint(parked) != "[false true true false true]" {
		t.Fatalf("ParkBehind again = %v, %v", parked, err)
	}
	if _, err := s.ParkBehind(ctx, "other", batch); err != nil {
		t.Fatal(err)
	}
	evs, err := s.List(ctx, parking.Filter{Consumer: "p"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, fmt.Sprintf("%s#%d %s", ev.Envelope.AggregateID, ev.Envelope.Sequence, ev.Reason))
	}
	want := fmt.Sprint([]string{"a#3 boom", "a#4 " + parking.BehindReason(3), "a#5 " + parking.BehindReason(3)})
	if fmt.Sprint(got) != want {
		t.Fatalf("List = %v, want %v", got, want)
	}
	if evs[1].Envelope.EventID != batch[2].EventID || string(evs[1].Envelope.Payload) != `{"n": 1}` && string(evs[1].Envelope.Payload) != `{"n":1}` {
		t.Fatalf("parked envelope %+v, want %+v", evs[1].Envelope, batch[2])
	}
	var n int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM parked_events`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("%d parked rows, %v; want 3 (the other consumer has nothing parked)", n, err)
	}
}

// TestReapplyThatFailsAgainKeepsTheRestParkedWithTheNewReason re-applies
// an aggregate parked at 2 whose event 4 still fails: 2 and 3 are applied
// and released, 4 and 5 stay parked, 4 with the new reason; after the
// fix a second re-apply applies 4 and 5 and unparks.
func TestReapplyThatFailsAgainKeepsTheRestParkedWithTheNewReason(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	k := newSink()
	if _, err := k.apply(ctx, []eventstore.Envelope{event("a", 1)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Park(ctx, "p", event("a", 2), "boom"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ParkBehind(ctx, "p", []eventstore.Envelope{event("a", 3), event("a", 4), event("a", 5)}); err != nil {
		t.Fatal(err)
	}
	k.refuse = func(e eventstore.Envelope) error {
		if e.Sequence == 4 {
			return permanent("still broken")
		}
		return nil
	}
	res, err := s.Reapply(ctx, parking.ReapplyConfig{Consumer: "p", Apply: k.apply})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Aggregates) != 1 || res.Aggregates[0].Unparked || res.Aggregates[0].Reapplied != 2 || res.StillParked() != 1 {
		t.Fatalf("reapply = %+v", res)
	}
	evs, err := s.List(ctx, parking.Filter{Consumer: "p"})
	if err != nil || len(evs) != 2 || evs[0].Envelope.Sequence != 4 || evs[0].Reason != "still broken" || evs[1].Envelope.Sequence != 5 {
		t.Fatalf("still parked: %+v, %v", evs, err)
	}
	k.refuse = nil
	if res, err = s.Reapply(ctx, parking.ReapplyConfig{Consumer: "p", Apply: k.apply}); err != nil || res.StillParked() != 0 || res.Aggregates[0].Applied != 2 {
		t.Fatalf("reapply after the fix = %+v, %v", res, err)
	}
	if fmt.Sprint(k.applied["a"]) != "[1 2 3 4 5]" {
		t.Fatalf("applied %v", k.applied["a"])
	}
}

// TestReapplyBesideALiveConsumerAppliesEveryEventOnceInOrder races a
// re-apply of an aggregate against a consumer that keeps delivering its
// next events: the consumer parks each behind the aggregate while it is
// parked, and applies it itself once ParkBehind says it is not. Whichever
// way each event goes, the sink sees every event once, in order, and
// nothing stays parked. A round shows the race when the consumer parked
// an event after the re-apply had started applying (so the re-apply had to
// drain it too) and then applied events itself (the re-apply unparked mid-
// stream); rounds go on until three did, and the test fails if 20 rounds
// do not get there.
func TestReapplyBesideALiveConsumerAppliesEveryEventOnceInOrder(t *testing.T) {
	const (
		last      = 60
		wantRaced = 3
		maxRounds = 20
	)
	const ( // where the re-apply is
		notStarted int32 = iota
		applying
		returned
	)
	s, _ := newStore(t)
	ctx := context.Background()
	raced := 0
	for round := 0; raced < wantRaced; round++ {
		if round == maxRounds {
			t.Fatalf("the consumer parked behind a re-apply in flight and then applied events itself in only %d of %d rounds, want %d", raced, maxRounds, wantRaced)
		}
		id := fmt.Sprint("r", round)
		k := newSink()
		if _, err := k.apply(ctx, []eventstore.Envelope{event(id, 1)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Park(ctx, "p", event(id, 2), "boom"); err != nil {
			t.Fatal(err)
		}
		var reapply atomic.Int32
		var parkedDuring, appliedByConsumer int
		consumer := make(chan error, 1)
		go func() { // the live consumer
			consumer <- func() error {
				for seq := int64(3); seq <= last; seq++ {
					e := event(id, seq)
					before := reapply.Load()
					parked, err := s.ParkBehind(ctx, "p", []eventstore.Envelope{e})
					if err != nil {
						return err
					}
					switch {
					case parked[0] && before == applying:
						parkedDuring++
					case !parked[0]:
						if _, err := k.apply(ctx, []eventstore.Envelope{e}); err != nil {
							return fmt.Errorf("consumer: %w", err)
						}
						appliedByConsumer++
					}
				}
				return nil
			}()
		}()
		time.Sleep(time.Duration(round%5) * 5 * time.Millisecond)
		apply := func(ctx context.Context, events []eventstore.Envelope) (int, error) {
			reapply.CompareAndSwap(notStarted, applying)
			return k.apply(ctx, events)
		}
		res, err := s.Reapply(ctx, parking.ReapplyConfig{Consumer: "p", Aggregate: eventstore.Ref{Type: "account", ID: id}, Apply: apply, BatchSize: 4})
		reapply.Store(returned)
		if err != nil || res.StillParked() != 0 {
			t.Fatalf("round %d: reapply = %+v, %v", round, res, err)
		}
		if err := <-consumer; err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		// Events parked after the re-apply unparked: none (ParkBehind saw
		// it unparked), so nothing is left.
		if evs, err := s.List(ctx, parking.Filter{Consumer: "p", Aggregate: eventstore.Ref{Type: "account", ID: id}}); err != nil || len(evs) != 0 {
			t.Fatalf("round %d: left parked %d, %v", round, len(evs), err)
		}
		if k.pos[id] != last || len(k.applied[id]) != last {
			t.Fatalf("round %d: applied %v", round, k.applied[id])
		}
		if parkedDuring > 0 && appliedByConsumer > 0 {
			raced++
		}
		t.Logf("round %d: the re-apply re-applied %d events, the consumer parked %d while the re-apply was applying and applied %d",
			round, res.Aggregates[0].Reapplied, parkedDuring, appliedByConsumer)
	}
}

func TestConfigsSayWhatIsMissing(t *testing.T) {
	if _, err := parking.New(parking.Config{}); err == nil {
		t.Fatal("New without DB succeeded")
	}
	for _, c := range []parking.ReapplyConfig{
		{Apply: newSink().apply},
		{Consumer: "p"},
		{Consumer: "p", Apply: newSink().apply, BatchSize: -1},
		{Consumer: "p", Apply: newSink().apply, Aggregate: eventstore.Ref{ID: "a"}},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: Validate = nil", c)
		}
	}
	if err := (parking.ReapplyConfig{Consumer: "p", Apply: newSink().apply}).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestReadySaysToMigrateWhenTheTableIsMissing(t *testing.T) {
	ctx := context.Background()
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
	if err := bare.Ready(ctx); err == nil || !strings.Contains(err.Error(), "migrate") {
		t.Fatalf("Ready on an unmigrated schema = %v, want an error saying to migrate", err)
	}
	s, _ := newStore(t)
	if err := s.Ready(ctx); err != nil {
		t.Fatal(err)
	}
}
