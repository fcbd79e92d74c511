package httpapi

import (
	"context"
	"net/http"
	"strconv"

	"github.com/eventpipe/eventpipe/projections/readmodels"
)

// TodoLister lists live todos from the read model, keyset-paged by id
// (readmodels.ListTodos over the read-model database).
type TodoLister func(ctx context.Context, after string, limit int) ([]readmodels.Todo, error)

// TodoPage is the body of GET /todo.
type TodoPage struct {
	Items []readmodels.Todo `json:"items"`
	// Next is the `after` of the following page, "" on the last page.
	Next string `json:"next,omitempty"`
}

// Default and largest page sizes of GET /todo.
const (
	DefaultTodoPage = 50
	MaxTodoPage     = 1000
)

// MountTodoList mounts GET /todo?after=<id>&limit=<n>: the todos read
// model (eventually consistent with the write side), in id order.
func (s *Server) MountTodoList(list TodoLister) {
	s.Mux.HandleFunc("GET /todo", func(w http.ResponseWriter, r *http.Request) {
		limit := DefaultTodoPage
		if v := r.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxTodoPage {
				WriteError(w, http.StatusBadRequest, "invalid_limit", "limit must be an integer from 1 to "+strconv.Itoa(MaxTodoPage))
				return
			}
			limit = n
		}
		items, err := list(r.Context(), r.URL.Query().Get("after"), limit)
		if err != nil {
			s.cfg.Logger.ErrorContext(r.Context(), "list todos", "err", err)
			WriteError(w, http.StatusServiceUnavailable, "read_model_unavailable", "the todo read model cannot be read now (is Postgres up and `eventpipe migrate` run?)")
			return
		}
		page := TodoPage{Items: items}
		if page.Items == nil {
			page.Items = []readmodels.Todo{}
		}
		if len(items) == limit {
			page.Next = items[len(items)-1].ID
		}
		WriteJSON(w, http.StatusOK, page)
	})
}
