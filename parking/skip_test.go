package parking_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/parking"
)

// TestParkedSkipTakesTheFirstEventOutOnlyWhenAdvanceSucceeds parks an
// aggregate at 3 with 4 behind it. A skip whose Advance fails changes
// nothing; one whose Advance succeeds moves 3 to skipped_events with the
// actor and reason and leaves 4 parked; skipping again takes 4; a third
// skip finds nothing parked (ErrNotParked).
func TestParkedSkipTakesTheFirstEventOutOnlyWhenAdvanceSucceeds(t *testing.T) {
	ctx := context.Background()
	s, db := newStore(t)
	ref := eventstore.Ref{Type: "account", ID: "acc-1"}
	if err := s.Park(ctx, "accounts", event("acc-1", 3), "refused"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ParkBehind(ctx, "accounts", []eventstore.Envelope{event("acc-1", 4)}); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	cfg := parking.SkipConfig{Consumer: "accounts", Aggregate: ref, Actor: "bob", Reason: "never applies",
		Advance: func(context.Context, pgx.Tx, eventstore.Envelope) error { return boom }}
	if _, err := s.Skip(ctx, cfg); !errors.Is(err, boom) {
		t.Fatalf("skip with a failing Advance: %v", err)
	}
	if evs, _ := s.List(ctx, parking.Filter{Consumer: "accounts"}); len(evs) != 2 {
		t.Fatalf("after a failed skip %d parked, want 2", len(evs))
	}
	var advanced []int64
	cfg.Advance = func(_ context.Context, _ pgx.Tx, e eventstore.Envelope) error {
		advanced = append(advanced, e.Sequence)
		return nil
	}
	sk, err := s.Skip(ctx, cfg)
	if err != nil || sk.Envelope.Sequence != 3 || sk.Event.Reason != "refused" || sk.Actor != "bob" || sk.SkippedAt.IsZero() {
		t.Fatalf("skip: %+v, %v", sk, err)
	}
	if evs, _ := s.List(ctx, parking.Filter{Consumer: "accounts"}); len(evs) != 1 || evs[0].Envelope.Sequence != 4 {
		t.Fatalf("after the skip parked %+v, want 4 only", evs)
	}
	var actor, reason, parkedReason string
	if err := db.QueryRow(ctx, `SELECT actor, reason, parked_reason FROM skipped_events WHERE consumer = 'accounts' AND seq = 3`).Scan(&actor, &reason, &parkedReason); err != nil ||
		actor != "bob" || reason != "never applies" || parkedReason != "refused" {
		t.Fatalf("skipped_events row: %s %s %s, %v", actor, reason, parkedReason, err)
	}
	if _, err := s.Skip(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Skip(ctx, cfg); !errors.Is(err, parking.ErrNotParked) {
		t.Fatalf("skip with nothing parked: %v, want ErrNotParked", err)
	}
	if len(advanced) != 2 || advanced[0] != 3 || advanced[1] != 4 {
		t.Fatalf("advanced %v, want [3 4]", advanced)
	}
	var ve *eventstore.ValidationError
	if _, err := s.Skip(ctx, parking.SkipConfig{Consumer: "accounts", Aggregate: ref, Actor: "bob", Advance: cfg.Advance}); !errors.As(err, &ve) || ve.Field != "Reason" {
		t.Fatalf("skip without a reason: %v", err)
	}
}
