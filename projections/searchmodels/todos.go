package searchmodels

import (
	"encoding/json"
	"time"

	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/privacy"
	"github.com/eventpipe/eventpipe/privacy/subjects"
)

// TodoSearch is the todos' Elasticsearch read model: one document per
// todo with its current state and sequence, full text on title and
// message. A deleted todo keeps its document, marked deleted (so that its
// version still refuses a late duplicate), and searches leave it out.
type TodoSearch struct{}

// TodoDoc is a document of TodoSearch.
type TodoDoc struct {
	ID        string `json:"id"`
	Title     string `json:"title"`
	Message   string `json:"message"`
	Completed bool   `json:"completed"`
	// Owner is the verified subject that created the todo ("" when its
	// creator was only claimed; see todo.TodoCreatedData).
	Owner     string    `json:"owner,omitempty"`
	Deleted   bool      `json:"deleted"`
	Sequence  int64     `json:"sequence"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Name implements elastic.Projection.
func (TodoSearch) Name() string { return "todos-search" }

// Version implements projections.Versioned: 2 since documents carry the
// todo's owner.
func (TodoSearch) Version() int { return 2 }

// AggregateTypes implements elastic.Projection.
func (TodoSearch) AggregateTypes() []string {
	return []string{todo.AggregateType, subjects.AggregateType}
}

// EventTypes implements elastic.Projection.
func (TodoSearch) EventTypes() []string {
	return append(todo.Domain().EventTypes.Names(), subjects.SubjectForgotten)
}

// Scrub implements elastic.Scrubber: a forgotten owner's todo keeps its
// document, its title and message forgotten (docs/privacy.md).
func (TodoSearch) Scrub(doc json.RawMessage) (json.RawMessage, error) {
	return fold(doc, func(d *TodoDoc) error {
		d.Title, d.Message = privacy.ForgottenText, privacy.ForgottenText
		return nil
	})
}

// IndexBody implements elastic.Projection.
func (TodoSearch) IndexBody() map[string]any {
	return indexBody(map[string]any{
		"id":         map[string]any{"type": "keyword"},
		"title":      map[string]any{"type": "text"},
		"message":    map[string]any{"type": "text"},
		"completed":  map[string]any{"type": "boolean"},
		"owner":      map[string]any{"type": "keyword"},
		"deleted":    map[string]any{"type": "boolean"},
		"sequence":   map[string]any{"type": "long"},
		"created_at": map[string]any{"type": "date"},
		"updated_at": map[string]any{"type": "date"},
	})
}

// Apply implements elastic.Projection.
func (TodoSearch) Apply(doc json.RawMessage, e eventstore.Envelope) (json.RawMessage, error) {
	return fold(doc, func(d *TodoDoc) error {
		switch e.EventType {
		case todo.TodoCreated, todo.TodoUpdated:
			var f todo.TodoCreatedData // TodoUpdated's TodoData, without an owner
			if err := e.DecodePayload(&f); err != nil {
				return err
			}
			if e.EventType == todo.TodoCreated {
				d.ID, d.CreatedAt, d.Owner = e.AggregateID, e.OccurredAt, f.Owner
			} else if d.ID == "" {
				return notCreated(e)
			}
			d.Title, d.Message, d.Completed = f.Title, f.Message, f.Completed
		case todo.TodoDeleted:
			if d.ID == "" {
				return notCreated(e)
			}
			d.Deleted = true
		default:
			return unknownEvent(e)
		}
		d.Sequence, d.UpdatedAt = e.Sequence, e.OccurredAt
		return nil
	})
}
