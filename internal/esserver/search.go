package esserver

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/blevesearch/bleve/v2/numeric"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/collector"
	"github.com/blevesearch/bleve/v2/search/query"
	bindex "github.com/blevesearch/bleve_index_api"
)

type sortSpec struct {
	field        string
	desc         bool
	missingFirst bool
	unmappedType string
	mode         string
}

type sourceFilter struct {
	disabled           bool
	includes, excludes []string
}

// searchRequest is a parsed _search (or _count) request.
type searchRequest struct {
	queryRaw       json.RawMessage
	from, size     int
	sorts          []sortSpec
	source         sourceFilter
	aggs           []*aggSpec
	trackTotal     int // -1: exact, 0: not tracked, N: count up to N
	trackScores    bool
	version        bool
	seqNo          bool
	restTotalAsInt bool
	typedKeys      bool
}

var unsupportedSearchKeys = map[string]bool{
	"highlight": true, "suggest": true, "collapse": true, "rescore": true, "post_filter": true,
	"search_after": true, "pit": true, "knn": true, "runtime_mappings": true, "script_fields": true,
	"docvalue_fields": true, "fields": true, "terminate_after": true, "indices_boost": true,
	"min_score": true, "slice": true, "rank": true, "retriever": true, "sub_searches": true,
	"point_in_time": true, "stored_fields": true,
}

