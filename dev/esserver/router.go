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
	"strconv"
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
		out, err = json.Marshal(body)
		if fp := r.URL.Query().Get("filter_path"); err == nil && fp != "" {
			out, err = applyFilterPath(out, fp)
		}
		if err == nil && r.URL.Query().Has("pretty") {
			var buf bytes.Buffer
			if json.Indent(&buf, out, "", "  ") == nil {
				out = buf.Bytes()
			}
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
	// date math in the index expression and in alias names
	for i, seg := range segs {
		if !strings.Contains(seg, "<") {
			continue
		}
		if i == 0 || (i == 1 || i == 2) && (segs[i-1] == "_alias" || segs[i-1] == "_aliases") {
			res, derr := resolveDateMathNames(seg)
			if derr != nil {
				return derr.status, derr
			}
			segs[i] = res
		}
	}
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
			return map[string]handlerFn{"POST": pBulk.with(s.handleBulk), "PUT": pBulk.with(s.handleBulk)}, []string{""}
		case n == 1 && first == "_search":
			return map[string]handlerFn{"GET": s.searchH, "POST": s.searchH}, []string{""}
		case n == 1 && first == "_mget":
			return map[string]handlerFn{"GET": pMget.with(s.handleMget), "POST": pMget.with(s.handleMget)}, []string{""}
		case n == 1 && first == "_count":
			return map[string]handlerFn{"GET": s.countH, "POST": s.countH}, []string{""}
		case n == 1 && first == "_refresh":
			return map[string]handlerFn{"GET": pRefresh.with(s.handleRefresh), "POST": pRefresh.with(s.handleRefresh)}, []string{""}
		case n == 1 && first == "_aliases":
			return map[string]handlerFn{"POST": pAliases.with(s.handleUpdateAliases), "GET": pGetAlias.with(s.handleGetAliases)}, []string{"", ""}
		case n == 1 && first == "_alias":
			return map[string]handlerFn{"GET": pGetAlias.with(s.handleGetAliases)}, []string{"", ""}
		case n == 2 && (first == "_alias" || first == "_aliases"):
			return map[string]handlerFn{"GET": pGetAlias.with(s.handleGetAliases), "HEAD": pGetAlias.with(s.handleGetAliases)}, []string{"", segs[1]}
		case n == 1 && first == "_mapping":
			return map[string]handlerFn{"GET": pGetMap.with(s.handleGetMapping)}, []string{""}
		case n == 1 && first == "_settings":
			return map[string]handlerFn{"GET": pGetSet.with(s.handleGetSettings), "PUT": pPutSet.with(s.handlePutSettings)}, []string{"", ""}
		case n == 2 && first == "_settings":
			return map[string]handlerFn{"GET": pGetSet.with(s.handleGetSettings)}, []string{"", segs[1]}
		case n == 2 && first == "_security" && segs[1] == "_authenticate":
			return map[string]handlerFn{"GET": s.handleAuthenticate}, nil
		case n == 2 && first == "_cluster" && segs[1] == "settings":
			return map[string]handlerFn{"GET": pGetClusterSet.with(s.handleGetClusterSettings), "PUT": pPutClusterSet.with(s.handlePutClusterSettings)}, nil
		case n >= 2 && first == "_cluster" && segs[1] == "health":
			return map[string]handlerFn{"GET": pHealth.with(s.handleHealth)}, segs[2:]
		case n == 1 && (first == "_all" || first == "*"):
			// GET, HEAD and DELETE /_all address every index; PUT refuses
			// the name as Elasticsearch does
			return s.indexRoutes(), segs
		}
		if n == 1 {
			// Elasticsearch routes /{index} here and rejects the name.
			return s.indexRoutes(), segs
		}
		if first != "_all" && first != "*" {
			return nil, nil
		}
	}
	if n == 1 {
		return s.indexRoutes(), segs
	}
	idx, op := segs[0], segs[1]
	switch {
	case n == 2 && op == "_doc":
		return map[string]handlerFn{"POST": pIndexDoc.with(s.handleIndexAutoID)}, []string{idx}
	case n == 3 && op == "_doc":
		return map[string]handlerFn{"PUT": pIndexDoc.with(s.handleIndexDoc), "POST": pIndexDoc.with(s.handleIndexDoc),
			"GET": pGetDoc.with(s.handleGetDoc), "HEAD": pGetDoc.with(s.handleGetDoc), "DELETE": pDeleteDoc.with(s.handleDeleteDoc)}, []string{idx, segs[2]}
	case n == 3 && op == "_create":
		return map[string]handlerFn{"PUT": pCreateDoc.with(s.handleCreateDoc), "POST": pCreateDoc.with(s.handleCreateDoc)}, []string{idx, segs[2]}
	case n == 3 && op == "_update":
		return map[string]handlerFn{"POST": pUpdate.with(s.handleUpdateDoc)}, []string{idx, segs[2]}
	case n == 3 && op == "_source":
		return map[string]handlerFn{"GET": pGetSource.with(s.handleGetSource), "HEAD": pGetSource.with(s.handleGetSource)}, []string{idx, segs[2]}
	case n == 2 && op == "_bulk":
		return map[string]handlerFn{"POST": pBulk.with(s.handleBulk), "PUT": pBulk.with(s.handleBulk)}, []string{idx}
	case n == 2 && op == "_search":
		return map[string]handlerFn{"GET": s.searchH, "POST": s.searchH}, []string{idx}
	case n == 2 && op == "_mget":
		return map[string]handlerFn{"GET": pMget.with(s.handleMget), "POST": pMget.with(s.handleMget)}, []string{idx}
	case n == 3 && op == "_block":
		return map[string]handlerFn{"PUT": pBlock.with(s.handleAddBlock)}, []string{idx, segs[2]}
	case n == 2 && op == "_count":
		return map[string]handlerFn{"GET": s.countH, "POST": s.countH}, []string{idx}
	case n == 2 && op == "_refresh":
		return map[string]handlerFn{"GET": pRefresh.with(s.handleRefresh), "POST": pRefresh.with(s.handleRefresh)}, []string{idx}
	case n == 2 && op == "_mapping":
		return map[string]handlerFn{"GET": pGetMap.with(s.handleGetMapping), "PUT": pPutMap.with(s.handlePutMapping), "POST": pPutMap.with(s.handlePutMapping)}, []string{idx}
	case n == 2 && op == "_settings":
		return map[string]handlerFn{"GET": pGetSet.with(s.handleGetSettings), "PUT": pPutSet.with(s.handlePutSettings)}, []string{idx, ""}
	case n == 3 && op == "_settings":
		return map[string]handlerFn{"GET": pGetSet.with(s.handleGetSettings)}, []string{idx, segs[2]}
	case n == 2 && (op == "_alias" || op == "_aliases"):
		return map[string]handlerFn{"GET": pGetAlias.with(s.handleGetAliases)}, []string{idx, ""}
	case n == 3 && (op == "_alias" || op == "_aliases"):
		return map[string]handlerFn{"GET": pGetAlias.with(s.handleGetAliases), "HEAD": pGetAlias.with(s.handleGetAliases),
			"PUT": pAliases.with(s.handlePutAlias), "POST": pAliases.with(s.handlePutAlias), "DELETE": pAliases.with(s.handleDeleteAlias)}, []string{idx, segs[2]}
	}
	return nil, nil
}

