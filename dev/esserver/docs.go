package esserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	bindex "github.com/blevesearch/bleve_index_api"
)

var idCounter atomic.Uint64

// autoID generates a 20-character URL-safe id, time-ordered like
// Elasticsearch's.
func autoID() string {
	var b [15]byte
	binary.BigEndian.PutUint64(b[0:8], uint64(time.Now().UnixMicro()))
	binary.BigEndian.PutUint32(b[8:12], uint32(idCounter.Add(1)))
	_, _ = rand.Read(b[12:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// opFromQuery reads the versioning parameters of a single-document request.
func opFromQuery(q url.Values, op *writeOp) *esError {
	if v := q.Get("version"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return illegalArgument("Failed to parse long parameter [version] with value [%s]", v)
		}
		op.version, op.hasVersion = n, true
	}
	op.versionType = q.Get("version_type")
	if v := q.Get("if_seq_no"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return illegalArgument("Failed to parse long parameter [if_seq_no] with value [%s]", v)
		}
		op.ifSeqNo, op.hasIfSeqNo = n, true
		op.ifTerm = 0
	}
	if v := q.Get("if_primary_term"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return illegalArgument("Failed to parse long parameter [if_primary_term] with value [%s]", v)
		}
		op.ifTerm = n
		if !op.hasIfSeqNo {
			return validationError("ifSeqNo is unassigned, but primary term is [" + v + "]")
		}
	}
	if q.Has("pipeline") && q.Get("pipeline") != "_none" {
		return illegalArgument("pipeline with id [%s] does not exist", q.Get("pipeline"))
	}
	return nil
}

// writeTarget resolves the index a write goes to, auto-creating it (with
// dynamic mapping) as Elasticsearch does by default.
func (s *Server) writeTarget(name string, autoCreate, requireAlias bool) (*index, *esError) {
	ix, err := s.lookupWrite(name)
	if err != nil {
		return nil, err
	}
	if requireAlias {
		s.mu.RLock()
		_, isAlias := s.aliases[name]
		s.mu.RUnlock()
		if !isAlias {
			// IndexNotFoundException with the require_alias message
			// (TransportBulkAction / TransportUpdateAction).
			e := indexNotFound(name)
			e.reason += " and [require_alias] request flag is [true] and [" + name + "] is not an alias"
			return nil, e
		}
	}
	if ix != nil {
		return ix, nil
	}
	if !autoCreate {
		return nil, indexNotFound(name)
	}
	if err := validateIndexName(name); err != nil {
		return nil, err
	}
	ix, _, err = s.createIndex(name, &createIndexReq{settings: map[string]string{}, mappings: newMappings()})
	if err != nil && err.typ == "resource_already_exists_exception" {
		return ix, nil // created concurrently
	}
	return ix, err
}

// finishWrite waits for durability and the requested refresh policy.
func (s *Server) finishWrite(ctx context.Context, res *writeResult, refresh string) *esError {
	if res.pos > 0 {
		if err := s.wal.waitDurable(res.pos); err != nil {
			return internalError(err)
		}
	}
	switch refresh {
	case "true":
		if err := s.refresh(res.ix); err != nil {
			return internalError(err)
		}
	case "wait_for":
		if err := s.waitRefreshed(ctx, res.ix, res.seqNo); err != nil {
			return internalError(err)
		}
	}
	return nil
}

func (s *Server) indexDoc(rc *reqCtx, indexName, id, opType string) (int, any) {
	refresh, rerr := refreshParam(rc.q)
	if rerr != nil {
		return errResp(rerr)
	}
	op := &writeOp{action: "index", id: id}
	switch opType {
	case "", "index":
	case "create":
		op.action = "create"
	default:
		return errResp(illegalArgument("opType must be 'create' or 'index', found: [%s]", opType))
	}
	if err := versionParams(rc.q, op); err != nil {
		return errResp(err)
	}
	if !jsonBody(rc.body) {
		return errResp(newErr(http.StatusBadRequest, "parse_exception", "request body is required"))
	}
	doc, derr := decodeSource(rc.body)
	if derr != nil {
		return errResp(docParsingErr("failed to parse: %s", derr.Error()).withCause(
			newErr(http.StatusBadRequest, "json_parse_exception", "%s", derr.Error())))
	}
	ix, err := s.writeTarget(indexName, true, boolParam(rc, "require_alias"))
	if err != nil {
		return errResp(err)
	}
	op.source = compactJSON(rc.body)
	op.doc = doc
	return s.answerWrite(rc, ix, op, refresh)
}

