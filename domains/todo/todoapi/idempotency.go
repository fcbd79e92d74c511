package todoapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/httpapi"
	"github.com/eventpipe/eventpipe/httpapi/auth"
	"github.com/eventpipe/eventpipe/privacy"
)

// CommandRecords reads and writes the event store's command records
// (COMMAND#<id>); *eventstore/dynamodb.Store does. The API uses them for
// Idempotency-Key: CommandResult finds the answer of a key's command, and
// RecordRefusal writes a key's claim with a condition that the first
// writer wins.
type CommandRecords interface {
	CommandResult(ctx context.Context, ref eventstore.Ref, commandID string) (eventstore.AppendResult, error)
	RecordRefusal(ctx context.Context, ref eventstore.Ref, commandID string, r eventstore.Refusal) (eventstore.AppendResult, error)
}

// KeyAggregateType is the aggregate type of the partitions that hold the
// claims of Idempotency-Keys: one partition per scoped key
// (IdempotencyKey.ID), holding only the COMMAND# record of the key's
// claim. No events are ever appended to them.
const KeyAggregateType = "idempotency-key"

// claimStatus is the status of a key's claim record. Its reason is
// "<fingerprint> <method> <path>".
const claimStatus = "idempotency_key_claimed"

// Problem codes of the Idempotency-Key answers.
const (
	// CodeInvalidKey (400): the header is not a valid key.
	CodeInvalidKey = "invalid_idempotency_key"
	// CodeKeyInUse (409): a request with the same key is still being
	// handled.
	CodeKeyInUse = "idempotency_key_in_use"
	// CodeKeyReused (422): the key was first used for another request
	// (another method, path or body).
	CodeKeyReused = "idempotency_key_reused"
)

// idempotencyKey parses the request's Idempotency-Key, scoped to the
// caller's subject, writing 400 when it is invalid. ok is false when the
// response was written; key is nil without the header.
func idempotencyKey(w http.ResponseWriter, r *http.Request) (key *httpapi.IdempotencyKey, ok bool) {
	k, present, err := httpapi.ParseIdempotencyKey(r, subject(r))
	if err != nil {
		httpapi.WriteError(w, http.StatusBadRequest, CodeInvalidKey, err.Error())
		return nil, false
	}
	if !present {
		return nil, true
	}
	return &k, true
}

// claim makes fingerprint the key's request, or checks that it is the
// one the key was claimed for. It writes the answer (422, 503) and
// returns false when the request must not go on.
func (h *todoAPI) claim(w http.ResponseWriter, r *http.Request, key httpapi.IdempotencyKey, fingerprint string) bool {
	ref := eventstore.Ref{Type: KeyAggregateType, ID: key.ID()}
	_, err := h.records.RecordRefusal(r.Context(), ref, key.CommandID(), eventstore.Refusal{
		Status: claimStatus, Reason: fingerprint + " " + r.Method + " " + r.URL.Path,
	})
	var prior *eventstore.RefusedCommandError
	switch {
	case err == nil:
		return true
	case errors.As(err, &prior) && prior.Refusal.Status == claimStatus:
		first, _, _ := strings.Cut(prior.Refusal.Reason, " ")
		if first == fingerprint {
			return true
		}
		_, firstRequest, _ := strings.Cut(prior.Refusal.Reason, " ")
		h.logger.Info("idempotency key reused for another request", "subject", key.Subject, "key_id", key.ID(),
			"first", firstRequest, "method", r.Method, "path", r.URL.Path)
		httpapi.WriteError(w, http.StatusUnprocessableEntity, CodeKeyReused, fmt.Sprintf(
			"Idempotency-Key %q was first used for another request (%s): a key may only be retried with the same method, path and body",
			key.Key, firstRequest))
		return false
	case errors.As(err, &prior):
		httpapi.WriteServerError(w, r, http.StatusInternalServerError, "internal", fmt.Errorf("claim of Idempotency-Key: unexpected record: %w", err))
		return false
	default:
		httpapi.WriteServerError(w, r, http.StatusServiceUnavailable, "unavailable", err)
		return false
	}
}