// indexRoutes are the handlers of /{index}.
func (s *Server) indexRoutes() map[string]handlerFn {
	return map[string]handlerFn{"PUT": pCreateIx.with(s.handleCreateIndex), "GET": pGetIx.with(s.handleGetIndex),
		"HEAD": pExistsIx.with(s.handleIndexExists), "DELETE": pDeleteIx.with(s.handleDeleteIndex)}
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

// health is the single-node cluster health of a set of indices: the
// primary of each is active, replicas are never assigned.
type health struct {
	status                string
	primaries, unassigned int
	perIndex              map[string]any
	missingIndex          bool
}

var healthRank = map[string]int{"green": 0, "yellow": 1, "red": 2}

func (s *Server) computeHealth(rc *reqCtx, expr string, level string) health {
	var list []*index
	h := health{status: "green", perIndex: map[string]any{}}
	if expr == "" {
		s.mu.RLock()
		for _, ix := range s.indices {
			list = append(list, ix)
		}
		s.mu.RUnlock()
	} else {
		var err *esError
		if list, err = s.resolveSearch(expr, rc.q); err != nil {
			h.missingIndex = true
			h.status = "red"
		}
	}
	for _, ix := range list {
		rep := ix.currentSettings().Replicas
		st := "green"
		if rep > 0 {
			st = "yellow"
		}
		if healthRank[st] > healthRank[h.status] {
			h.status = st
		}
		h.primaries++
		h.unassigned += rep
		if level == "indices" || level == "shards" {
			e := map[string]any{
				"status": st, "number_of_shards": 1, "number_of_replicas": rep,
				"active_primary_shards": 1, "active_shards": 1, "relocating_shards": 0,
				"initializing_shards": 0, "unassigned_shards": rep, "unassigned_primary_shards": 0,
			}
			if level == "shards" {
				e["shards"] = map[string]any{"0": map[string]any{
					"status": st, "primary_active": true, "active_shards": 1, "relocating_shards": 0,
					"initializing_shards": 0, "unassigned_shards": rep, "unassigned_primary_shards": 0,
				}}
			}
			h.perIndex[ix.name] = e
		}
	}
	return h
}

// handleHealth serves GET /_cluster/health[/{index}]
// (rest-api-spec/api/cluster.health.json). wait_for_status,
// wait_for_active_shards and wait_for_nodes wait, up to timeout (30s by
// default), for a state this single node may never reach (replicas are
// never assigned); then the answer has "timed_out": true, as in
// Elasticsearch. level is cluster, indices or shards.
func (s *Server) handleHealth(rc *reqCtx, p []string) (int, any) {
	if len(p) > 1 {
		return http.StatusBadRequest, &esError{plain: true, status: http.StatusBadRequest,
			reason: "no handler found for uri [" + rc.r.URL.RequestURI() + "] and method [" + rc.r.Method + "]"}
	}
	expr := ""
	if len(p) == 1 {
		expr = p[0]
	}
	level := rc.q.Get("level")
	switch level {
	case "", "cluster", "indices", "shards":
	default:
		return errResp(illegalArgument("[level] must be one of [cluster, indices, shards]"))
	}
	want := rc.q.Get("wait_for_status")
	if want != "" {
		if _, ok := healthRank[want]; !ok {
			return errResp(illegalArgument("unknown cluster health status [%s]", want))
		}
	}
	timeout := 30 * time.Second
	if v := rc.q.Get("timeout"); v != "" {
		d, err := parseTimeValue(v)
		if err != nil {
			return errResp(illegalArgument("failed to parse setting [timeout] with value [%s] as a time value: unit is missing or unrecognized", v))
		}
		timeout = d
	}
	wantShards := rc.q.Get("wait_for_active_shards")
	nodesOK, nerr := waitForNodesSatisfied(rc.q.Get("wait_for_nodes"))
	if nerr != nil {
		return errResp(nerr)
	}
	deadline := time.Now().Add(timeout)
	var h health
	timedOut := false
	for {
		h = s.computeHealth(rc, expr, level)
		ok := nodesOK && !h.missingIndex
		if want != "" && healthRank[h.status] > healthRank[want] {
			ok = false
		}
		switch wantShards {
		case "", "0", "1":
		case "all":
			ok = ok && h.unassigned == 0
		default:
			n, err := strconv.Atoi(wantShards)
			if err != nil || n < 0 {
				return errResp(illegalArgument("failed to parse active shard count [%s]", wantShards))
			}
			ok = ok && n <= h.primaries
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			timedOut = true
			break
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-rc.r.Context().Done():
			return errResp(internalError(rc.r.Context().Err()))
		}
	}
	total := h.primaries + h.unassigned
	pct := 100.0
	if total > 0 {
		pct = float64(h.primaries) * 100 / float64(total)
	}
	body := map[string]any{
		"cluster_name": "eventpipe", "status": h.status, "timed_out": timedOut,
		"number_of_nodes": 1, "number_of_data_nodes": 1,
		"active_primary_shards": h.primaries, "active_shards": h.primaries, "relocating_shards": 0,
		"initializing_shards": 0, "unassigned_shards": h.unassigned, "unassigned_primary_shards": 0,
		"delayed_unassigned_shards": 0, "number_of_pending_tasks": 0, "number_of_in_flight_fetch": 0,
		"task_max_waiting_in_queue_millis": 0, "active_shards_percent_as_number": pct,
	}
	if boolParam(rc, "human") {
		// ClusterHealthResponse's humanReadableField and percentageField
		body["task_max_waiting_in_queue"] = "0s"
		body["active_shards_percent"] = strconv.FormatFloat(pct, 'f', 1, 64) + "%"
	}
	if level == "indices" || level == "shards" {
		body["indices"] = h.perIndex
	}
	// Elasticsearch 8 answers a timed-out health request with 200 (and
	// "timed_out": true); return_200_for_cluster_health_timeout=false
	// asked for 7.x's 408.
	if timedOut && rc.q.Get("return_200_for_cluster_health_timeout") == "false" {
		return http.StatusRequestTimeout, body
	}
	return http.StatusOK, body
}

// waitForNodesSatisfied says whether one node satisfies wait_for_nodes
// ("N", ">=N", "<=N", ">N", "<N", "ge(N)", "le(N)", "gt(N)", "lt(N)").
func waitForNodesSatisfied(v string) (bool, *esError) {
	if v == "" {
		return true, nil
	}
	op, num := "==", v
	for _, p := range []struct{ pre, op string }{{">=", ">="}, {"<=", "<="}, {">", ">"}, {"<", "<"}, {"ge(", ">="}, {"le(", "<="}, {"gt(", ">"}, {"lt(", "<"}} {
		if strings.HasPrefix(v, p.pre) {
			op, num = p.op, strings.TrimSuffix(strings.TrimPrefix(v, p.pre), ")")
			break
		}
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return false, illegalArgument("failed to parse [wait_for_nodes] value [%s]", v)
	}
	switch op {
	case ">=":
		return 1 >= n, nil
	case "<=":
		return 1 <= n, nil
	case ">":
		return 1 > n, nil
	case "<":
		return 1 < n, nil
	}
	return n == 1, nil
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
