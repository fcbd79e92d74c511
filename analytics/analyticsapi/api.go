// Package analyticsapi serves the analytics store over HTTP: event
// ingestion, a session's events, sessions by source and by user, and
// hourly and daily aggregations (seed 001's access patterns AP1–AP7).
package analyticsapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/httpapi"
	"github.com/eventpipe/eventpipe/httpapi/auth"
	"github.com/eventpipe/eventpipe/privacy"
)

// Config is what the analytics API needs.
type Config struct {
	// Store reads and writes the analytics table. Required.
	Store *analytics.Store
	// Policy, when set (auth on: the server's middleware is
	// auth.Authenticator.Middleware with Resources delegated), is asked
	// before every request: ingestion needs a write grant of
	// auth.AnalyticsResource covering the source, a source's reads a read
	// grant covering it; a user's sessions need a read grant of every
	// source, an "own" grant when the user is the caller's subject, or a
	// grant of some sources (the page then holds only their sessions).
	// 401 without an identity, 403 otherwise. Nil: everything is allowed.
	Policy *auth.Policy
	// Logger logs failed reads and writes (default slog.Default()).
	Logger *slog.Logger
}

// Resources are the first path segments of the API's routes, which
// handle authorization themselves (auth.Config.Delegated); the policy
// names them all auth.AnalyticsResource.
var Resources = []string{"sources", "users"}

// Validate reports the first missing field.
func (c Config) Validate() error {
	if c.Store == nil {
		return fmt.Errorf("analyticsapi: Config: %w", &eventstore.ValidationError{Field: "Store", Reason: "is nil"})
	}
	return nil
}

// eventRequest is one event in a POST body: analytics.EventInput's JSON
// fields, with createdAt as an RFC 3339 string so that a bad one is
// named.
type eventRequest struct {
	analytics.EventInput
	CreatedAt string `json:"createdAt,omitempty"`
}

// Ingested is the answer to POST /sources/{id}/events: 201 when every
// event is in the table (stored now or a duplicate), 503 with Code and
// Message set when some failed.
type Ingested struct {
	// Code and Message are set on a 503 only: "partially_stored" when
	// some events are in the table, "unavailable" when none is.
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	// RequestID is set on a 503 only: the request's correlation id (the
	// X-Request-Id header's), which the server's log line of the failure
	// names.
	RequestID string `json:"requestId,omitempty"`
	// Events are the events that are in the table, in request order:
	// on a 201 every event of the request.
	Events []IngestedEvent `json:"events"`
	// Results has one entry per event of the request, in its order.
	Results []EventResult `json:"results"`
	// Stored, Duplicates and Failed count Results by status.
	Stored     int `json:"stored"`
	Duplicates int `json:"duplicates"`
	Failed     int `json:"failed"`
}

// IngestedEvent is where one event was stored.
type IngestedEvent struct {
	EventID   string    `json:"eventId"`
	Shard     int       `json:"shard"`
	CreatedAt time.Time `json:"createdAt"`
}

// EventResult is what became of the event at Index of the request:
// Status "stored" (written, or for an Idempotency-Key batch written by
// an earlier post of it), "duplicate" (its eventId was stored before; not
// written or counted again) or "failed" (Error says why; post it again —
// with an eventId or Idempotency-Key that is safe).
type EventResult struct {
	Index int `json:"index"`
	IngestedEvent
	Status analytics.Status `json:"status"`
	Error  string           `json:"error,omitempty"`
}

// Events is a page of GET /sources/{id}/sessions/{sessionId}/events
// (Next as in Sessions).
type Events struct {
	Events []analytics.Event `json:"events"`
	Next   string            `json:"next,omitempty"`
}

// Sessions is a page of sessions; Next is the cursor of the following
// page, absent on the last.
type Sessions struct {
	Sessions []analytics.Session `json:"sessions"`
	Next     string              `json:"next,omitempty"`
}

// Aggregations is a page of aggregations (Next as in Sessions; never set
// for a from/to range, which is answered whole).
type Aggregations struct {
	Aggregations []analytics.Aggregation `json:"aggregations"`
	Next         string                  `json:"next,omitempty"`
}

