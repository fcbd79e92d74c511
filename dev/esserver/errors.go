package esserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
)

// jsonKV is one member of an ordered JSON object.
type jsonKV struct {
	k string
	v any
}

// ordered is a JSON object that keeps its members in insertion order, so
// that error bodies list their keys in Elasticsearch's order (root_cause,
// type, reason, then the metadata in the order Elasticsearch adds it).
type ordered []jsonKV

func (o ordered) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, kv := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(kv.k)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(kv.v)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

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
	extra    ordered // metadata keys, in Elasticsearch's order
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

// with adds (or replaces) a metadata key; keys render in the order added.
func (e *esError) with(k string, v any) *esError {
	for i := range e.extra {
		if e.extra[i].k == k {
			e.extra[i].v = v
			return e
		}
	}
	e.extra = append(e.extra, jsonKV{k, v})
	return e
}

// object renders the error object without root_cause: type, reason, the
// metadata keys, caused_by (Elasticsearch's ElasticsearchException order).
func (e *esError) object() ordered {
	m := ordered{{"type", e.typ}, {"reason", e.reason}}
	m = append(m, e.extra...)
	if e.causedBy != nil {
		m = append(m, jsonKV{"caused_by", e.causedBy.object()})
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

// errorObject renders the "error" member of the body: root_cause first,
// then type, reason and the rest, as Elasticsearch does.
func (e *esError) errorObject() ordered {
	rc := e.root()
	rcObj := ordered{{"type", rc.typ}, {"reason", rc.reason}}
	rcObj = append(rcObj, rc.extra...)
	return append(ordered{{"root_cause", []any{rcObj}}}, e.object()...)
}

// body renders the full response body.
func (e *esError) body() ordered {
	if e.plain {
		return ordered{{"error", e.reason}, {"status", e.status}}
	}
	return ordered{{"error", e.errorObject()}, {"status", e.status}}
}

// itemError renders the error object used inside bulk items.
func (e *esError) itemError() ordered { return e.object() }

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