// writeOp is one write request: the command it dispatches and how its
// acceptance is answered.
type writeOp struct {
	typ      string
	id       string
	expected *int64
	payload  any
	// body is the canonical request body the fingerprint covers.
	body []byte
	// answer writes the success answer for the todo's version after the
	// command; it is a function of the request and that version only, so
	// a retry answered from the command record gets what the first
	// attempt got.
	answer func(w http.ResponseWriter, version int64)
}

// owns reports whether grant covers the todo op changes, writing 403
// when not (or 503 when the todo cannot be read). A grant of every todo
// needs no read; an "own" grant reads the todo's owner, which never
// changes, so the check holds when the command is appended later. A todo
// that does not exist is left to the command to refuse (404).
func (h *todoAPI) owns(w http.ResponseWriter, r *http.Request, grant auth.Grant, op writeOp) bool {
	if grant.Any {
		return true
	}
	st, err := h.r.Get(r.Context(), op.id)
	switch {
	case errors.Is(err, eventstore.ErrAggregateNotFound):
		return true
	case errors.Is(err, privacy.ErrForgotten):
		writeForgotten(w, op.id)
		return false
	case err != nil:
		httpapi.WriteServerError(w, r, http.StatusServiceUnavailable, "unavailable", err)
		return false
	case (st.Item.Exists || st.Item.Deleted) && !grant.OwnedBy(st.Item.Owner):
		auth.Forbid(w, fmt.Sprintf("send %s to todo %s: the policy grants it only on todos you own", op.typ, op.id))
		return false
	}
	return true
}

// write runs op once the Policy allows the caller to send its command
// type and the todo's id and fields are valid (400 otherwise, before
// anything is written). Without a key it dispatches a fresh command. With one it
// refuses a key in flight in this process (409), claims the key for this
// request's fingerprint (422 if claimed for another), answers again what
// the key's command was answered when the event store recorded it, and otherwise
// dispatches the command under the key's command id, so that the store
// appends it at most once however often the request is retried.
func (h *todoAPI) write(w http.ResponseWriter, r *http.Request, key *httpapi.IdempotencyKey, op writeOp) {
	grant, ok := auth.RequireCommand(w, r, h.policy, op.typ)
	if !ok {
		return
	}
	// A request the command would refuse as invalid is answered here,
	// before a key is claimed: an invalid request writes nothing.
	if err := (eventstore.Ref{Type: todo.AggregateType, ID: op.id}).Validate(); err != nil {
		httpapi.WriteError(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	if p, ok := op.payload.(interface{ Validate() error }); ok {
		if err := p.Validate(); err != nil {
			httpapi.WriteError(w, http.StatusBadRequest, "invalid", err.Error())
			return
		}
	}
	if op.typ != todo.CreateTodo && !h.owns(w, r, grant, op) {
		return
	}
	commandID := ""
	if key != nil {
		release, ok := h.inflight.Acquire(*key)
		if !ok {
			httpapi.WriteError(w, http.StatusConflict, CodeKeyInUse, fmt.Sprintf("a request with Idempotency-Key %q is still being handled; retry later", key.Key))
			return
		}
		defer release()
		if !h.claim(w, r, *key, httpapi.Fingerprint(r.Method, r.URL.Path, op.body)) {
			return
		}
		commandID = key.CommandID()
		ref := eventstore.Ref{Type: todo.AggregateType, ID: op.id}
		prior, err := h.records.CommandResult(r.Context(), ref, commandID)
		var refused *eventstore.RefusedCommandError
		var invalid *eventstore.ValidationError
		switch {
		case err == nil:
			h.logger.Debug("idempotent request repeated", "command_id", commandID, "aggregate", ref.String(), "version", prior.LastSeq)
			op.answer(w, prior.LastSeq)
			return
		case errors.As(err, &refused):
			writeRefusal(w, refused.Refusal.Status, refused.Refusal.Code, refused.Refusal.Reason)
			return
		case errors.As(err, &invalid):
			httpapi.WriteError(w, http.StatusBadRequest, "invalid", invalid.Error())
			return
		case !errors.Is(err, eventstore.ErrCommandNotFound):
			httpapi.WriteServerError(w, r, http.StatusServiceUnavailable, "unavailable", err)
			return
		}
	}
	res, ok := h.run(w, r, op.typ, op.id, commandID, op.expected, op.payload)
	if ok {
		op.answer(w, res.Version)
	}
}