// Mount mounts the analytics API on srv:
//
//	POST /sources/{id}/events                      one event, or {"events":[…]}: 201 + Ingested
//	                                               (optional header Idempotency-Key)
//	GET  /sources/{id}/sessions/{sessionId}/events?limit=&cursor=
//	                                               the session's events in ULID order (AP2)
//	GET  /sources/{id}/sessions/{sessionId}         the session (AP3); 404 if unknown
//	GET  /sources/{id}/sessions?limit=&cursor=      recent sessions first (AP4)
//	GET  /users/{userId}/sessions?limit=&cursor=    a user's sessions, recent first (AP5)
//	GET  /sources/{id}/aggregations?period=hourly|daily&limit=&cursor=
//	                                               newest bucket first (AP6)
//	GET  /sources/{id}/aggregations?period=…&from=&to=
//	                                               the buckets from..to inclusive, oldest first
//	                                               (AP7; RFC 3339 times or YYYY-MM-DD days)
//
// Every listing pages: limit (default analytics.Config.PageSize, 50; at
// most analytics.MaxPageSize, 1000) and cursor (the "next" of the
// previous page, absent on the last); a limit out of range or a cursor
// another listing returned answers 400 "invalid" naming the parameter.
//
// An event is {"eventId", "type", "sessionId", "userId", "url",
// "referrer", "properties", "userAgent", "createdAt"} (see
// analytics.EventInput; createdAt RFC 3339, default now, or the
// eventId's time).
//
// Retries: an event with an "eventId" (a ULID the client makes) is stored
// and counted once however often, and however batched, it is posted; a
// repeat is reported with status "duplicate". A batch posted with an
// Idempotency-Key header (1–255 printable ASCII characters, quoted as
// the IETF draft's sf-string or not) gives each event without an eventId
// an id derived from (source, key, index), dated at its createdAt or the
// key's first use, so posting the same body with the same key again
// within 24 hours (analytics.Config.IdempotencyTTL) stores nothing twice
// and answers as the first post did; the same key with another body
// answers 422 "idempotency_key_reused" and stores nothing. A key is the
// caller's: with authentication on, the same key sent by two subjects is
// two keys (analytics.IngestOptions.Caller), so callers neither dedupe
// against nor replay each other's batches; without it (--no-auth) a key
// is shared by every caller of the source. Without an eventId or a
// key, every post stores its events again: a retry may double count.
//
// The answer to a POST is an Ingested: "results" has, per event of the
// request, its index, eventId, shard, createdAt and status ("stored",
// "duplicate" or "failed" with an "error"), with "stored", "duplicates"
// and "failed" counting them, and "events" lists the events in the
// table. It is 201 when none failed; when some did (DynamoDB failed or
// the request ended mid-way), 503 with code "partially_stored" ("unavailable"
// when no event is in the table), the same body and Retry-After: 1 — the failed events may or may not be stored,
// so post them again, safely if they have ids.
//
// A body that does not parse, or has an unknown field, answers 400
// "malformed_json" (as httpapi.DecodeJSON does); invalid input (an
// eventId that is not a ULID, a bad Idempotency-Key included) 400
// "invalid" with a message naming the field and, in a batch, the event's
// index; a body over the server's limit 413; a failure of DynamoDB before
// anything was written 503 "unavailable".
func Mount(srv *httpapi.Server, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	h := &api{store: cfg.Store, policy: cfg.Policy, logger: cfg.Logger}
	srv.Mux.HandleFunc("POST /sources/{id}/events", h.source(auth.RequireWrite, h.ingest))
	srv.Mux.HandleFunc("GET /sources/{id}/sessions/{sessionId}/events", h.source(auth.RequireRead, h.sessionEvents))
	srv.Mux.HandleFunc("GET /sources/{id}/sessions/{sessionId}", h.source(auth.RequireRead, h.session))
	srv.Mux.HandleFunc("GET /sources/{id}/sessions", h.source(auth.RequireRead, h.recentSessions))
	srv.Mux.HandleFunc("GET /users/{userId}/sessions", h.userSessions)
	srv.Mux.HandleFunc("GET /sources/{id}/aggregations", h.source(auth.RequireRead, h.aggregations))
	return nil
}

type api struct {
	store  *analytics.Store
	policy *auth.Policy
	logger *slog.Logger
}

// source wraps a route of one source: next runs when the policy's grant
// (require's: a read or a write) covers the source of the path.
func (h *api) source(require func(http.ResponseWriter, *http.Request, *auth.Policy, string) (auth.Grant, bool), next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		g, ok := require(w, r, h.policy, auth.AnalyticsResource)
		if !ok {
			return
		}
		if source := r.PathValue("id"); !g.Source(source) {
			verb := "read"
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				verb = "write"
			}
			auth.Forbid(w, fmt.Sprintf("%s the analytics of source %s", verb, source))
			return
		}
		next(w, r)
	}
}

