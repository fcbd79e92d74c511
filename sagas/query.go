package sagas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNoInstance is returned by Get for an instance that does not exist.
var ErrNoInstance = errors.New("sagas: no such instance")

// Instance is a saga instance as stored.
type Instance struct {
	Saga, ID string
	// State is the instance's state as JSON.
	State json.RawMessage
	// Outcome is empty while the instance runs, then how it ended.
	Outcome string
	// Version counts the inputs that changed the instance.
	Version              int64
	CreatedAt, UpdatedAt time.Time
}

// Get returns the instance id of saga, or ErrNoInstance.
func Get(ctx context.Context, db *pgxpool.Pool, saga, id string) (Instance, error) {
	in := Instance{Saga: saga, ID: id}
	err := db.QueryRow(ctx, `SELECT state, outcome, version, created_at, updated_at FROM saga_instances WHERE saga = $1 AND instance = $2`, saga, id).
		Scan(&in.State, &in.Outcome, &in.Version, &in.CreatedAt, &in.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Instance{}, fmt.Errorf("saga %s instance %s: %w", saga, id, ErrNoInstance)
	}
	if err != nil {
		return Instance{}, fmt.Errorf("sagas: read %s instance %s: %w", saga, id, err)
	}
	return in, nil
}

// Summary counts a saga's instances and what they wait for.
type Summary struct {
	// Running instances have no outcome yet.
	Running int64
	// Outcomes counts finished instances by outcome.
	Outcomes map[string]int64
	// Timeouts are pending timeouts; Overdue those already due.
	Timeouts, Overdue int64
	// Effects are outbox rows not run yet.
	Effects int64
}

// Summarize counts saga's instances, timeouts and pending effects.
func Summarize(ctx context.Context, db *pgxpool.Pool, saga string) (Summary, error) {
	s := Summary{Outcomes: map[string]int64{}}
	rows, err := db.Query(ctx, `SELECT outcome, count(*) FROM saga_instances WHERE saga = $1 GROUP BY outcome`, saga)
	if err != nil {
		return Summary{}, fmt.Errorf("sagas: summarize %s: %w", saga, err)
	}
	var (
		outcome string
		n       int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&outcome, &n}, func() error {
		if outcome == "" {
			s.Running = n
		} else {
			s.Outcomes[outcome] = n
		}
		return nil
	}); err != nil {
		return Summary{}, fmt.Errorf("sagas: summarize %s: %w", saga, err)
	}
	err = db.QueryRow(ctx, `SELECT (SELECT count(*) FROM saga_timeouts WHERE saga = $1), (SELECT count(*) FROM saga_timeouts WHERE saga = $1 AND due_at <= now()),
		(SELECT count(*) FROM saga_outbox WHERE saga = $1)`, saga).Scan(&s.Timeouts, &s.Overdue, &s.Effects)
	if err != nil {
		return Summary{}, fmt.Errorf("sagas: summarize %s: %w", saga, err)
	}
	return s, nil
}