func parseSearchRequest(body []byte, q url.Values, countOnly bool) (*searchRequest, *esError) {
	req := &searchRequest{size: 10, trackTotal: 10000}
	if len(bytes.TrimSpace(body)) > 0 {
		var obj map[string]json.RawMessage
		if err := decodeJSON(body, &obj); err != nil {
			return nil, xContentParseError(err)
		}
		if obj == nil {
			return nil, parsingError("Expected [START_OBJECT] but found [null]")
		}
		for k, v := range obj {
			if countOnly && k != "query" {
				return nil, parsingError("request does not support [%s]", k)
			}
			var err *esError
			switch k {
			case "query":
				req.queryRaw = v
			case "from", "size":
				n, perr := intParam(v)
				if perr != nil {
					return nil, parsingError("[%s] failed to parse field [%s]", k, k)
				}
				if k == "from" {
					req.from = n
				} else {
					req.size = n
				}
			case "sort":
				req.sorts, err = parseSort(v)
			case "_source":
				req.source, err = parseSourceBody(v)
			case "aggs", "aggregations":
				req.aggs, err = parseAggs(v)
			case "track_total_hits":
				req.trackTotal, err = parseTrackTotal(v)
			case "track_scores", "version", "seq_no_primary_term", "explain", "profile":
				var b bool
				if json.Unmarshal(v, &b) != nil {
					return nil, parsingError("[%s] failed to parse field [%s]", k, k)
				}
				switch k {
				case "track_scores":
					req.trackScores = b
				case "version":
					req.version = b
				case "seq_no_primary_term":
					req.seqNo = b
				}
			case "timeout", "stats", "_name":
			default:
				if unsupportedSearchKeys[k] {
					return nil, illegalArgument("[eventpipe] search option [%s] is not supported by this server", k)
				}
				return nil, parsingError("Unknown key for a %s in [%s].", tokenKind(v), k)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	// URL parameters override the body.
	for _, k := range []string{"from", "size"} {
		if v := q.Get(k); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, illegalArgument("Failed to parse int parameter [%s] with value [%s]", k, v)
			}
			if k == "from" {
				req.from = n
			} else {
				req.size = n
			}
		}
	}
	if v := q.Get("sort"); v != "" {
		req.sorts = nil
		for _, part := range strings.Split(v, ",") {
			f, dir, _ := strings.Cut(part, ":")
			ss := sortSpec{field: f, desc: f == "_score"}
			if dir != "" {
				ss.desc = strings.EqualFold(dir, "desc")
			}
			req.sorts = append(req.sorts, ss)
		}
	}
	if v := q.Get("track_total_hits"); v != "" {
		n, err := parseTrackTotal(json.RawMessage(v))
		if err != nil {
			return nil, err
		}
		req.trackTotal = n
	}
	if q.Get("rest_total_hits_as_int") == "true" {
		req.restTotalAsInt = true
		req.trackTotal = -1
	}
	req.typedKeys = q.Get("typed_keys") == "true"
	for _, k := range []string{"version", "seq_no_primary_term", "track_scores"} {
		if q.Get(k) == "true" {
			switch k {
			case "version":
				req.version = true
			case "seq_no_primary_term":
				req.seqNo = true
			default:
				req.trackScores = true
			}
		}
	}
	if q.Has("_source") || q.Has("_source_includes") || q.Has("_source_excludes") {
		req.source = parseSourceParams(q, req.source)
	}
	if v := q.Get("q"); v != "" {
		if req.queryRaw != nil {
			return nil, illegalArgument("request [_search] contains both a [q] parameter and a query in the body")
		}
		req.queryRaw = uriQuery(v, q.Get("default_operator"), q.Get("df"))
	}
	if q.Has("scroll") {
		return nil, illegalArgument("[eventpipe] scroll is not supported by this server")
	}
	if req.size < 0 {
		return nil, illegalArgument("[size] parameter cannot be negative, found [%d]", req.size)
	}
	if req.from < 0 {
		return nil, illegalArgument("[from] parameter cannot be negative, found [%d]", req.from)
	}
	return req, nil
}

func tokenKind(v json.RawMessage) string {
	t := bytes.TrimSpace(v)
	if len(t) > 0 && t[0] == '{' {
		return "START_OBJECT"
	}
	if len(t) > 0 && t[0] == '[' {
		return "START_ARRAY"
	}
	return "VALUE"
}

func intParam(v json.RawMessage) (int, error) {
	var x any
	if err := decodeJSON(v, &x); err != nil {
		return 0, err
	}
	s, _ := scalarString(x)
	return strconv.Atoi(s)
}

func parseTrackTotal(v json.RawMessage) (int, *esError) {
	s := strings.Trim(strings.TrimSpace(string(v)), `"`)
	switch s {
	case "true":
		return -1, nil
	case "false":
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, illegalArgument("Failed to parse [track_total_hits] with value [%s]", s)
	}
	if n < 0 {
		return 0, illegalArgument("[track_total_hits] parameter must be positive or equals to -1, got %d", n)
	}
	if n == 0 {
		return 0, nil
	}
	return n, nil
}

// uriQuery turns a simple q= URI search into query DSL: "field:value",
// plain text over all fields, or "*".
func uriQuery(q, op, df string) json.RawMessage {
	if q == "*" || q == "*:*" {
		return json.RawMessage(`{"match_all":{}}`)
	}
	if op == "" {
		op = "or"
	}
	if f, v, ok := strings.Cut(q, ":"); ok && f != "" && !strings.ContainsAny(f, " ") {
		b, _ := json.Marshal(map[string]any{"match": map[string]any{f: map[string]any{"query": v, "operator": op}}})
		return b
	}
	fields := []string{"*"}
	if df != "" {
		fields = []string{df}
	}
	b, _ := json.Marshal(map[string]any{"multi_match": map[string]any{"query": q, "fields": fields, "operator": op}})
	return b
}

func parseSort(raw json.RawMessage) ([]sortSpec, *esError) {
	t := bytes.TrimSpace(raw)
	var items []json.RawMessage
	if len(t) > 0 && t[0] == '[' {
		if err := json.Unmarshal(t, &items); err != nil {
			return nil, parsingError("[sort] malformed")
		}
	} else {
		items = []json.RawMessage{t}
	}
	var out []sortSpec
	for _, it := range items {
		var s string
		if json.Unmarshal(it, &s) == nil {
			out = append(out, sortSpec{field: s, desc: s == "_score"})
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(it, &obj); err != nil || len(obj) == 0 {
			return nil, parsingError("[sort] malformed sort element")
		}
		for f, v := range obj {
			ss := sortSpec{field: f, desc: f == "_score"}
			var dir string
			if json.Unmarshal(v, &dir) == nil {
				switch strings.ToLower(dir) {
				case "asc":
					ss.desc = false
				case "desc":
					ss.desc = true
				default:
					return nil, illegalArgument("Unknown SortOrder [%s]", dir)
				}
				out = append(out, ss)
				continue
			}
			var opts map[string]any
			if err := decodeJSON(v, &opts); err != nil {
				return nil, parsingError("[sort] malformed sort options for [%s]", f)
			}
			for ok, ov := range opts {
				sv, _ := scalarString(ov)
				switch ok {
				case "order":
					switch strings.ToLower(sv) {
					case "asc":
						ss.desc = false
					case "desc":
						ss.desc = true
					default:
						return nil, illegalArgument("Unknown SortOrder [%s]", sv)
					}
				case "missing":
					switch sv {
					case "_first":
						ss.missingFirst = true
					case "_last":
					default:
						return nil, illegalArgument("[eventpipe] sort missing value [%s] is not supported; use _first or _last", sv)
					}
				case "unmapped_type":
					ss.unmappedType = sv
				case "mode":
					ss.mode = sv
				case "format", "numeric_type":
				default:
					return nil, parsingError("[field_sort] unknown field [%s]", ok)
				}
			}
			out = append(out, ss)
		}
	}
	return out, nil
}

func parseSourceBody(raw json.RawMessage) (sourceFilter, *esError) {
	var x any
	if err := decodeJSON(raw, &x); err != nil {
		return sourceFilter{}, parsingError("[_source] malformed")
	}
	var sf sourceFilter
	strs := func(v any) []string {
		switch y := v.(type) {
		case string:
			return []string{y}
		case []any:
			var out []string
			for _, e := range y {
				if s, ok := e.(string); ok {
					out = append(out, s)
				}
			}
			return out
		}
		return nil
	}
	switch y := x.(type) {
	case bool:
		sf.disabled = !y
	case string, []any:
		sf.includes = strs(y)
	case map[string]any:
		for k, v := range y {
			switch k {
			case "includes", "include":
				sf.includes = strs(v)
			case "excludes", "exclude":
				sf.excludes = strs(v)
			case "enabled":
				if b, ok := v.(bool); ok {
					sf.disabled = !b
				}
			default:
				return sf, parsingError("Unknown key for a START_OBJECT in [%s].", k)
			}
		}
	}
	return sf, nil
}

func parseSourceParams(q url.Values, sf sourceFilter) sourceFilter {
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	if v := q.Get("_source"); v != "" {
		switch v {
		case "false":
			sf.disabled = true
		case "true":
			sf.disabled = false
		default:
			sf.includes = split(v)
		}
	}
	if v := q.Get("_source_includes"); v != "" {
		sf.includes = split(v)
	}
	if v := q.Get("_source_excludes"); v != "" {
		sf.excludes = split(v)
	}
	return sf
}

// apply filters a source; nil means "omit _source".
func (sf sourceFilter) apply(src []byte) json.RawMessage {
	if sf.disabled {
		return nil
	}
	if len(sf.includes) == 0 && len(sf.excludes) == 0 {
		return src
	}
	var doc map[string]any
	if err := decodeJSON(src, &doc); err != nil {
		return src
	}
	out, _ := json.Marshal(filterMap(doc, "", sf.includes, sf.excludes))
	return out
}

func matchAny(patterns []string, p string) bool {
	for _, pat := range patterns {
		if pat == p {
			return true
		}
		if ok, _ := path.Match(pat, p); ok {
			return true
		}
		if strings.HasSuffix(pat, "*") && strings.HasPrefix(p, strings.TrimSuffix(pat, "*")) {
			return true
		}
	}
	return false
}

func mayMatchBelow(patterns []string, p string) bool {
	for _, pat := range patterns {
		if strings.HasPrefix(pat, p+".") || strings.HasPrefix(pat, "*") {
			return true
		}
	}
	return false
}

func filterMap(m map[string]any, prefix string, inc, exc []string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		p := prefix + k
		if matchAny(exc, p) {
			continue
		}
		sub, isMap := v.(map[string]any)
		if len(inc) == 0 || matchAny(inc, p) {
			if isMap && len(exc) > 0 {
				v = filterMap(sub, p+".", nil, exc)
			}
			out[k] = v
			continue
		}
		if isMap && mayMatchBelow(inc, p) {
			if f := filterMap(sub, p+".", inc, exc); len(f) > 0 {
				out[k] = f
			}
		}
	}
	return out
}

// sortKey is a decoded sort value used to merge hits across indices.
type sortKey struct {
	missing bool
	num     bool
	f       float64
	s       string
}

type hitRec struct {
	ix     *index
	id     string
	score  float64
	keys   []sortKey
	source []byte
	meta   string
}

// searchResult is the collected outcome of a search over indices.
type searchResult struct {
	hits     []hitRec
	total    uint64
	maxScore float64
	shards   int
	aggs     *aggCollector
	sorted   bool // by something other than score alone
}

var bleveIndexMapping = bleveMapping()

func scoringContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, search.GetScoringModelCallbackKey,
		search.GetScoringModelCallbackFn(func() string { return bindex.BM25Scoring }))
}

