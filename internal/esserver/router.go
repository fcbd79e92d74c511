package esserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

const maxBodyBytes = 100 << 20 // Elasticsearch's default http.max_content_length

// reqCtx carries one request through the handlers.
type reqCtx struct {
	w    http.ResponseWriter
	r    *http.Request
	q    url.Values
	body []byte
	who  *principal // nil when authentication is off
}

// errResp turns an error into a handler result.
func errResp(e *esError) (int, any) { return e.status, e }

var acceptedMediaTypes = map[string]bool{
	"application/json":                       true,
	"application/x-ndjson":                   true,
	"application/vnd.elasticsearch+json":     true,
	"application/vnd.elasticsearch+x-ndjson": true,
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	h := w.Header()
	h.Set("X-Elastic-Product", "Elasticsearch")
	compat := strings.Contains(r.Header.Get("Accept"), "compatible-with") ||
		strings.Contains(r.Header.Get("Content-Type"), "compatible-with")
	status, body := s.dispatch(w, r)
	if compat {
		h.Set("Content-Type", "application/vnd.elasticsearch+json;compatible-with=8")
	} else {
		h.Set("Content-Type", "application/json")
	}
	var out []byte
	if r.Method != http.MethodHead && body != nil {
		if e, ok := body.(*esError); ok {
			body = e.body()
		}
		var err error
		if r.URL.Query().Has("pretty") {
			out, err = json.MarshalIndent(body, "", "  ")
		} else {
			out, err = json.Marshal(body)
		}
		if err != nil {
			status = http.StatusInternalServerError
			out, _ = json.Marshal(internalError(err).body())
		}
		out = append(out, '\n')
	}
	if r.Method == http.MethodHead {
		h.Set("Content-Length", "0")
	}
	w.WriteHeader(status)
	if len(out) > 0 {
		_, _ = w.Write(out)
	}
	s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", status, "took", time.Since(start).String())
}

func (s *Server) dispatch(w http.ResponseWriter, r *http.Request) (int, any) {
	rc := &reqCtx{w: w, r: r, q: r.URL.Query()}
	if s.auth != nil {
		// First, before the body is read or the route looked up: Elasticsearch
		// 8 authenticates as soon as the request's headers arrive.
		who, aerr := s.auth.authenticate(r)
		if aerr != nil {
			for _, c := range aerr.challenges {
				w.Header().Add("WWW-Authenticate", c)
			}
			s.log.Debug("authentication failed", "method", r.Method, "path", r.URL.Path, "reason", aerr.err.reason)
			return http.StatusUnauthorized, aerr.err
		}
		rc.who = who
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && r.ContentLength != 0 {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !acceptedMediaTypes[mt] {
			return http.StatusNotAcceptable, &esError{plain: true, status: http.StatusNotAcceptable,
				reason: "Content-Type header [" + ct + "] is not supported"}
		}
	}
	if r.Body != nil {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return http.StatusRequestEntityTooLarge, newErr(http.StatusRequestEntityTooLarge, "content_too_long_exception", "request body is too large")
			}
			return http.StatusBadRequest, newErr(http.StatusBadRequest, "parse_exception", "failed to read request body: %s", err.Error())
		}
		rc.body = b
	}
	segs := splitPath(r.URL.EscapedPath())
	methods, params := s.match(segs)
	if methods == nil {
		return http.StatusBadRequest, &esError{plain: true, status: http.StatusBadRequest,
			reason: "no handler found for uri [" + r.URL.RequestURI() + "] and method [" + r.Method + "]"}
	}
	fn, ok := methods[r.Method]
	if !ok && r.Method == http.MethodHead {
		if get, has := methods[http.MethodGet]; has {
			fn, ok = get, true
		}
	}
	if !ok {
		allowed := make([]string, 0, len(methods))
		for m := range methods {
			allowed = append(allowed, m)
		}
		sort.Strings(allowed)
		return http.StatusMethodNotAllowed, &esError{plain: true, status: http.StatusMethodNotAllowed,
			reason: "Incorrect HTTP method for uri [" + r.URL.RequestURI() + "] and method [" + r.Method + "], allowed: [" + strings.Join(allowed, ", ") + "]"}
	}
	return fn(rc, params)
}

