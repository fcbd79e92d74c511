// Package todoapi serves the todo domain over HTTP, as the reference
// design's todo API does: create, read, update and delete with the
// aggregate's version as ETag and If-Match for optimistic concurrency,
// and a list read from the todos read model.
package todoapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/oklog/ulid/v2"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/httpapi"
	"github.com/eventpipe/eventpipe/httpapi/auth"
)

// Dispatcher runs a command in-process and returns its result
// (*commands.Dispatcher does). The API makes a fresh command id per
// request, which nothing can send again, so it dispatches with
// DispatchFresh: a request that is not accepted writes nothing.
type Dispatcher interface {
	DispatchFresh(ctx context.Context, cmd commands.Command) (commands.Result, error)
}

// Reader reads a todo's current state (its STATE item, strongly
// consistent); the todo facet does.
type Reader interface {
	Get(ctx context.Context, id string) (eventstore.State[todo.Todo], error)
}

// Config is what the todo API needs.
type Config struct {
	// Commands dispatches the todo commands. Required.
	Commands Dispatcher
	// States reads a todo's current state. Required.
	States Reader
	// List reads pages of the todos read model for GET /todo. Required.
	List Lister
	// Search reads the todos' Elasticsearch read model for
	// GET /todo/search and GET /todo/{id}?read=search (default: those
	// answer 404).
	Search Searcher
	// Policy, when set (auth on: the server's middleware is
	// auth.Authenticator.Middleware with "todo" delegated), is asked
	// before every command is dispatched (its type) and before every read
	// (resource "todo"): 401 without an identity in the request's context,
	// 403 when it does not grant them. Nil: everything is allowed.
	Policy *auth.Policy
	// Logger logs failed reads of the read model (default slog.Default()).
	Logger *slog.Logger
}

// Resource is the todo API's resource name in an auth.Policy.
const Resource = "todo"

// Validate reports the first missing field.
func (c Config) Validate() error {
	switch {
	case c.Commands == nil:
		return errors.New("todoapi: Config.Commands is nil")
	case c.States == nil:
		return errors.New("todoapi: Config.States is nil")
	case c.List == nil:
		return errors.New("todoapi: Config.List is nil")
	}
	return nil
}

// View is the JSON body of a todo.
type View struct {
	ID        string `json:"id"`
	Title     string `json:"title"`
	Message   string `json:"message"`
	Completed bool   `json:"completed"`
	Version   int64  `json:"version"`
}

// todoRequest is the body of a create or an update, as the reference
// design writes it ({"id", "title", "message"}) plus "completed".
type todoRequest struct {
	ID        string `json:"id,omitempty"`
	Title     string `json:"title"`
	Message   string `json:"message"`
	Completed bool   `json:"completed"`
}

func (r todoRequest) data() todo.TodoData {
	return todo.TodoData{Title: r.Title, Message: r.Message, Completed: r.Completed}
}

func (r todoRequest) view(id string, version int64) View {
	return View{ID: id, Title: r.Title, Message: r.Message, Completed: r.Completed, Version: version}
}

// Mount mounts the todo API on srv:
//
//	POST   /todo        create: 201 + ETag "<version>"; 409 if the id exists
//	GET    /todo/{id}   200 + ETag; 404 if unknown or deleted
//	POST   /todo/{id}   update with If-Match: 200 + new ETag; 409 on a stale
//	PUT    /todo/{id}   version, 404 if unknown, 428 without If-Match
//	DELETE /todo/{id}   with If-Match: 204 (appends TodoDeleted)
//	GET    /todo        the todos read model, paged (see List)
//	GET    /todo/search?q=<words>&from=&size=
//	                    full text over title and message, from the search
//	                    model (with Config.Search)
//	GET    /todo/{id}?read=search
//	                    the todo as the search model holds it, ETag its
//	                    sequence (seed 004's read from the read store)
//
// Bodies of a create and an update are {"id", "title", "message"} as the
// reference design writes them, plus an optional "completed"; unknown
// fields are refused. The ETag is the todo's version: 1 after its
// creation (the reference numbers the creating event 0), one more with
// every change. Writes go through the same command handlers as the bus,
// with the If-Match version as the command's expected version.
func Mount(srv *httpapi.Server, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	h := &todoAPI{d: cfg.Commands, r: cfg.States, list: cfg.List, searcher: cfg.Search, policy: cfg.Policy, logger: cfg.Logger}
	read := func(next http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if auth.RequireRead(w, r, h.policy, Resource) {
				next(w, r)
			}
		}
	}
	srv.Mux.HandleFunc("POST /todo", h.create)
	srv.Mux.HandleFunc("GET /todo", read(h.listPage))
	srv.Mux.HandleFunc("GET /todo/{id}", read(h.get))
	if h.searcher != nil {
		// The literal path wins over /todo/{id}, so a todo whose id is
		// "search" cannot be read over HTTP while search is on.
		srv.Mux.HandleFunc("GET /todo/search", read(h.search))
	}
	srv.Mux.HandleFunc("POST /todo/{id}", h.update)
	srv.Mux.HandleFunc("PUT /todo/{id}", h.update)
	srv.Mux.HandleFunc("DELETE /todo/{id}", h.remove)
	return nil
}

type todoAPI struct {
	d        Dispatcher
	r        Reader
	list     Lister
	searcher Searcher
	policy   *auth.Policy
	logger   *slog.Logger
}

