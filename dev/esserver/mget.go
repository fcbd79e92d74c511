package esserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

// mgetItem is one document requested by _mget.
type mgetItem struct {
	index  string
	id     string
	hasID  bool
	source sourceFilter
	// version and version_type of the item: a document whose version
	// differs is answered with a version conflict error.
	hasVersion bool
	version    int64
}

// xcontentToken names the JSON token raw starts with the way Elasticsearch's
// parser errors do.
func xcontentToken(raw []byte) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "null"
	}
	switch t[0] {
	case '{':
		return "START_OBJECT"
	case '[':
		return "START_ARRAY"
	case '"':
		return "VALUE_STRING"
	case 't', 'f':
		return "VALUE_BOOLEAN"
	case 'n':
		return "VALUE_NULL"
	}
	return "VALUE_NUMBER"
}

// mgetValue reads a scalar (the text of a string, number or boolean); ok is
// false for objects and arrays, present is false for null.
func mgetValue(raw json.RawMessage) (s string, present, ok bool) {
	var v any
	if err := decodeJSON(raw, &v); err != nil {
		return "", false, false
	}
	if v == nil {
		return "", false, true
	}
	s, ok = scalarString(v)
	return s, ok, ok
}

// parseMget reads an _mget body: {"docs":[{"_index":..,"_id":..},...]}
// and/or {"ids":[...]} (which needs the index from the path).
func parseMget(body []byte, defIndex string, defSource sourceFilter) ([]mgetItem, *esError) {
	t := bytes.TrimSpace(body)
	if tok := xcontentToken(t); tok != "START_OBJECT" {
		return nil, parsingError("unexpected token [%s], expected [START_OBJECT]", tok)
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return nil, xContentParseError(err)
	}
	var items []mgetItem
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, xContentParseError(err)
		}
		key, _ := kt.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, xContentParseError(err)
		}
		if tok := xcontentToken(raw); tok != "START_ARRAY" {
			return nil, parsingError("unexpected token [%s], expected [FIELD_NAME] or [START_ARRAY]", tok)
		}
		var elems []json.RawMessage
		if err := decodeJSON(raw, &elems); err != nil {
			return nil, xContentParseError(err)
		}
		switch key {
		case "docs":
			for _, e := range elems {
				it, err := parseMgetDoc(e, defIndex, defSource)
				if err != nil {
					return nil, err
				}
				items = append(items, it)
			}
		case "ids":
			for _, e := range elems {
				id, present, ok := mgetValue(e)
				if !ok {
					return nil, illegalArgument("ids array element should only contain ids")
				}
				items = append(items, mgetItem{index: defIndex, id: id, hasID: present, source: defSource})
			}
		default:
			return nil, parsingError("unknown key [%s] for a START_ARRAY, expected [docs] or [ids]", key)
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, xContentParseError(err)
	}
	if len(items) == 0 {
		return nil, validationError("no documents to get")
	}
	var msgs []string
	for i, it := range items {
		if it.index == "" {
			msgs = append(msgs, "index is missing for doc "+itoa(int64(i)))
		}
		if !it.hasID {
			msgs = append(msgs, "id is missing for doc "+itoa(int64(i)))
		}
	}
	if len(msgs) > 0 {
		return nil, validationError(msgs...)
	}
	return items, nil
}

// parseMgetDoc reads one element of "docs".
func parseMgetDoc(raw json.RawMessage, defIndex string, defSource sourceFilter) (mgetItem, *esError) {
	it := mgetItem{index: defIndex, source: defSource}
	if xcontentToken(raw) != "START_OBJECT" {
		return it, illegalArgument("docs array element should include an object")
	}
	var obj map[string]json.RawMessage
	if err := decodeJSON(raw, &obj); err != nil {
		return it, xContentParseError(err)
	}
	for k, v := range obj {
		switch k {
		case "routing", "_routing":
			if xcontentToken(v) != "VALUE_NULL" {
				return it, illegalArgument("%s", refusedParams["routing"])
			}
		case "_index", "_id":
			s, present, ok := mgetValue(v)
			if !ok {
				return it, newErr(http.StatusBadRequest, "parse_exception", "failed to parse multi get request. [%s] must be a value", k)
			}
			switch k {
			case "_index":
				it.index = s
			case "_id":
				it.id, it.hasID = s, present
			}
		case "_source":
			if tok := xcontentToken(v); tok == "VALUE_NUMBER" || tok == "VALUE_NULL" {
				return it, newErr(http.StatusBadRequest, "parse_exception", "illegal type for _source: [%s]", tok)
			}
			sf, err := parseSourceBody(v)
			if err != nil {
				return it, err
			}
			it.source = sf
		case "fields":
			return it, parsingError("Unsupported field [fields] used, expected [stored_fields] instead")
		case "version":
			s, present, ok := mgetValue(v)
			n, err := strconv.ParseInt(s, 10, 64)
			if !ok || (present && err != nil) {
				return it, newErr(http.StatusBadRequest, "parse_exception", "failed to parse multi get request. [version] must be a number")
			}
			it.version, it.hasVersion = n, present
		case "version_type":
			s, _, _ := mgetValue(v)
			switch s {
			case "", "internal", "external", "external_gte":
			case "force":
				return it, illegalArgument("version type [force] may no longer be used")
			default:
				return it, illegalArgument("No version type match [%s]", s)
			}
		case "stored_fields":
			return it, illegalArgument("%s", refusedParams["stored_fields"])
		default:
			return it, newErr(http.StatusBadRequest, "parse_exception", "failed to parse multi get request. unknown field [%s]", k)
		}
	}
	return it, nil
}

// handleMget serves GET|POST /_mget and /{index}/_mget. Like GET by id it
// is real time: it sees every acknowledged write, refreshed or not. Each
// document is answered as GET /{index}/_doc/{id} would answer it; one that
// cannot be read (a missing index, an alias over several indices) carries
// an error object instead, and the request as a whole succeeds.
func (s *Server) handleMget(rc *reqCtx, p []string) (int, any) {
	o, oerr := parseReadOpts(rc.q)
	if oerr != nil {
		return errResp(oerr)
	}
	refresh := o.refresh
	o.refresh = false
	if !jsonBody(rc.body) {
		return errResp(newErr(http.StatusBadRequest, "parse_exception", "request body or source parameter is required"))
	}
	items, err := parseMget(rc.body, p[0], parseSourceParams(rc.q, sourceFilter{}))
	if err != nil {
		return errResp(err)
	}
	if refresh {
		done := map[*index]bool{}
		for _, it := range items {
			ix, rerr := s.resolveSingle(it.index)
			if rerr != nil || done[ix] {
				continue
			}
			done[ix] = true
			if err := s.refresh(ix); err != nil {
				return errResp(internalError(err))
			}
		}
	}
	docs := make([]any, len(items))
	for i, it := range items {
		io := o
		io.hasVersion, io.version = it.hasVersion, it.version
		body, gerr := s.getDoc(it.index, it.id, it.source, io)
		if gerr != nil {
			body = map[string]any{"_index": it.index, "_id": it.id, "error": gerr.errorObject()}
		}
		docs[i] = body
	}
	return http.StatusOK, map[string]any{"docs": docs}
}