// buildSort translates sort specs for one index.
func buildSort(specs []sortSpec, m *mappings, indexName string) (search.SortOrder, []*fieldMapping, *esError) {
	if len(specs) == 0 {
		return search.SortOrder{&search.SortScore{Desc: true}}, []*fieldMapping{nil}, nil
	}
	order := search.SortOrder{}
	fms := []*fieldMapping{}
	for _, s := range specs {
		switch s.field {
		case "_score":
			order = append(order, &search.SortScore{Desc: s.desc})
			fms = append(fms, nil)
			continue
		case "_doc":
			order = append(order, &search.SortDocID{Desc: s.desc})
			fms = append(fms, nil)
			continue
		case "_id":
			return nil, nil, shardFailure(indexName, illegalArgument("Fielddata access on the _id field is disallowed, you can re-enable it by updating the dynamic cluster setting: indices.id_field_data.enabled"))
		}
		fm := m.lookup(s.field)
		if fm == nil || fm.Kind == kindObject {
			if s.unmappedType == "" {
				return nil, nil, shardFailure(indexName, queryShardErr("No mapping found for [%s] in order to sort on", s.field))
			}
			fm = &fieldMapping{Type: s.unmappedType, Kind: fieldTypes[s.unmappedType]}
		}
		if fm.Kind == kindText {
			return nil, nil, shardFailure(indexName, illegalArgument("Fielddata is disabled on [%s] in [%s]. Text fields are not optimised for operations that require per-document field data like aggregations and sorting, so these operations are disabled by default. Please use a keyword field instead.", s.field, indexName))
		}
		sf := &search.SortField{Field: s.field, Desc: s.desc, Missing: search.SortFieldMissingLast}
		if s.missingFirst {
			sf.Missing = search.SortFieldMissingFirst
		}
		switch fm.Kind {
		case kindNumber, kindDate:
			sf.Type = search.SortFieldAsNumber
		default:
			sf.Type = search.SortFieldAsString
		}
		sf.Mode = search.SortFieldMin
		if s.desc {
			sf.Mode = search.SortFieldMax
		}
		switch s.mode {
		case "min":
			sf.Mode = search.SortFieldMin
		case "max":
			sf.Mode = search.SortFieldMax
		}
		order = append(order, sf)
		fms = append(fms, fm)
	}
	return order, fms, nil
}