func (h *todoAPI) create(w http.ResponseWriter, r *http.Request) {
	var req todoRequest
	if !httpapi.DecodeJSON(w, r, &req) {
		return
	}
	if req.ID == "" {
		req.ID = ulid.Make().String()
	}
	zero := int64(0)
	res, ok := h.run(w, r, todo.CreateTodo, req.ID, &zero, req.data())
	if !ok {
		return
	}
	w.Header().Set("Location", "/todo/"+req.ID)
	writeTodo(w, http.StatusCreated, req.view(req.ID, res.Version))
}

func (h *todoAPI) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	switch read := r.URL.Query().Get("read"); {
	case read == "search" && h.searcher != nil:
		h.getFromSearch(w, r, id)
		return
	case read != "" && read != "store":
		httpapi.WriteError(w, http.StatusBadRequest, "invalid_read", fmt.Sprintf("read=%q: want store (the default) or search", read))
		return
	}
	st, err := h.r.Get(r.Context(), id)
	var ve *eventstore.ValidationError
	switch {
	case errors.Is(err, eventstore.ErrAggregateNotFound) || (err == nil && !st.Item.Exists):
		httpapi.WriteError(w, http.StatusNotFound, "not_found", fmt.Sprintf("todo %s does not exist", id))
	case errors.As(err, &ve):
		httpapi.WriteError(w, http.StatusBadRequest, "invalid", ve.Error())
	case err != nil:
		httpapi.WriteError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
	default:
		writeTodo(w, http.StatusOK, View{ID: id, Title: st.Item.Title, Message: st.Item.Message, Completed: st.Item.Completed, Version: st.Seq})
	}
}

func (h *todoAPI) update(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	version, ok := ifMatch(w, r)
	if !ok {
		return
	}
	var req todoRequest
	if !httpapi.DecodeJSON(w, r, &req) {
		return
	}
	if req.ID != "" && req.ID != id {
		httpapi.WriteError(w, http.StatusBadRequest, "invalid", "body id differs from the URL")
		return
	}
	res, ok := h.run(w, r, todo.UpdateTodo, id, &version, req.data())
	if !ok {
		return
	}
	writeTodo(w, http.StatusOK, req.view(id, res.Version))
}

func (h *todoAPI) remove(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	version, ok := ifMatch(w, r)
	if !ok {
		return
	}
	res, ok := h.run(w, r, todo.DeleteTodo, id, &version, struct{}{})
	if !ok {
		return
	}
	w.Header().Set("ETag", etag(res.Version))
	w.WriteHeader(http.StatusNoContent)
}

// run dispatches one todo command and writes the error response when it
// did not succeed. With a Policy, it first asks it whether the caller may
// send typ; the verified subject, if any, becomes the command's actor.
func (h *todoAPI) run(w http.ResponseWriter, r *http.Request, typ, id string, expected *int64, payload any) (commands.Result, bool) {
	if !auth.RequireCommand(w, r, h.policy, typ) {
		return commands.Result{}, false
	}
	cmd, err := commands.NewJSON(typ, todo.AggregateType, id, payload)
	if err != nil {
		httpapi.WriteError(w, http.StatusBadRequest, "invalid", err.Error())
		return commands.Result{}, false
	}
	cmd.ExpectedVersion = expected
	cmd.IP = clientIP(r)
	if caller, ok := auth.FromContext(r.Context()); ok {
		cmd.Actor = caller.Subject
	}
	res, err := h.d.DispatchFresh(r.Context(), cmd)
	var invalid *commands.InvalidError
	switch {
	case errors.As(err, &invalid):
		httpapi.WriteError(w, http.StatusBadRequest, "invalid", invalid.Err.Error())
	case err != nil:
		httpapi.WriteError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
	case res.Status == commands.StatusAccepted:
		return res, true
	case res.Status == commands.StatusConflict:
		httpapi.WriteError(w, http.StatusConflict, "conflict", res.Reason)
	case res.Status == commands.StatusNotFound:
		httpapi.WriteError(w, http.StatusNotFound, "not_found", res.Reason)
	default:
		httpapi.WriteError(w, http.StatusUnprocessableEntity, string(res.Status), res.Reason)
	}
	return res, false
}

// ifMatch parses If-Match: "<version>"; missing is 428, malformed 400.
func ifMatch(w http.ResponseWriter, r *http.Request) (int64, bool) {
	raw := strings.TrimSpace(r.Header.Get("If-Match"))
	if raw == "" {
		httpapi.WriteError(w, http.StatusPreconditionRequired, "if_match_required", "If-Match with the todo's ETag is required")
		return 0, false
	}
	v, err := strconv.ParseInt(strings.Trim(strings.TrimPrefix(raw, "W/"), `"`), 10, 64)
	if err != nil || v < 0 {
		httpapi.WriteError(w, http.StatusBadRequest, "invalid_if_match", fmt.Sprintf("If-Match %q is not an ETag of this API", raw))
		return 0, false
	}
	return v, true
}

func etag(version int64) string { return `"` + strconv.FormatInt(version, 10) + `"` }

func writeTodo(w http.ResponseWriter, status int, v View) {
	w.Header().Set("ETag", etag(v.Version))
	httpapi.WriteJSON(w, status, v)
}

func clientIP(r *http.Request) string {
	host := r.RemoteAddr
	if i := strings.LastIndexByte(host, ':'); i > 0 {
		host = host[:i]
	}
	return strings.Trim(host, "[]")
}