func (h *api) ingest(w http.ResponseWriter, r *http.Request) {
	reqs, ok := decodeEvents(w, r)
	if !ok {
		return
	}
	in := make([]analytics.EventInput, len(reqs))
	for i, e := range reqs {
		in[i] = e.EventInput
		if e.CreatedAt != "" {
			t, err := time.Parse(time.RFC3339Nano, e.CreatedAt)
			if err != nil {
				h.fail(w, r, &analytics.EventError{Index: i, Err: &eventstore.ValidationError{Field: "createdAt", Reason: fmt.Sprintf("%q is not an RFC 3339 time", e.CreatedAt)}})
				return
			}
			in[i].CreatedAt = &t
		}
	}
	// The key is the caller's (the authenticated subject's) on the
	// source: callers never dedupe against each other; each event
	// records the caller as its actor. Without authentication there is
	// no caller and the key is the source's.
	subject := ""
	if caller, ok := auth.FromContext(r.Context()); ok {
		subject = caller.Subject
	}
	key, _, err := httpapi.ParseIdempotencyKey(r, subject)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	opts := analytics.IngestOptions{IdempotencyKey: key.Key, Caller: subject}
	results, err := h.store.IngestBatch(r.Context(), r.PathValue("id"), in, opts)
	if results == nil {
		h.fail(w, r, err)
		return
	}
	out := Ingested{Events: []IngestedEvent{}, Results: make([]EventResult, len(results))}
	for i, res := range results {
		e := IngestedEvent{EventID: res.Event.EventID, Shard: res.Event.Shard, CreatedAt: res.Event.CreatedAt}
		out.Results[i] = EventResult{Index: i, IngestedEvent: e, Status: res.Status}
		switch res.Status {
		case analytics.StatusFailed:
			out.Failed++
			out.Results[i].Error = "not stored: the analytics table could not be written"
			if errors.Is(res.Err, context.Canceled) || errors.Is(res.Err, context.DeadlineExceeded) {
				out.Results[i].Error = "not stored: the request ended first"
			}
			continue
		case analytics.StatusDuplicate:
			out.Duplicates++
		default:
			out.Stored++
		}
		out.Events = append(out.Events, e)
	}
	if err != nil {
		h.logger.ErrorContext(r.Context(), "analytics ingestion partly failed", "request_id", httpapi.RequestID(r.Context()), "path", r.URL.Path,
			"stored", out.Stored, "duplicates", out.Duplicates, "failed", out.Failed, "err", err)
		out.Code = "partially_stored"
		if len(out.Events) == 0 {
			out.Code = "unavailable"
		}
		out.Message = fmt.Sprintf("%d of %d events were not stored (see results); post them again", out.Failed, len(results))
		out.RequestID = httpapi.RequestID(r.Context())
		w.Header().Set("Retry-After", "1")
		httpapi.WriteJSON(w, http.StatusServiceUnavailable, out)
		return
	}
	httpapi.WriteJSON(w, http.StatusCreated, out)
}

// HeaderIdempotencyKey is the request header that makes an ingestion
// safe to retry (draft-ietf-httpapi-idempotency-key-header), parsed as
// httpapi.ParseIdempotencyKey does for every API.
const HeaderIdempotencyKey = httpapi.IdempotencyKeyHeader