// versionParams reads and validates the versioning parameters of a
// single-document write.
func versionParams(q url.Values, op *writeOp) *esError {
	if err := opFromQuery(q, op); err != nil {
		return err
	}
	return validateVersioning(op)
}

// applyOp performs one write under the checkpoint lock.
func (s *Server) applyOp(ix *index, op *writeOp) *writeResult {
	s.cpMu.RLock()
	defer s.cpMu.RUnlock()
	return s.apply(ix, op)
}

// answerWrite performs a single-document write, waits for durability and
// the refresh policy, and renders the response.
func (s *Server) answerWrite(rc *reqCtx, ix *index, op *writeOp, refresh string) (int, any) {
	res := s.applyOp(ix, op)
	if res.err != nil {
		return errResp(res.err)
	}
	if err := s.finishWrite(rc.r.Context(), res, refresh); err != nil {
		return errResp(err)
	}
	body := res.body()
	if refresh == "true" && res.result != "noop" {
		body["forced_refresh"] = true
	}
	if g := updateGet(op.fetchSource, res); g != nil {
		body["get"] = g
	}
	return res.status, body
}

// compactJSON keeps the source as sent, minus surrounding whitespace.
func compactJSON(b []byte) []byte {
	start, end := 0, len(b)
	for start < end && (b[start] == ' ' || b[start] == '\n' || b[start] == '\r' || b[start] == '\t') {
		start++
	}
	for end > start && (b[end-1] == ' ' || b[end-1] == '\n' || b[end-1] == '\r' || b[end-1] == '\t') {
		end--
	}
	out := make([]byte, end-start)
	copy(out, b[start:end])
	return out
}

func (s *Server) handleIndexDoc(rc *reqCtx, p []string) (int, any) {
	return s.indexDoc(rc, p[0], p[1], rc.q.Get("op_type"))
}

func (s *Server) handleCreateDoc(rc *reqCtx, p []string) (int, any) {
	if v := rc.q.Get("op_type"); rc.q.Has("op_type") && v != "create" {
		return errResp(illegalArgument("opType must be 'create', found: [%s]", v))
	}
	return s.indexDoc(rc, p[0], p[1], "create")
}

func (s *Server) handleIndexAutoID(rc *reqCtx, p []string) (int, any) {
	return s.indexDoc(rc, p[0], autoID(), "create")
}

// readOpts are the read parameters of get, exists, get_source and mget
// (rest-api-spec/api/get.json): realtime (default true: the latest
// acknowledged state; false: the state as of the last refresh, as a
// search sees it), refresh (refresh the index first), and version with
// version_type (any difference from the document's version is a 409, as
// VersionType.isVersionConflictForReads says for every version type).
type readOpts struct {
	realtime   bool
	refresh    bool
	hasVersion bool
	version    int64
}

func parseReadOpts(q url.Values) (readOpts, *esError) {
	o := readOpts{realtime: true}
	if q.Has("realtime") {
		o.realtime = q.Get("realtime") != "false"
	}
	if q.Has("refresh") {
		switch v := q.Get("refresh"); v {
		case "", "true":
			o.refresh = true
		case "false":
		default:
			return o, illegalArgument("Failed to parse value [%s] as only [true] or [false] are allowed.", v)
		}
	}
	if v := q.Get("version"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return o, illegalArgument("Failed to parse long parameter [version] with value [%s]", v)
		}
		o.version, o.hasVersion = n, true
	}
	switch vt := q.Get("version_type"); vt {
	case "", "internal", "external", "external_gte":
	case "force":
		return o, illegalArgument("version type [force] may no longer be used")
	default:
		return o, illegalArgument("No version type match [%s]", vt)
	}
	return o, nil
}

