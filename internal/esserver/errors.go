package esserver

import (
	"fmt"
	"net/http"
)

// esError is an error rendered in Elasticsearch's error body shape:
//
//	{"error":{"root_cause":[{...}],"type":...,"reason":...},"status":N}
//
// or, for the few places where Elasticsearch answers with a plain string,
// {"error":"...","status":N}.
type esError struct {
	status   int
	typ      string
	reason   string
	extra    map[string]any
	causedBy *esError
	// rootCause overrides the default root cause (the deepest caused_by).
	rootCause *esError
	// plain renders {"error":reason,"status":N}.
	plain bool
}

func (e *esError) Error() string { return e.typ + ": " + e.reason }

func newErr(status int, typ, format string, args ...any) *esError {
	return &esError{status: status, typ: typ, reason: fmt.Sprintf(format, args...)}
}

func (e *esError) with(k string, v any) *esError {
	if e.extra == nil {
		e.extra = map[string]any{}
	}
	e.extra[k] = v
	return e
}

// object renders the error object without root_cause.
func (e *esError) object() map[string]any {
	m := map[string]any{"type": e.typ, "reason": e.reason}
	for k, v := range e.extra {
		m[k] = v
	}
	if e.causedBy != nil {
		m["caused_by"] = e.causedBy.object()
	}
	return m
}

func (e *esError) root() *esError {
	if e.rootCause != nil {
		return e.rootCause
	}
	r := e
	for r.causedBy != nil {
		r = r.causedBy
	}
	return r
}

// body renders the full response body.
func (e *esError) body() map[string]any {
	if e.plain {
		return map[string]any{"error": e.reason, "status": e.status}
	}
	obj := e.object()
	rc := e.root()
	rcObj := map[string]any{"type": rc.typ, "reason": rc.reason}
	for k, v := range rc.extra {
		rcObj[k] = v
	}
	obj["root_cause"] = []any{rcObj}
	return map[string]any{"error": obj, "status": e.status}
}

// itemError renders the error object used inside bulk items.
func (e *esError) itemError() map[string]any { return e.object() }

func indexNotFound(name string) *esError {
	return newErr(http.StatusNotFound, "index_not_found_exception", "no such index [%s]", name).
		with("resource.type", "index_or_alias").with("resource.id", name).
		with("index_uuid", "_na_").with("index", name)
}

// writeBlocked is the error of a document write to an index whose
// index.blocks.write is set (Elasticsearch's index write block, id 8).
func writeBlocked(name string) *esError {
	return newErr(http.StatusForbidden, "cluster_block_exception", "index [%s] blocked by: [FORBIDDEN/8/index write (api)];", name)
}

func illegalArgument(format string, args ...any) *esError {
	return newErr(http.StatusBadRequest, "illegal_argument_exception", format, args...)
}

func parsingError(format string, args ...any) *esError {
	return newErr(http.StatusBadRequest, "parsing_exception", format, args...)
}

func xContentParseError(err error) *esError {
	return newErr(http.StatusBadRequest, "x_content_parse_exception", "%s", jsonErrText(err))
}

func validationError(msgs ...string) *esError {
	r := "Validation Failed: "
	for i, m := range msgs {
		r += fmt.Sprintf("%d: %s;", i+1, m)
	}
	return newErr(http.StatusBadRequest, "action_request_validation_exception", "%s", r)
}

func invalidIndexName(name, why string) *esError {
	return newErr(http.StatusBadRequest, "invalid_index_name_exception", "Invalid index name [%s], %s", name, why).
		with("index_uuid", "_na_").with("index", name)
}

func (ix *index) conflict(id, reason string) *esError {
	return newErr(http.StatusConflict, "version_conflict_engine_exception", "[%s]: %s", id, reason).
		with("index_uuid", ix.uuid).with("shard", "0").with("index", ix.name)
}

// shardFailure wraps a per-shard search failure the way Elasticsearch does:
// search_phase_execution_exception "all shards failed" with the cause as
// root cause.
func shardFailure(indexName string, cause *esError) *esError {
	e := &esError{
		status: cause.status, typ: "search_phase_execution_exception", reason: "all shards failed",
		causedBy: cause, rootCause: cause,
	}
	e.with("phase", "query").with("grouped", true).with("failed_shards", []any{map[string]any{
		"shard": 0, "index": indexName, "node": nodeID, "reason": cause.object(),
	}})
	return e
}

func internalError(err error) *esError {
	return newErr(http.StatusInternalServerError, "exception", "%s", err.Error())
}

func jsonErrText(err error) string {
	return "failed to parse JSON: " + err.Error()
}
