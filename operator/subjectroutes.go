package operator

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/eventstore"
	ddbstore "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	"github.com/eventpipe/eventpipe/httpapi"
	"github.com/eventpipe/eventpipe/httpapi/auth"
)

var _ eventpipe.OperatorRoutes = MountRoutes

// MountRoutes mounts the operator surface `eventpipe serve` serves:
// the status page (MountStatusPage) and the data subjects' routes
// (MountSubjectRoutes).
func MountRoutes(srv *httpapi.Server, w *eventpipe.WriteSide) (io.Closer, error) {
	if err := MountSubjectRoutes(srv, w); err != nil {
		return nil, err
	}
	return MountStatusPage(srv, w)
}

// SubjectResource is the policy's resource of the subjects' routes: a
// write grant forgets, a read grant exports.
const SubjectResource = "subjects"

// forgetRequest is the body of POST /subjects/{id}/forget (optional).
type forgetRequest struct {
	Reason string `json:"reason"`
}

// forgetAnswer is its answer.
type forgetAnswer struct {
	Subject     string   `json:"subject"`
	Before      bool     `json:"forgotten_before"`
	ForgottenAt string   `json:"forgotten_at,omitempty"`
	Scopes      []string `json:"scopes"`
	Erased      int      `json:"erased"`
	Reason      string   `json:"reason,omitempty"`
	ActionID    int64    `json:"operator_action"`
}

// MountSubjectRoutes mounts, on the operator surface, the data subjects'
// routes (docs/privacy.md), behind the write side's authentication: POST
// /subjects/{id}/forget (Forget; a write grant of "subjects"; body
// {"reason": "…"} optional) and GET /subjects/{id}/export (ExportSubject;
// a read grant of "subjects"). The caller's verified subject is recorded
// as the operator action's actor ("operator-api" when auth is off).
func MountSubjectRoutes(srv *httpapi.Server, w *eventpipe.WriteSide) error {
	cfg := w.Config()
	store, _ := w.Store.(*ddbstore.Store)
	process := eventpipe.Process{Catalog: cfg.Catalog, Endpoints: cfg.Endpoints, Logger: cfg.Logger}
	actor := func(r *http.Request) string {
		if id, ok := auth.FromContext(r.Context()); ok {
			return id.Subject
		}
		return "operator-api"
	}
	fail := func(rw http.ResponseWriter, r *http.Request, err error) {
		var ve *eventstore.ValidationError
		if errors.As(err, &ve) {
			httpapi.WriteError(rw, http.StatusBadRequest, "invalid", err.Error())
			return
		}
		httpapi.WriteServerError(rw, r, http.StatusServiceUnavailable, "unavailable", err)
	}
	srv.Mux.HandleFunc("POST /"+SubjectResource+"/{id}/forget", func(rw http.ResponseWriter, r *http.Request) {
		var body forgetRequest
		if r.ContentLength != 0 {
			dec := json.NewDecoder(http.MaxBytesReader(rw, r.Body, 64<<10))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&body); err != nil {
				httpapi.WriteError(rw, http.StatusBadRequest, "invalid_body", "the body is not {\"reason\": \"…\"}: "+err.Error())
				return
			}
		}
		res, err := Forget(r.Context(), ForgetConfig{Process: process, Store: store, DB: w.ReadModels(), Subject: r.PathValue("id"), Actor: actor(r), Reason: body.Reason})
		if err != nil {
			fail(rw, r, err)
			return
		}
		out := forgetAnswer{Subject: r.PathValue("id"), Before: res.Before, Scopes: res.Fact.Scopes, Erased: res.Fact.Erased, Reason: res.Fact.Reason, ActionID: res.Action.ID}
		if out.Scopes == nil {
			out.Scopes = []string{}
		}
		if !res.Before {
			out.ForgottenAt = res.Fact.ForgottenAt.Format("2006-01-02T15:04:05.999999999Z07:00")
		}
		httpapi.WriteJSON(rw, http.StatusOK, out)
	})
	srv.Mux.HandleFunc("GET /"+SubjectResource+"/{id}/export", func(rw http.ResponseWriter, r *http.Request) {
		out, err := ExportSubject(r.Context(), ExportConfig{Process: process, Store: store, DB: w.ReadModels(), Search: w.Search(),
			Subject: r.PathValue("id"), Actor: actor(r), Reason: r.URL.Query().Get("reason")})
		if err != nil {
			fail(rw, r, err)
			return
		}
		httpapi.WriteJSON(rw, http.StatusOK, out)
	})
	return nil
}