func splitPath(p string) []string {
	var out []string
	for _, seg := range strings.Split(p, "/") {
		if seg == "" {
			continue
		}
		if u, err := url.PathUnescape(seg); err == nil {
			seg = u
		}
		out = append(out, seg)
	}
	return out
}

type handlerFn = func(rc *reqCtx, p []string) (int, any)

// match finds the handlers for a path; p holds the variable segments.
func (s *Server) match(segs []string) (map[string]handlerFn, []string) {
	n := len(segs)
	if n == 0 {
		return map[string]handlerFn{"GET": s.handleRoot, "HEAD": s.handleRoot}, nil
	}
	first := segs[0]
	if strings.HasPrefix(first, "_") {
		switch {
		case n == 1 && first == "_bulk":
			return map[string]handlerFn{"POST": s.handleBulk, "PUT": s.handleBulk}, []string{""}
		case n == 1 && first == "_search":
			return map[string]handlerFn{"GET": s.searchH, "POST": s.searchH}, []string{""}
		case n == 1 && first == "_mget":
			return map[string]handlerFn{"GET": s.handleMget, "POST": s.handleMget}, []string{""}
		case n == 1 && first == "_count":
			return map[string]handlerFn{"GET": s.countH, "POST": s.countH}, []string{""}
		case n == 1 && first == "_refresh":
			return map[string]handlerFn{"GET": s.handleRefresh, "POST": s.handleRefresh}, []string{""}
		case n == 1 && first == "_aliases":
			return map[string]handlerFn{"POST": s.handleUpdateAliases, "GET": s.handleGetAliases}, []string{"", ""}
		case n == 1 && first == "_alias":
			return map[string]handlerFn{"GET": s.handleGetAliases}, []string{"", ""}
		case n == 2 && (first == "_alias" || first == "_aliases"):
			return map[string]handlerFn{"GET": s.handleGetAliases, "HEAD": s.handleGetAliases}, []string{"", segs[1]}
		case n == 1 && first == "_mapping":
			return map[string]handlerFn{"GET": s.handleGetMapping}, []string{""}
		case n == 1 && first == "_settings":
			return map[string]handlerFn{"GET": s.handleGetSettings}, []string{""}
		case n == 2 && first == "_security" && segs[1] == "_authenticate":
			return map[string]handlerFn{"GET": s.handleAuthenticate}, nil
		case n >= 2 && first == "_cluster" && segs[1] == "health":
			return map[string]handlerFn{"GET": s.handleHealth}, segs[2:]
		case n == 1 && (first == "_all" || first == "*"):
			return map[string]handlerFn{"GET": s.handleGetIndex}, segs
		}
		if n == 1 {
			// Elasticsearch routes /{index} here and rejects the name.
			return map[string]handlerFn{"PUT": s.handleCreateIndex, "GET": s.handleGetIndex, "HEAD": s.handleIndexExists, "DELETE": s.handleDeleteIndex}, segs
		}
		if first != "_all" && first != "*" {
			return nil, nil
		}
	}
	if n == 1 {
		return map[string]handlerFn{"PUT": s.handleCreateIndex, "GET": s.handleGetIndex, "HEAD": s.handleIndexExists, "DELETE": s.handleDeleteIndex}, segs
	}
	idx, op := segs[0], segs[1]
	switch {
	case n == 2 && op == "_doc":
		return map[string]handlerFn{"POST": s.handleIndexAutoID}, []string{idx}
	case n == 3 && op == "_doc":
		return map[string]handlerFn{"PUT": s.handleIndexDoc, "POST": s.handleIndexDoc, "GET": s.handleGetDoc, "HEAD": s.handleGetDoc, "DELETE": s.handleDeleteDoc}, []string{idx, segs[2]}
	case n == 3 && op == "_create":
		return map[string]handlerFn{"PUT": s.handleCreateDoc, "POST": s.handleCreateDoc}, []string{idx, segs[2]}
	case n == 3 && op == "_update":
		return map[string]handlerFn{"POST": s.handleUpdateDoc}, []string{idx, segs[2]}
	case n == 3 && op == "_source":
		return map[string]handlerFn{"GET": s.handleGetSource, "HEAD": s.handleGetSource}, []string{idx, segs[2]}
	case n == 2 && op == "_bulk":
		return map[string]handlerFn{"POST": s.handleBulk, "PUT": s.handleBulk}, []string{idx}
	case n == 2 && op == "_search":
		return map[string]handlerFn{"GET": s.searchH, "POST": s.searchH}, []string{idx}
	case n == 2 && op == "_mget":
		return map[string]handlerFn{"GET": s.handleMget, "POST": s.handleMget}, []string{idx}
	case n == 3 && op == "_block":
		return map[string]handlerFn{"PUT": s.handleAddBlock}, []string{idx, segs[2]}
	case n == 2 && op == "_count":
		return map[string]handlerFn{"GET": s.countH, "POST": s.countH}, []string{idx}
	case n == 2 && op == "_refresh":
		return map[string]handlerFn{"GET": s.handleRefresh, "POST": s.handleRefresh}, []string{idx}
	case n == 2 && op == "_mapping":
		return map[string]handlerFn{"GET": s.handleGetMapping, "PUT": s.handlePutMapping, "POST": s.handlePutMapping}, []string{idx}
	case n == 2 && op == "_settings":
		return map[string]handlerFn{"GET": s.handleGetSettings, "PUT": s.handlePutSettings}, []string{idx}
	case n == 2 && (op == "_alias" || op == "_aliases"):
		return map[string]handlerFn{"GET": s.handleGetAliases}, []string{idx, ""}
	case n == 3 && (op == "_alias" || op == "_aliases"):
		return map[string]handlerFn{"GET": s.handleGetAliases, "HEAD": s.handleGetAliases,
			"PUT": s.handlePutAlias, "POST": s.handlePutAlias, "DELETE": s.handleDeleteAlias}, []string{idx, segs[2]}
	}
	return nil, nil
}