func decodeSortValue(raw string, fm *fieldMapping) sortKey {
	if raw == search.HighTerm || raw == search.LowTerm {
		return sortKey{missing: true}
	}
	switch fm.Kind {
	case kindNumber, kindDate:
		i64, err := numeric.PrefixCoded(raw).Int64()
		if err != nil {
			return sortKey{missing: true}
		}
		return sortKey{num: true, f: numeric.Int64ToFloat64(i64)}
	}
	return sortKey{s: raw}
}

// runSearch executes req over indices.
func (s *Server) runSearch(ctx context.Context, indices []*index, req *searchRequest) (*searchResult, *esError) {
	res := &searchResult{shards: len(indices)}
	if len(req.aggs) > 0 {
		res.aggs = newAggCollector(req.aggs)
	}
	res.sorted = len(req.sorts) > 0 && !(len(req.sorts) == 1 && req.sorts[0].field == "_score")
	now := time.Now()
	sctx := scoringContext(ctx)
	single := len(indices) == 1
	for _, ix := range indices {
		m := ix.currentMapping()
		st := ix.currentSettings()
		if req.from+req.size > st.MaxResultWindow {
			return nil, shardFailure(ix.name, illegalArgument("Result window is too large, from + size must be less than or equal to: [%d] but was [%d]. See the scroll api for a more efficient way to request large data sets. This limit can be set by changing the [index.max_result_window] index level setting.", st.MaxResultWindow, req.from+req.size))
		}
		var q query.Query = query.NewMatchAllQuery()
		if req.queryRaw != nil {
			qc := &qctx{m: m, now: now}
			cq, err := qc.compile(req.queryRaw)
			if err != nil {
				if err.typ == "query_shard_exception" {
					return nil, shardFailure(ix.name, err)
				}
				return nil, err
			}
			q = cq
		}
		order, fms, err := buildSort(req.sorts, m, ix.name)
		if err != nil {
			return nil, err
		}
		if err := s.searchOne(sctx, ix, m, q, order, fms, req, single, res); err != nil {
			return nil, err
		}
	}
	if !single {
		mergeHits(res, req)
	}
	return res, nil
}