// refreshed returns the state of a document as of the last refresh (what
// a non-realtime get sees), read from the search index.
func (ix *index) refreshedDoc(id string) (*docVersion, *esError) {
	ix.engMu.RLock()
	defer ix.engMu.RUnlock()
	if ix.bleve == nil {
		return nil, nil
	}
	d, err := ix.bleve.Document(id)
	if err != nil {
		return nil, internalError(err)
	}
	if d == nil {
		return nil, nil
	}
	v := &docVersion{}
	d.VisitFields(func(f bindex.Field) {
		switch f.Name() {
		case fieldSource:
			v.source = bytes.Clone(f.Value())
		case fieldMeta:
			ver, seq, _ := strings.Cut(string(f.Value()), ":")
			v.version, _ = strconv.ParseInt(ver, 10, 64)
			v.seqNo, _ = strconv.ParseInt(seq, 10, 64)
		}
	})
	if v.source == nil {
		return nil, nil
	}
	return v, nil
}

// readDoc resolves name and reads one document as the read options say;
// a nil version means not found.
func (s *Server) readDoc(name, id string, o readOpts) (*index, *docVersion, *esError) {
	ix, err := s.resolveSingle(name)
	if err != nil {
		return nil, nil, err
	}
	if o.refresh {
		if rerr := s.refresh(ix); rerr != nil {
			return nil, nil, internalError(rerr)
		}
	}
	var v *docVersion
	if o.realtime {
		v = ix.get(id)
	} else if v, err = ix.refreshedDoc(id); err != nil {
		return nil, nil, err
	}
	if v != nil && o.hasVersion && v.version != o.version {
		return ix, nil, ix.conflict(id, "version conflict, current version ["+itoa(v.version)+"] is different than the one provided ["+itoa(o.version)+"]")
	}
	return ix, v, nil
}

// getDoc reads one document as GET /{index}/_doc/{id} renders it (found
// or not); the error is for an unresolvable index name or a version
// conflict.
func (s *Server) getDoc(name, id string, sf sourceFilter, o readOpts) (map[string]any, *esError) {
	ix, v, err := s.readDoc(name, id, o)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return map[string]any{"_index": ix.name, "_id": id, "found": false}, nil
	}
	body := map[string]any{
		"_index": ix.name, "_id": id, "_version": v.version, "_seq_no": v.seqNo,
		"_primary_term": 1, "found": true,
	}
	if src := sf.apply(v.source); src != nil {
		body["_source"] = json.RawMessage(src)
	}
	return body, nil
}

func (s *Server) handleGetDoc(rc *reqCtx, p []string) (int, any) {
	o, oerr := parseReadOpts(rc.q)
	if oerr != nil {
		return errResp(oerr)
	}
	body, err := s.getDoc(p[0], p[1], parseSourceParams(rc.q, sourceFilter{}), o)
	if err != nil {
		if rc.r.Method == http.MethodHead {
			return err.status, nil
		}
		return errResp(err)
	}
	if body["found"] != true {
		return http.StatusNotFound, body
	}
	return http.StatusOK, body
}

func (s *Server) handleGetSource(rc *reqCtx, p []string) (int, any) {
	o, oerr := parseReadOpts(rc.q)
	if oerr != nil {
		return errResp(oerr)
	}
	ix, v, err := s.readDoc(p[0], p[1], o)
	if err != nil {
		return errResp(err)
	}
	if v == nil {
		return errResp(newErr(http.StatusNotFound, "resource_not_found_exception", "Document not found [%s]/[%s]", ix.name, p[1]))
	}
	return http.StatusOK, json.RawMessage(parseSourceParams(rc.q, sourceFilter{}).apply(v.source))
}

func (s *Server) handleDeleteDoc(rc *reqCtx, p []string) (int, any) {
	refresh, rerr := refreshParam(rc.q)
	if rerr != nil {
		return errResp(rerr)
	}
	op := &writeOp{action: "delete", id: p[1]}
	if err := versionParams(rc.q, op); err != nil {
		return errResp(err)
	}
	ix, err := s.writeTarget(p[0], false, false)
	if err != nil {
		return errResp(err)
	}
	return s.answerWrite(rc, ix, op, refresh)
}

