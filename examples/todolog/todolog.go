package main

import (
	"context"
	"embed"
	"io/fs"

	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// TodoLog is a read model of a user's own: one row per todo event, in
// its own table, with its own migrations. Registered on the catalogue,
// it runs with everything the built-in read models get.
type TodoLog struct{}

// Name is the read model's name: its consumer group is
// projection.todo_log, its poison topic poison.projection.todo_log.
func (TodoLog) Name() string { return "todo_log" }

// AggregateTypes are read from the topic events.todo.
func (TodoLog) AggregateTypes() []string { return []string{todo.AggregateType} }

// EventTypes are read from the store when catching up or replaying.
func (TodoLog) EventTypes() []string { return todo.Domain().EventTypes.Names() }

// Tables are swapped by a replay.
func (TodoLog) Tables() []string { return []string{"todo_log"} }

// Migrations create the table (eventpipe.Migrate, and a replay's shadow
// schema).
func (TodoLog) Migrations() fs.FS {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		panic(err) // the embed pattern guarantees the folder
	}
	return sub
}

// Apply queues the row of one event. It runs at most once per event in
// effect: eventpipe commits it with the read model's position.
func (TodoLog) Apply(_ context.Context, b *pgx.Batch, e eventstore.Envelope) error {
	var d todo.TodoData
	if e.EventType != todo.TodoDeleted {
		if err := e.DecodePayload(&d); err != nil {
			return err
		}
	}
	b.Queue(`INSERT INTO todo_log (todo_id, seq, event_type, title, occurred_at) VALUES ($1, $2, $3, $4, $5)`,
		e.AggregateID, e.Sequence, e.EventType, d.Title, e.OccurredAt)
	return nil
}
