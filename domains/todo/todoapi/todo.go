// Package todoapi serves the todo domain over HTTP, as the reference
// design's todo API does: create, read, update and delete with the
// aggregate's version as ETag and If-Match for optimistic concurrency,
// and a list read from the todos read model.
package todoapi

import (
	"context"
	"encoding/json"
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
	"github.com/eventpipe/eventpipe/privacy"
)

// Dispatcher runs a command in-process and returns its result
// (*commands.Dispatcher does). The API dispatches with DispatchFresh: a
// request that is not accepted writes no command record. Its command id
// is fresh per request, or, with an Idempotency-Key, derived from the
// key: then a retried request is answered from the accepted command's
// record, and a refusal, which is not recorded, is decided again.
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
	// Records reads and writes the event store's command records, for
	// requests with an Idempotency-Key (the event store). Required.
	Records CommandRecords
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
	bad := func(field string) error {
		return fmt.Errorf("todoapi: Config: %w", &eventstore.ValidationError{Field: field, Reason: "is nil"})
	}
	switch {
	case c.Commands == nil:
		return bad("Commands")
	case c.States == nil:
		return bad("States")
	case c.List == nil:
		return bad("List")
	case c.Records == nil:
		return bad("Records")
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
	// Owner is the verified subject that created the todo (absent when
	// its creator was only claimed).
	Owner string `json:"owner,omitempty"`
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
// An id is what the event store takes as an aggregate id
// (eventstore.ValidateName: 1–256 bytes of UTF-8 without '#' or NUL); any
// other is 400 "invalid" before anything is read. An id reaches
// Elasticsearch as one escaped path segment (esclient.PathSegment), so
// "/todo/x%3Frefresh%3Dtrue?read=search" reads the document
// "x?refresh=true" and nothing else.
//
// Bodies of a create and an update are {"id", "title", "message"} as the
// reference design writes them, plus an optional "completed"; unknown
// fields are refused. The ETag is the todo's version: 1 after its
// creation (the reference numbers the creating event 0), one more with
// every change. Writes go through the same command handlers as the bus,
// with the If-Match version as the command's expected version.
//
// Every write (POST /todo, PUT, POST and DELETE /todo/{id}) takes an
// optional Idempotency-Key header (draft-ietf-httpapi-idempotency-key-
// header), scoped to the authenticated subject: a retry with the same key,
// method, path and body gets the first attempt's answer (status, body,
// ETag, Location) without running the command again, even when the
// server died between the append and the answer; the same key with
// another request is 422 (CodeKeyReused), while the first is still being
// handled by this process 409 (CodeKeyInUse), and an invalid key 400
// (CodeInvalidKey). A create without an id in its body then creates the
// todo whose id is derived from the key. See docs/commands.md.
func Mount(srv *httpapi.Server, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	h := &todoAPI{d: cfg.Commands, r: cfg.States, list: cfg.List, records: cfg.Records, searcher: cfg.Search, policy: cfg.Policy, logger: cfg.Logger}
	read := func(next func(http.ResponseWriter, *http.Request, auth.Grant)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if g, ok := auth.RequireRead(w, r, h.policy, Resource); ok {
				next(w, r, g)
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
	records  CommandRecords
	inflight httpapi.InFlight
	searcher Searcher
	policy   *auth.Policy
	logger   *slog.Logger
}

// keyedTodoPurpose derives the id of a todo created with an
// Idempotency-Key and no id in its body.
const keyedTodoPurpose = "todo id"

func (h *todoAPI) create(w http.ResponseWriter, r *http.Request) {
	key, ok := idempotencyKey(w, r)
	if !ok {
		return
	}
	var req todoRequest
	if !httpapi.DecodeJSON(w, r, &req) {
		return
	}
	body := canonical(req)
	switch {
	case req.ID != "":
	case key != nil:
		req.ID = key.Derive(keyedTodoPurpose)
	default:
		req.ID = ulid.Make().String()
	}
	zero := int64(0)
	h.write(w, r, key, writeOp{typ: todo.CreateTodo, id: req.ID, expected: &zero, payload: req.data(), body: body,
		answer: func(w http.ResponseWriter, version int64) {
			w.Header().Set("Location", "/todo/"+req.ID)
			writeTodo(w, http.StatusCreated, req.view(req.ID, version))
		}})
}

// canonical is the request body as the fingerprint of an Idempotency-Key
// sees it: decoded, then encoded again, so that spacing, field order and
// fields given their default value do not count.
func canonical(req todoRequest) []byte {
	b, _ := json.Marshal(req) // a struct of strings and a bool always encodes
	return b
}

// get serves GET /todo/{id}. A todo the caller's grant does not cover
// (an "own" grant, another's todo) is 404, as if it did not exist.
func (h *todoAPI) get(w http.ResponseWriter, r *http.Request, grant auth.Grant) {
	id := r.PathValue("id")
	// Checked before either read: the id goes into Elasticsearch's URL
	// (as one escaped segment) as well as into the store's keys.
	if err := (eventstore.Ref{Type: todo.AggregateType, ID: id}).Validate(); err != nil {
		httpapi.WriteError(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	switch read := r.URL.Query().Get("read"); {
	case read == "search" && h.searcher != nil:
		h.getFromSearch(w, r, id, grant)
		return
	case read != "" && read != "store":
		httpapi.WriteError(w, http.StatusBadRequest, "invalid_read", fmt.Sprintf("read=%q: want store (the default) or search", read))
		return
	}
	st, err := h.r.Get(r.Context(), id)
	var ve *eventstore.ValidationError
	switch {
	case errors.Is(err, eventstore.ErrAggregateNotFound) || (err == nil && (!st.Item.Exists || !grant.OwnedBy(st.Item.Owner))):
		httpapi.WriteError(w, http.StatusNotFound, "not_found", fmt.Sprintf("todo %s does not exist", id))
	case errors.Is(err, privacy.ErrForgotten):
		writeForgotten(w, id)
	case errors.As(err, &ve):
		httpapi.WriteError(w, http.StatusBadRequest, "invalid", ve.Error())
	case err != nil:
		httpapi.WriteServerError(w, r, http.StatusServiceUnavailable, "unavailable", err)
	default:
		writeTodo(w, http.StatusOK, View{ID: id, Title: st.Item.Title, Message: st.Item.Message, Completed: st.Item.Completed, Version: st.Seq, Owner: st.Item.Owner})
	}
}

func (h *todoAPI) update(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	key, ok := idempotencyKey(w, r)
	if !ok {
		return
	}
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
	// The If-Match version is part of the fingerprint: a retry must send
	// the version its first attempt sent, not the one that attempt made.
	h.write(w, r, key, writeOp{typ: todo.UpdateTodo, id: id, expected: &version, payload: req.data(),
		body:   append(canonical(req), etag(version)...),
		answer: func(w http.ResponseWriter, v int64) { writeTodo(w, http.StatusOK, req.view(id, v)) }})
}

func (h *todoAPI) remove(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	key, ok := idempotencyKey(w, r)
	if !ok {
		return
	}
	version, ok := ifMatch(w, r)
	if !ok {
		return
	}
	h.write(w, r, key, writeOp{typ: todo.DeleteTodo, id: id, expected: &version, payload: struct{}{}, body: []byte(etag(version)),
		answer: func(w http.ResponseWriter, v int64) {
			w.Header().Set("ETag", etag(v))
			w.WriteHeader(http.StatusNoContent)
		}})
}

// subject is the verified subject of the request ("" when anonymous).
func subject(r *http.Request) string {
	if caller, ok := auth.FromContext(r.Context()); ok {
		return caller.Subject
	}
	return ""
}

// run dispatches one todo command and writes the error response when it
// did not succeed; the caller asked the Policy (write). The verified
// subject, if any, becomes the command's actor (recorded as verified:
// eventstore.ActorHTTP). commandID, when set (an
// Idempotency-Key's), is the command's id and correlation id instead of a
// fresh ULID.
func (h *todoAPI) run(w http.ResponseWriter, r *http.Request, typ, id, commandID string, expected *int64, payload any) (commands.Result, bool) {
	cmd, err := commands.NewJSON(typ, todo.AggregateType, id, payload)
	if err != nil {
		httpapi.WriteError(w, http.StatusBadRequest, "invalid", err.Error())
		return commands.Result{}, false
	}
	if commandID != "" {
		cmd.ID, cmd.CorrelationID = commandID, commandID
	}
	cmd.ExpectedVersion = expected
	cmd.IP = clientIP(r)
	if caller, ok := auth.FromContext(r.Context()); ok {
		cmd.Actor, cmd.ActorSource = caller.Subject, eventstore.ActorHTTP
	}
	res, err := h.d.DispatchFresh(r.Context(), cmd)
	var invalid *commands.InvalidError
	switch {
	case errors.As(err, &invalid):
		httpapi.WriteError(w, http.StatusBadRequest, "invalid", invalid.Err.Error())
	case err != nil:
		httpapi.WriteServerError(w, r, http.StatusServiceUnavailable, "unavailable", err)
	case res.Status == commands.StatusAccepted:
		return res, true
	default:
		writeRefusal(w, string(res.Status), res.Code, res.Reason)
	}
	return res, false
}

// writeRefusal answers a command's refusal: conflict 409, not found 404,
// invalid 400, a forgotten owner's todo 410, any other (rejected) 422.
func writeRefusal(w http.ResponseWriter, status string, code eventstore.Code, reason string) {
	if code == privacy.CodeForgotten {
		httpapi.WriteError(w, http.StatusGone, "forgotten", reason)
		return
	}
	switch commands.Status(status) {
	case commands.StatusConflict:
		httpapi.WriteError(w, http.StatusConflict, "conflict", reason)
	case commands.StatusNotFound:
		httpapi.WriteError(w, http.StatusNotFound, "not_found", reason)
	case commands.StatusInvalid:
		httpapi.WriteError(w, http.StatusBadRequest, "invalid", reason)
	default:
		httpapi.WriteError(w, http.StatusUnprocessableEntity, status, reason)
	}
}

// writeForgotten answers 410 for a todo whose owner was forgotten: its
// data keys are erased, so it can be neither read nor changed.
func writeForgotten(w http.ResponseWriter, id string) {
	httpapi.WriteError(w, http.StatusGone, "forgotten", fmt.Sprintf("todo %s belonged to a data subject who was forgotten: its personal data is erased", id))
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
