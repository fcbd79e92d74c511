package esserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// bulkItem is one parsed bulk action.
type bulkItem struct {
	action string
	index  string
	op     *writeOp
	// requireAlias is the item's require_alias (nil: the request's).
	requireAlias *bool
	hasID        bool     // an "_id" was given (possibly empty)
	err          *esError // item-level error found while parsing the source
	// results
	res    *writeResult
	ixName string
}

var bulkMetaKeys = map[string]bool{
	"_index": true, "_id": true, "version": true, "version_type": true, "if_seq_no": true,
	"if_primary_term": true, "routing": true, "retry_on_conflict": true, "require_alias": true,
	"pipeline": true, "dynamic_templates": true, "_source": true, "op_type": true, "list_executed_pipelines": true,
	"require_data_stream": true,
}

func malformedLine(n int, msg string) *esError {
	return illegalArgument("Malformed action/metadata line [%d], %s", n, msg)
}

// parseBulk parses the NDJSON body. Errors in action lines fail the whole
// request, as in Elasticsearch; errors in document sources fail the item.
// As in Elasticsearch's BulkRequestParser, an index, create or update
// action line that ends the body without a source line is ignored.
func parseBulk(body []byte, defIndex string) ([]*bulkItem, *esError) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, validationError("no requests added")
	}
	if body[len(body)-1] != '\n' {
		return nil, illegalArgument("The bulk request must be terminated by a newline [\\n]")
	}
	var items []*bulkItem
	lines := bytes.Split(body[:len(body)-1], []byte("\n"))
	for i := 0; i < len(lines); i++ {
		lineNo := i + 1
		line := bytes.TrimSpace(lines[i])
		if len(line) == 0 {
			continue
		}
		if line[0] != '{' {
			return nil, malformedLine(lineNo, "expected START_OBJECT or END_OBJECT but found [VALUE_STRING]")
		}
		var act map[string]json.RawMessage
		if err := decodeJSON(line, &act); err != nil {
			return nil, newErr(http.StatusBadRequest, "x_content_parse_exception", "[%d:1] %s", lineNo, jsonErrText(err))
		}
		// BulkRequestParser: {} lacks the action name; a second key after
		// the action's object is not the end of the line.
		if len(act) == 0 {
			return nil, malformedLine(lineNo, "expected FIELD_NAME but found [END_OBJECT]")
		}
		if len(act) > 1 {
			return nil, malformedLine(lineNo, "expected END_OBJECT but found [FIELD_NAME]")
		}
		it := &bulkItem{index: defIndex}
		var metaRaw json.RawMessage
		for k, v := range act {
			it.action, metaRaw = k, v
		}
		switch it.action {
		case "index", "create", "delete", "update":
		default:
			return nil, malformedLine(lineNo, "expected field [create], [delete], [index] or [update] but found ["+it.action+"]")
		}
		var meta map[string]json.RawMessage
		if err := decodeJSON(metaRaw, &meta); err != nil || meta == nil {
			return nil, malformedLine(lineNo, "expected START_OBJECT but found [VALUE_STRING]")
		}
		op := &writeOp{action: it.action}
		for k, v := range meta {
			if !bulkMetaKeys[k] {
				return nil, illegalArgument("Action/metadata line [%d] contains an unknown parameter [%s]", lineNo, k)
			}
			var x any
			_ = decodeJSON(v, &x)
			sv, _ := scalarString(x)
			switch k {
			case "_index":
				it.index = sv
			case "_id":
				op.id, it.hasID = sv, true
			case "require_alias":
				b := sv == "true"
				it.requireAlias = &b
			case "routing":
				if x != nil {
					return nil, illegalArgument("%s", refusedParams["routing"])
				}
			case "require_data_stream":
				if sv == "true" {
					return nil, illegalArgument("%s", refusedParams["require_data_stream"])
				}
			case "dynamic_templates":
				if m, ok := x.(map[string]any); !ok || len(m) > 0 {
					return nil, illegalArgument("[eventpipe] [dynamic_templates] in bulk requests are not supported by this server")
				}
			case "_source":
				if it.action != "update" {
					return nil, illegalArgument("Action/metadata line [%d] contains an unknown parameter [_source]", lineNo)
				}
				sf, err := parseSourceBody(v)
				if err != nil {
					return nil, err
				}
				op.fetchSource = &sf
			case "version":
				n, err := strconv.ParseInt(sv, 10, 64)
				if err != nil {
					return nil, illegalArgument("Action/metadata line [%d]: failed to parse [version]", lineNo)
				}
				op.version, op.hasVersion = n, true
			case "version_type":
				op.versionType = sv
			case "if_seq_no":
				n, err := strconv.ParseInt(sv, 10, 64)
				if err != nil {
					return nil, illegalArgument("Action/metadata line [%d]: failed to parse [if_seq_no]", lineNo)
				}
				op.ifSeqNo, op.hasIfSeqNo = n, true
			case "if_primary_term":
				n, err := strconv.ParseInt(sv, 10, 64)
				if err != nil {
					return nil, illegalArgument("Action/metadata line [%d]: failed to parse [if_primary_term]", lineNo)
				}
				op.ifTerm = n
			case "op_type":
				if sv == "create" && it.action == "index" {
					it.action, op.action = "create", "create"
				}
			case "pipeline":
				if sv != "_none" {
					it.err = illegalArgument("pipeline with id [%s] does not exist", sv)
				}
			}
		}
		it.op = op
		if it.action != "delete" {
			i++
			if i >= len(lines) {
				break // a trailing action line without its source
			}
			src := bytes.TrimSpace(lines[i])
			if it.action == "update" {
				if err := parseUpdateBody(src, op); err != nil {
					return nil, err
				}
			} else if it.err == nil {
				doc, err := decodeSource(src)
				if err != nil {
					it.err = docParsingErr("failed to parse: %s", err.Error())
				} else {
					op.doc = doc
					op.source = bytes.Clone(src)
				}
			}
		}
		if it.index == "" {
			return nil, validationError("index is missing")
		}
		if op.id == "" && it.action != "index" && it.action != "create" {
			return nil, validationError("id is missing")
		}
		items = append(items, it)
	}
	if len(items) == 0 {
		return nil, validationError("no requests added")
	}
	return items, nil
}