// parseUpdateBody reads an update request body ({"doc":..., "upsert":...}).
func parseUpdateBody(body []byte, op *writeOp) *esError {
	var obj map[string]json.RawMessage
	if err := decodeJSON(body, &obj); err != nil || obj == nil {
		if err == nil {
			return newErr(http.StatusBadRequest, "x_content_parse_exception", "update body must be an object")
		}
		return xContentParseError(err)
	}
	op.detectNoop = true
	for k, v := range obj {
		switch k {
		case "doc":
			d, err := decodeSource(v)
			if err != nil {
				return newErr(http.StatusBadRequest, "x_content_parse_exception", "[UpdateRequest] failed to parse field [doc]")
			}
			op.doc = d
		case "upsert":
			d, err := decodeSource(v)
			if err != nil {
				return newErr(http.StatusBadRequest, "x_content_parse_exception", "[UpdateRequest] failed to parse field [upsert]")
			}
			op.upsert = d
		case "doc_as_upsert", "detect_noop", "scripted_upsert":
			var b bool
			if json.Unmarshal(v, &b) != nil {
				return newErr(http.StatusBadRequest, "x_content_parse_exception", "[UpdateRequest] failed to parse field [%s]", k)
			}
			switch k {
			case "doc_as_upsert":
				op.docAsUpsert = b
			case "detect_noop":
				op.detectNoop = b
			}
		case "script":
			return illegalArgument("[eventpipe] scripted updates are not supported by this server")
		case "_source":
			sf, err := parseSourceBody(v)
			if err != nil {
				return err
			}
			op.fetchSource = &sf
		default:
			return newErr(http.StatusBadRequest, "x_content_parse_exception", "[UpdateRequest] unknown field [%s]%s", k,
				didYouMean(k, []string{"script", "scripted_upsert", "upsert", "doc", "doc_as_upsert", "detect_noop", "_source"}))
		}
	}
	if op.doc == nil && op.upsert == nil {
		return validationError("script or doc is missing")
	}
	if op.doc == nil {
		op.doc = map[string]any{}
	}
	return nil
}

func (s *Server) handleUpdateDoc(rc *reqCtx, p []string) (int, any) {
	refresh, rerr := refreshParam(rc.q)
	if rerr != nil {
		return errResp(rerr)
	}
	op := &writeOp{action: "update", id: p[1]}
	if err := versionParams(rc.q, op); err != nil {
		return errResp(err)
	}
	if err := parseUpdateBody(rc.body, op); err != nil {
		return errResp(err)
	}
	if op.hasIfSeqNo && (op.upsert != nil || op.docAsUpsert) {
		return errResp(validationError("upsert requests don't support `if_seq_no` and `if_primary_term`"))
	}
	// _source, _source_includes, _source_excludes ask for the updated
	// document in the response's "get" (rest-api-spec/api/update.json).
	if rc.q.Has("_source") || rc.q.Has("_source_includes") || rc.q.Has("_source_excludes") {
		base := sourceFilter{}
		if op.fetchSource != nil {
			base = *op.fetchSource
		}
		sf := parseSourceParams(rc.q, base)
		op.fetchSource = &sf
	}
	ix, err := s.writeTarget(p[0], true, boolParam(rc, "require_alias"))
	if err != nil {
		return errResp(err)
	}
	return s.answerWrite(rc, ix, op, refresh)
}

// updateGet renders the "get" member of an update response: the document
// as written, filtered (Elasticsearch's UpdateHelper.extractGetResult).
func updateGet(sf *sourceFilter, r *writeResult) map[string]any {
	if sf == nil || sf.disabled || r.source == nil {
		return nil
	}
	g := map[string]any{"_seq_no": r.seqNo, "_primary_term": 1, "found": true}
	if src := sf.apply(r.source); src != nil {
		g["_source"] = json.RawMessage(src)
	}
	return g
}