func (s *Server) searchOne(ctx context.Context, ix *index, m *mappings, q query.Query, order search.SortOrder,
	fms []*fieldMapping, req *searchRequest, single bool, res *searchResult) *esError {
	ix.engMu.RLock()
	defer ix.engMu.RUnlock()
	if ix.bleve == nil {
		return indexNotFound(ix.name)
	}
	adv, err := ix.bleve.Advanced()
	if err != nil {
		return internalError(err)
	}
	r, err := adv.Reader()
	if err != nil {
		return internalError(err)
	}
	defer r.Close()
	searcher, err := q.Searcher(ctx, r, bleveIndexMapping, search.SearcherOptions{})
	if err != nil {
		return shardFailure(ix.name, queryShardErr("failed to create query: %s", err.Error()))
	}
	defer searcher.Close()
	size, skip := req.from+req.size, 0
	if single {
		size, skip = req.size, req.from
	}
	coll := collector.NewTopNCollector(size, skip, order)
	if res.aggs != nil {
		fb := search.NewFacetsBuilder(r)
		if aerr := res.aggs.bind(m, fb, ix.name); aerr != nil {
			return aerr
		}
		coll.SetFacetsBuilder(fb)
	}
	if err := coll.Collect(ctx, searcher, r); err != nil {
		return internalError(err)
	}
	res.total += coll.Total()
	for _, h := range coll.Results() {
		if math.IsNaN(h.Score) || math.IsInf(h.Score, 0) {
			// Purely non-scoring queries (filters, must_not) have zero
			// weight; bleve's normalisation turns that into NaN.
			h.Score = 0
		}
		rec := hitRec{ix: ix, id: h.ID, score: h.Score}
		for i, raw := range h.Sort {
			if i >= len(fms) {
				break
			}
			if fms[i] == nil {
				if _, isScore := order[i].(*search.SortScore); isScore {
					rec.keys = append(rec.keys, sortKey{num: true, f: h.Score})
				} else {
					rec.keys = append(rec.keys, sortKey{s: raw})
				}
				continue
			}
			rec.keys = append(rec.keys, decodeSortValue(raw, fms[i]))
		}
		doc, err := r.Document(h.ID)
		if err != nil {
			return internalError(err)
		}
		if doc != nil {
			doc.VisitFields(func(f bindex.Field) {
				switch f.Name() {
				case fieldSource:
					rec.source = bytes.Clone(f.Value())
				case fieldMeta:
					rec.meta = string(f.Value())
				}
			})
		}
		res.maxScore = max(res.maxScore, h.Score)
		res.hits = append(res.hits, rec)
	}
	return nil
}

// mergeHits orders hits from several indices and applies from/size.
func mergeHits(res *searchResult, req *searchRequest) {
	specs := req.sorts
	if len(specs) == 0 {
		specs = []sortSpec{{field: "_score", desc: true}}
	}
	sort.SliceStable(res.hits, func(i, j int) bool {
		a, b := res.hits[i].keys, res.hits[j].keys
		for k := 0; k < len(specs) && k < len(a) && k < len(b); k++ {
			x, y := a[k], b[k]
			if x.missing || y.missing {
				if x.missing == y.missing {
					continue
				}
				return y.missing != specs[k].missingFirst
			}
			c := 0
			if x.num && y.num {
				switch {
				case x.f < y.f:
					c = -1
				case x.f > y.f:
					c = 1
				}
			} else {
				c = strings.Compare(x.s, y.s)
			}
			if c == 0 {
				continue
			}
			if specs[k].desc {
				return c > 0
			}
			return c < 0
		}
		return false
	})
	lo := min(req.from, len(res.hits))
	hi := min(req.from+req.size, len(res.hits))
	res.hits = res.hits[lo:hi]
}