type bulkItemJSON struct {
	Index       string         `json:"_index"`
	ID          string         `json:"_id"`
	Version     *int64         `json:"_version,omitempty"`
	Result      string         `json:"result,omitempty"`
	Shards      map[string]any `json:"_shards,omitempty"`
	SeqNo       *int64         `json:"_seq_no,omitempty"`
	PrimaryTerm *int64         `json:"_primary_term,omitempty"`
	Status      int            `json:"status"`
	Error       ordered        `json:"error,omitempty"`
	Forced      *bool          `json:"forced_refresh,omitempty"`
	Get         map[string]any `json:"get,omitempty"`
}

func (s *Server) handleBulk(rc *reqCtx, p []string) (int, any) {
	start := time.Now()
	refresh, rerr := refreshParam(rc.q)
	if rerr != nil {
		return errResp(rerr)
	}
	items, err := parseBulk(rc.body, p[0])
	if err != nil {
		return errResp(err)
	}
	if v := rc.q.Get("pipeline"); v != "" && v != "_none" {
		return errResp(illegalArgument("pipeline with id [%s] does not exist", v))
	}
	requireAlias := boolParam(rc, "require_alias")
	// _source, _source_includes, _source_excludes: the default for update
	// items' "get" (rest-api-spec/api/bulk.json).
	var fetch *sourceFilter
	if rc.q.Has("_source") || rc.q.Has("_source_includes") || rc.q.Has("_source_excludes") {
		sf := parseSourceParams(rc.q, sourceFilter{})
		fetch = &sf
	}
	// Validation problems of any item fail the whole request, all of them
	// listed (BulkRequest.validate collects each item's validate()).
	var problems []string
	for _, it := range items {
		if it.err != nil {
			continue
		}
		if err := validateVersioning(it.op); err != nil {
			if err.typ != "action_request_validation_exception" {
				return errResp(err)
			}
			problems = append(problems, validationMessages(err)...)
		}
		if it.action == "update" && it.op.hasIfSeqNo && (it.op.upsert != nil || it.op.docAsUpsert) {
			problems = append(problems, "upsert requests don't support `if_seq_no` and `if_primary_term`")
		}
	}
	if len(problems) > 0 {
		return errResp(validationError(problems...))
	}
	var maxPos int64
	touched := map[*index]int64{}
	for _, it := range items {
		if it.err != nil {
			continue
		}
		if it.action == "update" && it.op.fetchSource == nil {
			it.op.fetchSource = fetch
		}
		if it.hasID && it.op.id == "" && it.action != "delete" && it.action != "update" {
			it.err = illegalArgument("if _id is specified it must not be empty")
			continue
		}
		if it.op.id == "" {
			it.op.id = autoID()
			if it.action == "index" {
				it.action, it.op.action = "create", "create"
				it.ixName = "index" // report under the original action name
			}
		}
		ra := requireAlias
		if it.requireAlias != nil {
			ra = *it.requireAlias
		}
		ix, err := s.writeTarget(it.index, it.action != "delete", ra)
		if err != nil {
			it.err = err
			continue
		}
		res := s.applyOp(ix, it.op)
		it.res = res
		if res.err != nil {
			it.err = res.err
			continue
		}
		maxPos = max(maxPos, res.pos)
		if res.result != "noop" {
			touched[ix] = max(touched[ix], res.seqNo)
		}
	}
	if maxPos > 0 {
		if werr := s.wal.waitDurable(maxPos); werr != nil {
			return errResp(internalError(werr))
		}
	}
	for ix, seq := range touched {
		switch refresh {
		case "true":
			if err := s.refresh(ix); err != nil {
				return errResp(internalError(err))
			}
		case "wait_for":
			if err := s.waitRefreshed(rc.r.Context(), ix, seq); err != nil {
				return errResp(internalError(err))
			}
		}
	}
	out := make([]map[string]bulkItemJSON, len(items))
	errorsSeen := false
	one := int64(1)
	for i, it := range items {
		name := it.action
		if it.ixName != "" {
			name = it.ixName
		}
		j := bulkItemJSON{Index: it.index, ID: it.op.id}
		if it.err != nil {
			errorsSeen = true
			j.Status = it.err.status
			j.Error = it.err.itemError()
			if it.res != nil {
				j.Index = it.res.ix.name
			}
		} else {
			r := it.res
			v, sq := r.version, r.seqNo
			j.Index, j.Version, j.Result, j.SeqNo, j.PrimaryTerm, j.Status = r.ix.name, &v, r.result, &sq, &one, r.status
			j.Shards = r.ix.shardsHeader(r.result != "noop")
			if refresh == "true" && r.result != "noop" {
				t := true
				j.Forced = &t
			}
			if it.action == "update" {
				j.Get = updateGet(it.op.fetchSource, r)
			}
		}
		out[i] = map[string]bulkItemJSON{name: j}
	}
	return http.StatusOK, map[string]any{"errors": errorsSeen, "took": time.Since(start).Milliseconds(), "items": out}
}

// validationMessages returns the numbered messages of a validation error
// ("Validation Failed: 1: a;2: b;").
func validationMessages(e *esError) []string {
	body := strings.TrimPrefix(e.reason, "Validation Failed: ")
	var out []string
	for _, part := range strings.Split(body, ";") {
		if _, msg, ok := strings.Cut(part, ": "); ok {
			out = append(out, msg)
		}
	}
	return out
}