func (s *Server) searchH(rc *reqCtx, p []string) (int, any) { return s.handleSearch(rc, p[0]) }
func (s *Server) countH(rc *reqCtx, p []string) (int, any)  { return s.handleCount(rc, p[0]) }

func (s *Server) handleRoot(rc *reqCtx, _ []string) (int, any) {
	return http.StatusOK, map[string]any{
		"name":         s.nodeName,
		"cluster_name": "eventpipe",
		"cluster_uuid": s.clusterUUID,
		"version": map[string]any{
			"number":                              versionNumber,
			"build_flavor":                        "default",
			"build_type":                          "eventpipe",
			"build_hash":                          "eventpipe",
			"build_date":                          "2024-08-05T10:05:34.233336849Z",
			"build_snapshot":                      false,
			"lucene_version":                      luceneVersion,
			"minimum_wire_compatibility_version":  "7.17.0",
			"minimum_index_compatibility_version": "7.0.0",
		},
		"tagline": "You Know, for Search (served by " + productName + ", a local stand-in implementing a subset of the Elasticsearch 8 REST API; not Elasticsearch)",
	}
}

func (s *Server) handleHealth(rc *reqCtx, _ []string) (int, any) {
	s.mu.RLock()
	n := len(s.indices)
	status := "green"
	for _, ix := range s.indices {
		if ix.currentSettings().Replicas > 0 {
			status = "yellow"
		}
	}
	s.mu.RUnlock()
	return http.StatusOK, map[string]any{
		"cluster_name": "eventpipe", "status": status, "timed_out": false,
		"number_of_nodes": 1, "number_of_data_nodes": 1,
		"active_primary_shards": n, "active_shards": n, "relocating_shards": 0,
		"initializing_shards": 0, "unassigned_shards": 0, "delayed_unassigned_shards": 0,
		"number_of_pending_tasks": 0, "number_of_in_flight_fetch": 0,
		"task_max_waiting_in_queue_millis": 0, "active_shards_percent_as_number": 100.0,
	}
}

// refreshParam parses ?refresh.
func refreshParam(q url.Values) (string, *esError) {
	if !q.Has("refresh") {
		return "false", nil
	}
	switch v := q.Get("refresh"); v {
	case "", "true":
		return "true", nil
	case "false", "wait_for":
		return v, nil
	default:
		return "", illegalArgument("Unknown value for refresh: [%s].", v)
	}
}

func jsonBody(b []byte) bool { return len(bytes.TrimSpace(b)) > 0 }