// decodeEvents reads a POST body: one event, or {"events":[…]}. It
// writes the error answer and returns false when the body does not
// decode.
func decodeEvents(w http.ResponseWriter, r *http.Request) ([]eventRequest, bool) {
	var raw json.RawMessage
	if !httpapi.DecodeJSON(w, r, &raw) {
		return nil, false
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(raw, &probe); err != nil {
		httpapi.WriteError(w, http.StatusBadRequest, "malformed_json", "request body must be a JSON object")
		return nil, false
	}
	batch, isBatch := probe["events"]
	if !isBatch {
		var e eventRequest
		if err := eventstore.DecodeStrict("event", raw, &e); err != nil {
			httpapi.WriteError(w, http.StatusBadRequest, "malformed_json", err.Error())
			return nil, false
		}
		return []eventRequest{e}, true
	}
	var items []json.RawMessage
	if len(probe) != 1 || json.Unmarshal(batch, &items) != nil {
		httpapi.WriteError(w, http.StatusBadRequest, "malformed_json", `a batch body must be {"events":[…]} and nothing else`)
		return nil, false
	}
	events := make([]eventRequest, len(items))
	for i, it := range items {
		if err := eventstore.DecodeStrict(fmt.Sprintf("event %d", i), it, &events[i]); err != nil {
			httpapi.WriteError(w, http.StatusBadRequest, "malformed_json", err.Error())
			return nil, false
		}
	}
	return events, true
}

func (h *api) sessionEvents(w http.ResponseWriter, r *http.Request) {
	limit, err := limitParam(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	events, next, err := h.store.SessionEventsPage(r.Context(), r.PathValue("id"), r.PathValue("sessionId"), limit, r.URL.Query().Get("cursor"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, Events{Events: events, Next: next})
}

func (h *api) session(w http.ResponseWriter, r *http.Request) {
	source, id := r.PathValue("id"), r.PathValue("sessionId")
	s, ok, err := h.store.Session(r.Context(), source, id)
	switch {
	case err != nil:
		h.fail(w, r, err)
	case !ok:
		httpapi.WriteError(w, http.StatusNotFound, "not_found", fmt.Sprintf("session %s of source %s does not exist", id, source))
	default:
		httpapi.WriteJSON(w, http.StatusOK, s)
	}
}

func (h *api) recentSessions(w http.ResponseWriter, r *http.Request) {
	h.sessions(w, r, func(limit int, cursor string) ([]analytics.Session, string, error) {
		return h.store.RecentSessions(r.Context(), r.PathValue("id"), limit, cursor)
	})
}

// userSessions serves a user's sessions: all of them to a grant of every
// source or to the user itself under an "own" grant; to a grant of some
// sources, only theirs (a page may then hold fewer than limit sessions,
// and its next cursor still leads on).
func (h *api) userSessions(w http.ResponseWriter, r *http.Request) {
	g, ok := auth.RequireRead(w, r, h.policy, auth.AnalyticsResource)
	if !ok {
		return
	}
	user := r.PathValue("userId")
	whole := g.Any || g.OwnedBy(user)
	if !whole && len(g.Sources) == 0 {
		auth.Forbid(w, "read the sessions of user "+user)
		return
	}
	h.sessions(w, r, func(limit int, cursor string) ([]analytics.Session, string, error) {
		sessions, next, err := h.store.UserSessions(r.Context(), user, limit, cursor)
		if whole || err != nil {
			return sessions, next, err
		}
		kept := sessions[:0]
		for _, s := range sessions {
			if g.Source(s.SourceID) {
				kept = append(kept, s)
			}
		}
		return kept, next, nil
	})
}

func (h *api) sessions(w http.ResponseWriter, r *http.Request, list func(limit int, cursor string) ([]analytics.Session, string, error)) {
	limit, err := limitParam(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	sessions, next, err := list(limit, r.URL.Query().Get("cursor"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, Sessions{Sessions: sessions, Next: next})
}

func (h *api) aggregations(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	source, period := r.PathValue("id"), analytics.Period(q.Get("period"))
	if !q.Has("from") && !q.Has("to") {
		limit, err := limitParam(r)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		aggs, next, err := h.store.Aggregations(r.Context(), source, period, limit, q.Get("cursor"))
		if err != nil {
			h.fail(w, r, err)
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, Aggregations{Aggregations: aggs, Next: next})
		return
	}
	if q.Has("limit") || q.Has("cursor") {
		h.fail(w, r, &eventstore.ValidationError{Field: "cursor", Reason: "limit and cursor do not go with from and to"})
		return
	}
	from, err := timeParam(q.Get("from"), "from")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	to, err := timeParam(q.Get("to"), "to")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	aggs, err := h.store.AggregationsBetween(r.Context(), source, period, from, to)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, Aggregations{Aggregations: aggs})
}

// limitParam reads ?limit= (absent: 0, the store's page size).
func limitParam(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, &eventstore.ValidationError{Field: "limit", Reason: fmt.Sprintf("%q is not a positive integer", v)}
	}
	return n, nil
}

// timeParam parses an RFC 3339 time or a YYYY-MM-DD day (its start, UTC).
func timeParam(v, name string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	return time.Time{}, &eventstore.ValidationError{Field: name, Reason: fmt.Sprintf("%q is not an RFC 3339 time or a YYYY-MM-DD day", v)}
}

// fail answers err: 400 for a *eventstore.ValidationError (its message
// prefixed with the event's index when it is about one event of a
// batch), 410 for an event of a forgotten user (its personal data cannot
// be written again), 422 for a reused idempotency key, 503 otherwise
// (DynamoDB or the KMS could not be read or written; logged).
func (h *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ve *eventstore.ValidationError
	if errors.As(err, &ve) {
		msg := ve.Error()
		if ee := (*analytics.EventError)(nil); errors.As(err, &ee) {
			msg = fmt.Sprintf("event %d: %s", ee.Index, msg)
		}
		httpapi.WriteError(w, http.StatusBadRequest, "invalid", msg)
		return
	}
	if fe := (*privacy.ForgottenError)(nil); errors.As(err, &fe) {
		msg := "user " + fe.Subject + " was forgotten: their personal data cannot be stored again"
		if ee := (*analytics.EventError)(nil); errors.As(err, &ee) {
			msg = fmt.Sprintf("event %d: %s", ee.Index, msg)
		}
		httpapi.WriteError(w, http.StatusGone, "forgotten", msg)
		return
	}
	var reuse *analytics.KeyReuseError
	if errors.As(err, &reuse) {
		httpapi.WriteError(w, http.StatusUnprocessableEntity, "idempotency_key_reused", reuse.Error())
		return
	}
	h.logger.ErrorContext(r.Context(), "analytics request failed", "request_id", httpapi.RequestID(r.Context()), "method", r.Method, "path", r.URL.Path, "err", err)
	httpapi.WriteError(w, http.StatusServiceUnavailable, "unavailable", "the analytics table cannot be read or written now")
}
