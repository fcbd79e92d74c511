package todoapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/eventpipe/eventpipe/httpapi"
	"github.com/eventpipe/eventpipe/httpapi/auth"
	"github.com/eventpipe/eventpipe/projections/searchmodels"
)

// Searcher reads the todos' Elasticsearch read model
// (searchmodels.TodoIndex does).
type Searcher interface {
	Search(ctx context.Context, q searchmodels.TodoQuery) (searchmodels.TodoResult, error)
	Get(ctx context.Context, id string) (searchmodels.TodoDoc, bool, error)
}

// search serves GET /todo/search?q=<words>&from=&size=: the live todos
// whose title or message hold every word, best match first.
func (h *todoAPI) search(w http.ResponseWriter, r *http.Request, grant auth.Grant) {
	q, err := searchmodels.ParseTodoQuery(r.URL.Query())
	if writeQueryError(w, err) {
		return
	}
	if !grant.Any {
		q.Owner = grant.Subject()
	}
	res, err := h.searcher.Search(r.Context(), q)
	if err != nil {
		h.logger.ErrorContext(r.Context(), "search todos", "request_id", httpapi.RequestID(r.Context()), "err", err)
		httpapi.WriteError(w, http.StatusServiceUnavailable, "search_unavailable", "the todos search model cannot be read now (is Elasticsearch up and `eventpipe consume todos-search` running?)")
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, res)
}

// getFromSearch serves GET /todo/{id}?read=search: the todo as the
// search model holds it, with its sequence as ETag.
// A todo the caller's grant does not cover is 404.
func (h *todoAPI) getFromSearch(w http.ResponseWriter, r *http.Request, id string, grant auth.Grant) {
	d, ok, err := h.searcher.Get(r.Context(), id)
	switch {
	case err != nil:
		h.logger.ErrorContext(r.Context(), "read a todo from the search model", "id", id, "request_id", httpapi.RequestID(r.Context()), "err", err)
		httpapi.WriteError(w, http.StatusServiceUnavailable, "search_unavailable", "the todos search model cannot be read now")
	case !ok || !grant.OwnedBy(d.Owner):
		httpapi.WriteError(w, http.StatusNotFound, "not_found", fmt.Sprintf("todo %s is not in the search model", id))
	default:
		writeTodo(w, http.StatusOK, View{ID: d.ID, Title: d.Title, Message: d.Message, Completed: d.Completed, Version: d.Sequence, Owner: d.Owner})
	}
}

// writeQueryError answers a bad search parameter with 400; it reports
// whether it answered.
func writeQueryError(w http.ResponseWriter, err error) bool {
	if err == nil {
		return false
	}
	httpapi.WriteError(w, http.StatusBadRequest, "invalid_query", err.Error())
	return true
}
