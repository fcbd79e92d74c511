package readmodels

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/privacy"
	"github.com/eventpipe/eventpipe/privacy/subjects"
)

// Todos keeps one row per todo; a deleted todo keeps its row, marked
// deleted, so a late duplicate cannot resurrect it.
type Todos struct{}

// Name implements projections.Projection.
func (Todos) Name() string { return "todos" }

// AggregateTypes implements projections.Projection.
func (Todos) AggregateTypes() []string { return []string{todo.AggregateType, subjects.AggregateType} }

// Version implements projections.Versioned: 2 since rows carry the
// todo's owner (version 1 built rows without it).
func (Todos) Version() int { return 2 }

// Tables implements projections.Rebuildable.
func (Todos) Tables() []string { return []string{"todos"} }

// EventTypes implements projections.EventTyper.
func (Todos) EventTypes() []string {
	return append(todo.Domain().EventTypes.Names(), subjects.SubjectForgotten)
}

// Apply implements projections.Projection.
func (Todos) Apply(_ context.Context, b *pgx.Batch, e eventstore.Envelope) error {
	switch e.EventType {
	case todo.TodoCreated:
		var f todo.TodoCreatedData
		if err := e.DecodePayload(&f); err != nil {
			return err
		}
		b.Queue(`INSERT INTO todos (todo_id, title, message, completed, owner, version, apply_count, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $7)`, e.AggregateID, f.Title, f.Message, f.Completed, f.Owner, e.Sequence, e.OccurredAt)
		return nil
	case todo.TodoUpdated:
		var f todo.TodoData
		if err := e.DecodePayload(&f); err != nil {
			return err
		}
		touch(b, "todos", "todo_id", e, `title = $4, message = $5, completed = $6, updated_at = $3`, f.Title, f.Message, f.Completed)
		return nil
	case todo.TodoDeleted:
		touch(b, "todos", "todo_id", e, `deleted = $4, updated_at = $3`, true)
		return nil
	case subjects.SubjectForgotten:
		// The subject's todos keep their rows, their text forgotten.
		return scrub(b, e, todo.AggregateType, `UPDATE todos SET title = $1, message = $1 WHERE todo_id = ANY($2)`)
	default:
		return unknownEvent(e)
	}
}

// Todo is a row of the todos read model.
type Todo struct {
	ID        string `json:"id"`
	Title     string `json:"title"`
	Message   string `json:"message"`
	Completed bool   `json:"completed"`
	// Owner is the verified subject that created the todo ("" when its
	// creator was only claimed; see todo.TodoCreatedData).
	Owner   string `json:"owner,omitempty"`
	Version int64  `json:"version"`
}

// TodoList asks ListTodos for one page of live todos.
type TodoList struct {
	// After is the last id of the previous page ("" for the first).
	After string
	// Limit is the page size, 1–1000.
	Limit int
	// Owner, when set, lists only the todos this subject owns.
	Owner string
}

// ListTodos returns up to q.Limit live todos with ids after q.After, in
// id order (keyset paging: pass the last id of a page to get the next),
// only q.Owner's when it is set.
func ListTodos(ctx context.Context, db interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, q TodoList) ([]Todo, error) {
	if q.Limit <= 0 || q.Limit > 1000 {
		return nil, fmt.Errorf("todos: limit %d is outside 1–1000", q.Limit)
	}
	sql, args := `SELECT todo_id, title, message, completed, owner, version FROM todos
		WHERE NOT deleted AND todo_id > $1 ORDER BY todo_id LIMIT $2`, []any{q.After, q.Limit}
	if q.Owner != "" {
		sql, args = `SELECT todo_id, title, message, completed, owner, version FROM todos
		WHERE NOT deleted AND owner = $3 AND todo_id > $1 ORDER BY todo_id LIMIT $2`, append(args, q.Owner)
	}
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("todos: list: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Todo, error) {
		var t Todo
		return t, r.Scan(&t.ID, &t.Title, &t.Message, &t.Completed, &t.Owner, &t.Version)
	})
	if err != nil {
		return nil, fmt.Errorf("todos: list: %w", err)
	}
	return out, nil
}

// scrub queues each of updates ($1 privacy.ForgottenText, $2 the ids)
// for the aggregates of aggregateType among the scopes of e, a
// SubjectForgotten: what a read model holding a forgotten subject's
// personal data in clear does.
func scrub(b *pgx.Batch, e eventstore.Envelope, aggregateType string, updates ...string) error {
	f, err := subjects.SubjectForgottenEvent.Decode(e)
	if err != nil {
		return err
	}
	if ids := subjects.IDsOf(f.Scopes, aggregateType); len(ids) > 0 {
		for _, u := range updates {
			b.Queue(u, privacy.ForgottenText, ids)
		}
	}
	return nil
}

// Export implements projections.Exporter: the rows of the todos among
// ids.
func (Todos) Export(ctx context.Context, db querier, ids map[string][]string) (map[string][]json.RawMessage, error) {
	todos := ids[todo.AggregateType]
	if len(todos) == 0 {
		return nil, nil
	}
	rows, err := exportRows(ctx, db, `SELECT row_to_json(t) FROM todos t WHERE todo_id = ANY($1) ORDER BY todo_id`, todos)
	if err != nil {
		return nil, fmt.Errorf("todos: export: %w", err)
	}
	return map[string][]json.RawMessage{"todos": rows}, nil
}

// querier is projections.Querier, spelt out: this package does not
// import projections (which brings the Kafka client).
type querier = interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// exportRows returns the rows of query, whose one column is a JSON
// object (row_to_json).
func exportRows(ctx context.Context, db querier, query string, args ...any) ([]json.RawMessage, error) {
	rows, err := db.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (json.RawMessage, error) {
		var b []byte
		err := r.Scan(&b)
		return json.RawMessage(b), err
	})
}
