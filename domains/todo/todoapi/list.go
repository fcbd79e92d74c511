package todoapi

import (
	"context"
	"net/http"
	"strconv"

	"github.com/eventpipe/eventpipe/httpapi"
	"github.com/eventpipe/eventpipe/httpapi/auth"
	"github.com/eventpipe/eventpipe/projections/readmodels"
)

// Lister lists live todos from the read model, keyset-paged by id, only
// one owner's when q.Owner is set (readmodels.ListTodos over the
// read-model database).
type Lister func(ctx context.Context, q readmodels.TodoList) ([]readmodels.Todo, error)

// Page is the body of GET /todo.
type Page struct {
	Items []readmodels.Todo `json:"items"`
	// Next is the `after` of the following page, "" on the last page.
	Next string `json:"next,omitempty"`
}

// Default and largest page sizes of GET /todo.
const (
	DefaultPageSize = 50
	MaxPageSize     = 1000
)

// listPage serves GET /todo?after=<id>&limit=<n>: the todos read model
// (eventually consistent with the write side), in id order; only the
// caller's own todos when its grant covers only those.
func (h *todoAPI) listPage(w http.ResponseWriter, r *http.Request, grant auth.Grant) {
	limit := DefaultPageSize
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPageSize {
			httpapi.WriteError(w, http.StatusBadRequest, "invalid_limit", "limit must be an integer from 1 to "+strconv.Itoa(MaxPageSize))
			return
		}
		limit = n
	}
	q := readmodels.TodoList{After: r.URL.Query().Get("after"), Limit: limit}
	if !grant.Any {
		q.Owner = grant.Subject()
	}
	items, err := h.list(r.Context(), q)
	if err != nil {
		h.logger.ErrorContext(r.Context(), "list todos", "request_id", httpapi.RequestID(r.Context()), "err", err)
		httpapi.WriteError(w, http.StatusServiceUnavailable, "read_model_unavailable", "the todo read model cannot be read now (is Postgres up and `eventpipe migrate` run?)")
		return
	}
	page := Page{Items: items}
	if page.Items == nil {
		page.Items = []readmodels.Todo{}
	}
	if len(items) == limit {
		page.Next = items[len(items)-1].ID
	}
	httpapi.WriteJSON(w, http.StatusOK, page)
}