type hitJSON struct {
	Index       string          `json:"_index"`
	ID          string          `json:"_id"`
	Version     *int64          `json:"_version,omitempty"`
	SeqNo       *int64          `json:"_seq_no,omitempty"`
	PrimaryTerm *int64          `json:"_primary_term,omitempty"`
	Score       *float64        `json:"_score"`
	Source      json.RawMessage `json:"_source,omitempty"`
	Sort        []any           `json:"sort,omitempty"`
}

// render builds the _search response body.
func (res *searchResult) render(req *searchRequest, took time.Duration) map[string]any {
	hits := make([]hitJSON, 0, len(res.hits))
	showScore := !res.sorted || req.trackScores
	for _, h := range res.hits {
		hj := hitJSON{Index: h.ix.name, ID: h.id}
		if showScore {
			sc := h.score
			hj.Score = &sc
		}
		hj.Source = req.source.apply(h.source)
		if req.version || req.seqNo {
			vs, ss, _ := strings.Cut(h.meta, ":")
			v, _ := strconv.ParseInt(vs, 10, 64)
			sq, _ := strconv.ParseInt(ss, 10, 64)
			if req.version {
				hj.Version = &v
			}
			if req.seqNo {
				one := int64(1)
				hj.SeqNo, hj.PrimaryTerm = &sq, &one
			}
		}
		if len(req.sorts) > 0 {
			for i, k := range h.keys {
				hj.Sort = append(hj.Sort, sortOutput(k, req.sorts, i, h.ix))
			}
		}
		hits = append(hits, hj)
	}
	hitsObj := map[string]any{"hits": hits}
	if showScore && len(hits) > 0 {
		hitsObj["max_score"] = res.maxScore
	} else {
		hitsObj["max_score"] = nil
	}
	switch {
	case req.restTotalAsInt:
		hitsObj["total"] = res.total
	case req.trackTotal == 0:
	case req.trackTotal > 0 && res.total > uint64(req.trackTotal):
		hitsObj["total"] = map[string]any{"value": req.trackTotal, "relation": "gte"}
	default:
		hitsObj["total"] = map[string]any{"value": res.total, "relation": "eq"}
	}
	out := map[string]any{
		"took":      took.Milliseconds(),
		"timed_out": false,
		"_shards":   map[string]any{"total": res.shards, "successful": res.shards, "skipped": 0, "failed": 0},
		"hits":      hitsObj,
	}
	if res.aggs != nil {
		out["aggregations"] = res.aggs.render(req.typedKeys)
	}
	return out
}

func sortOutput(k sortKey, specs []sortSpec, i int, ix *index) any {
	if k.missing {
		return nil
	}
	if i < len(specs) && specs[i].field != "_score" && specs[i].field != "_doc" {
		fm := ix.currentMapping().lookup(specs[i].field)
		if fm != nil {
			switch {
			case fm.Kind == kindBool:
				if k.s == "T" {
					return 1
				}
				return 0
			case fm.Kind == kindDate, fm.Kind == kindNumber && isIntegerType(fm.Type):
				return int64(k.f)
			}
		}
	}
	if k.num {
		return k.f
	}
	return k.s
}

func (s *Server) handleSearch(rc *reqCtx, target string) (int, any) {
	req, err := parseSearchRequest(rc.body, rc.q, false)
	if err != nil {
		return errResp(err)
	}
	indices, err := s.resolveSearch(target, rc.q)
	if err != nil {
		return errResp(err)
	}
	start := time.Now()
	res, err := s.runSearch(rc.r.Context(), indices, req)
	if err != nil {
		return errResp(err)
	}
	return http.StatusOK, res.render(req, time.Since(start))
}

func (s *Server) handleCount(rc *reqCtx, target string) (int, any) {
	req, err := parseSearchRequest(rc.body, url.Values{"q": rc.q["q"]}, true)
	if err != nil {
		return errResp(err)
	}
	req.size, req.from = 0, 0
	indices, err := s.resolveSearch(target, rc.q)
	if err != nil {
		return errResp(err)
	}
	res, err := s.runSearch(rc.r.Context(), indices, req)
	if err != nil {
		return errResp(err)
	}
	n := len(indices)
	return http.StatusOK, map[string]any{
		"count":   res.total,
		"_shards": map[string]any{"total": n, "successful": n, "skipped": 0, "failed": 0},
	}
}
