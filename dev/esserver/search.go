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
	format       string // date sorts: render sort values in this format
}

type sourceFilter struct {
	disabled           bool
	includes, excludes []string
}

// searchRequest is a parsed _search (or _count) request.
type searchRequest struct {
	queryRaw json.RawMessage
	from     int
	size     int
	sorts    []sortSpec
	source   sourceFilter
	aggs     []*aggSpec
	// trackTotal counts hits up to that number: trackAccurate counts them
	// all, trackDisabled not at all (SearchContext's constants).
	trackTotal     int
	trackScores    bool
	version        bool
	seqNo          bool
	restTotalAsInt bool
	typedKeys      bool
	// minScore drops hits scoring below it (nil: none); terminateAfter
	// stops collecting after that many hits per index (0: never).
	minScore       *float64
	terminateAfter int
	// searchAfter holds the sort values to continue after (nil: none).
	searchAfter []any
	// postFilter filters the hits (not the aggregations) (nil: none).
	postFilter json.RawMessage
}

const (
	trackAccurate  = math.MaxInt32 // SearchContext.TRACK_TOTAL_HITS_ACCURATE
	trackDisabled  = -1            // SearchContext.TRACK_TOTAL_HITS_DISABLED
	defaultTrackTo = 10000         // SearchContext.DEFAULT_TRACK_TOTAL_HITS_UP_TO
)

var unsupportedSearchKeys = map[string]bool{
	"highlight": true, "suggest": true, "collapse": true, "rescore": true,
	"pit": true, "knn": true, "runtime_mappings": true, "script_fields": true,
	"docvalue_fields": true, "fields": true, "indices_boost": true,
	"slice": true, "rank": true, "retriever": true, "sub_searches": true,
	"point_in_time": true, "stored_fields": true, "ext": true,
}

// URL parameters of the search and count APIs (rest-api-spec/api/
// search.json and count.json, 8.15). Those this server does not implement
// are refused in parseSearchRequest with a reason naming them; the rest
// are honoured, or have no effect on a single node with one shard per
// index (preference, request_cache, batched_reduce_size,
// max_concurrent_shard_requests, pre_filter_shard_size at or above the
// number of indices searched,
// ccs_minimize_roundtrips, allow_partial_search_results, ignore_throttled,
// search_type, timeout, stats).
var (
	pSearch = params("allow_no_indices allow_partial_search_results analyzer analyze_wildcard batched_reduce_size "+
		"ccs_minimize_roundtrips default_operator df expand_wildcards ignore_throttled ignore_unavailable lenient "+
		"max_concurrent_shard_requests pre_filter_shard_size preference q request_cache rest_total_hits_as_int "+
		"search_type seq_no_primary_term size sort _source _source_excludes _source_includes stats terminate_after "+
		"timeout track_scores track_total_hits typed_keys version from explain docvalue_fields scroll suggest_field "+
		"suggest_mode suggest_size suggest_text include_named_queries_score enable_fields_emulation "+
		"min_compatible_shard_node",
		"routing stored_fields force_synthetic_source")
	pCount = params("ignore_unavailable ignore_throttled allow_no_indices expand_wildcards min_score preference q "+
		"analyzer analyze_wildcard default_operator df lenient terminate_after", "routing")
)

// searchBoolParams are the boolean URL parameters of search and count,
// parsed as RestRequest.paramAsBoolean does.
var searchBoolParams = []string{"rest_total_hits_as_int", "typed_keys", "version", "seq_no_primary_term",
	"track_scores", "explain", "request_cache", "analyze_wildcard", "lenient", "ccs_minimize_roundtrips",
	"allow_partial_search_results", "ignore_throttled", "include_named_queries_score", "enable_fields_emulation"}

func paramBool(q url.Values, k string) (bool, *esError) {
	switch v := q.Get(k); v {
	case "", "true":
		return q.Has(k), nil
	case "false":
		return false, nil
	default:
		return false, illegalArgument("Failed to parse value [%s] as only [true] or [false] are allowed.", v)
	}
}

func paramInt(q url.Values, k string) (int, bool, *esError) {
	if !q.Has(k) {
		return 0, false, nil
	}
	v := q.Get(k)
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, false, illegalArgument("Failed to parse int parameter [%s] with value [%s]", k, v)
	}
	return n, true, nil
}

// scalarFloat reads a JSON number (or a numeric string, which
// Elasticsearch's parser coerces).
func scalarFloat(raw json.RawMessage) (float64, bool) {
	var x any
	if decodeJSON(raw, &x) != nil {
		return 0, false
	}
	s, ok := scalarString(x)
	if !ok {
		return 0, false
	}
	if _, isBool := x.(bool); isBool {
		return 0, false
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return f, err == nil
}

func parseSearchRequest(body []byte, q url.Values, path string, countOnly bool) (*searchRequest, *esError) {
	req := &searchRequest{size: 10, trackTotal: defaultTrackTo}
	trackSet := false
	for _, k := range searchBoolParams {
		if _, err := paramBool(q, k); err != nil {
			return nil, err
		}
	}
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
			case "post_filter":
				req.postFilter = v
			case "from", "size", "terminate_after":
				n, perr := intParam(v)
				if perr != nil {
					return nil, parsingError("[%s] failed to parse field [%s]", k, k)
				}
				switch k {
				case "from":
					req.from = n
				case "size":
					req.size = n
				default:
					if n < 0 {
						// SearchSourceBuilder.terminateAfter
						return nil, illegalArgument("terminateAfter must be > 0")
					}
					req.terminateAfter = n
				}
			case "min_score":
				f, ok := scalarFloat(v)
				if !ok {
					return nil, parsingError("[min_score] failed to parse field [min_score]")
				}
				req.minScore = &f
			case "search_after":
				var vals []any
				if err := decodeJSON(v, &vals); err != nil || vals == nil {
					return nil, parsingError("[search_after] failed to parse field [search_after]")
				}
				req.searchAfter = vals
			case "sort":
				req.sorts, err = parseSort(v)
			case "_source":
				req.source, err = parseSourceBody(v)
			case "aggs", "aggregations":
				req.aggs, err = parseAggs(v)
			case "track_total_hits":
				req.trackTotal, err = parseTrackTotal(v)
				trackSet = true
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
				default:
					if b {
						return nil, illegalArgument("[eventpipe] search option [%s] is not supported by this server", k)
					}
				}
			case "timeout", "stats":
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
	// URL parameters override the body (RestSearchAction.parseSearchSource).
	for _, k := range []string{"from", "size"} {
		n, has, err := paramInt(q, k)
		if err != nil {
			return nil, err
		}
		if !has {
			continue
		}
		if k == "from" {
			req.from = n
		} else {
			req.size = n
		}
	}
	if n, has, err := paramInt(q, "terminate_after"); err != nil {
		return nil, err
	} else if has {
		if n < 0 {
			return nil, illegalArgument("terminateAfter must be > 0")
		}
		req.terminateAfter = n
	}
	if q.Has("min_score") {
		f, err := strconv.ParseFloat(q.Get("min_score"), 32)
		if err != nil {
			return nil, illegalArgument("Failed to parse float parameter [min_score] with value [%s]", q.Get("min_score"))
		}
		req.minScore = &f
	}
	if v := q.Get("sort"); v != "" {
		req.sorts = nil
		for _, part := range strings.Split(v, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			ss := sortSpec{field: part, desc: part == "_score"}
			if i := strings.LastIndexByte(part, ':'); i >= 0 {
				switch part[i+1:] {
				case "asc":
					ss = sortSpec{field: part[:i]}
				case "desc":
					ss = sortSpec{field: part[:i], desc: true}
				default:
					// Elasticsearch ignores other suffixes and keeps the
					// field's default order.
					ss = sortSpec{field: part[:i], desc: part[:i] == "_score"}
				}
			}
			req.sorts = append(req.sorts, ss)
		}
	}
	if q.Has("track_total_hits") {
		switch v := q.Get("track_total_hits"); v {
		case "", "true":
			req.trackTotal = trackAccurate
		case "false":
			req.trackTotal = trackDisabled
		default:
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, illegalArgument("Failed to parse int parameter [track_total_hits] with value [%s]", v)
			}
			if n < trackDisabled {
				return nil, illegalArgument("[track_total_hits] parameter must be positive or equals to -1, got %d", n)
			}
			req.trackTotal = n
		}
		trackSet = true
	}
	// RestSearchAction.checkRestTotalHits: rest_total_hits_as_int needs an
	// accurate count (or none, rendered as -1).
	if as, _ := paramBool(q, "rest_total_hits_as_int"); as {
		req.restTotalAsInt = true
		switch {
		case !trackSet:
			req.trackTotal = trackAccurate
		case req.trackTotal != trackAccurate && req.trackTotal != trackDisabled:
			return nil, illegalArgument("[rest_total_hits_as_int] cannot be used if the tracking of total hits is not accurate, got %d", req.trackTotal)
		}
	}
	req.typedKeys, _ = paramBool(q, "typed_keys")
	if q.Has("version") {
		req.version, _ = paramBool(q, "version")
	}
	if q.Has("seq_no_primary_term") {
		req.seqNo, _ = paramBool(q, "seq_no_primary_term")
	}
	if q.Has("track_scores") {
		req.trackScores, _ = paramBool(q, "track_scores")
	}
	if q.Has("_source") || q.Has("_source_includes") || q.Has("_source_excludes") {
		req.source = parseSourceParams(q, req.source)
	}
	if err := refuseUnimplementedParams(q); err != nil {
		return nil, err
	}
	qr, err := uriQuery(q, path)
	if err != nil {
		return nil, err
	}
	if qr != nil {
		// The q parameter replaces the body's query.
		req.queryRaw = qr
	}
	if req.size < 0 {
		return nil, illegalArgument("[size] parameter cannot be negative, found [%d]", req.size)
	}
	if req.from < 0 {
		return nil, illegalArgument("[from] parameter cannot be negative, found [%d]", req.from)
	}
	return req, nil
}

// refuseUnimplementedParams refuses the real search parameters this server
// does not implement, naming them.
func refuseUnimplementedParams(q url.Values) *esError {
	if q.Has("scroll") {
		return illegalArgument("[eventpipe] scroll is not supported by this server")
	}
	for _, k := range []string{"explain", "include_named_queries_score"} {
		if on, _ := paramBool(q, k); on {
			return illegalArgument("[eventpipe] search parameter [%s] is not supported by this server", k)
		}
	}
	for _, k := range []string{"docvalue_fields", "suggest_field", "suggest_mode", "suggest_size", "suggest_text", "min_compatible_shard_node"} {
		if q.Has(k) {
			return illegalArgument("[eventpipe] search parameter [%s] is not supported by this server", k)
		}
	}
	if v := q.Get("search_type"); v != "" && v != "query_then_fetch" && v != "dfs_query_then_fetch" {
		return illegalArgument("No search type for [%s]", v)
	}
	// SearchRequest's setters (RestSearchAction.parseSearchRequest)
	for _, c := range []struct {
		k, name string
		min     int
	}{{"batched_reduce_size", "batchedReduceSize", 2}, {"max_concurrent_shard_requests", "maxConcurrentShardRequests", 1},
		{"pre_filter_shard_size", "preFilterShardSize", 1}} {
		if n, ok, err := paramInt(q, c.k); err != nil {
			return err
		} else if ok && n < c.min {
			return illegalArgument("%s must be >= %d", c.name, c.min)
		}
	}
	return nil
}

// refusePreFilter refuses a pre_filter_shard_size below the number of
// shards searched (one per index here): Elasticsearch then runs its
// can-match phase and reports the shards it skips in _shards.skipped,
// which this server does not do.
func refusePreFilter(q url.Values, shards int) *esError {
	if n, ok, _ := paramInt(q, "pre_filter_shard_size"); ok && n < shards {
		return illegalArgument("[eventpipe] [pre_filter_shard_size] below the number of shards searched ([%d]) asks for the can-match pre-filter phase, which this server does not have", shards)
	}
	return nil
}

func tokenKind(v json.RawMessage) string {
	if len(bytes.TrimSpace(v)) == 0 {
		return "VALUE"
	}
	return xcontentToken(v)
}

func intParam(v json.RawMessage) (int, error) {
	var x any
	if err := decodeJSON(v, &x); err != nil {
		return 0, err
	}
	s, _ := scalarString(x)
	return strconv.Atoi(s)
}

// parseTrackTotal reads the body's track_total_hits: a boolean, or the
// number of hits to count up to (SearchSourceBuilder.trackTotalHitsUpTo).
func parseTrackTotal(v json.RawMessage) (int, *esError) {
	s := strings.Trim(strings.TrimSpace(string(v)), `"`)
	switch s {
	case "true":
		return trackAccurate, nil
	case "false":
		return trackDisabled, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, parsingError("[track_total_hits] failed to parse field [track_total_hits]")
	}
	if n < trackDisabled {
		return 0, illegalArgument("[track_total_hits] parameter must be positive or equals to -1, got %d", n)
	}
	return n, nil
}

// uriQuery turns the q= URI search and its parameters into a query_string
// query, as RestActions.urlParamsToQueryBuilder does; nil without q.
func uriQuery(q url.Values, path string) (json.RawMessage, *esError) {
	if !q.Has("q") {
		var given []string
		for _, k := range []string{"df", "analyzer", "analyze_wildcard", "lenient", "default_operator"} {
			if q.Has(k) {
				given = append(given, k)
			}
		}
		if len(given) > 0 {
			return nil, illegalArgument("request [%s] contains parameters [%s] but missing query string parameter 'q'.", path, strings.Join(given, ", "))
		}
		return nil, nil
	}
	qs := map[string]any{"query": q.Get("q")}
	if q.Has("df") {
		qs["default_field"] = q.Get("df")
	}
	if q.Has("analyzer") {
		qs["analyzer"] = q.Get("analyzer")
	}
	if b, _ := paramBool(q, "analyze_wildcard"); b {
		qs["analyze_wildcard"] = true
	}
	if q.Has("lenient") {
		qs["lenient"], _ = paramBool(q, "lenient")
	}
	if q.Has("default_operator") {
		op := q.Get("default_operator")
		if _, err := parseOperator(op); err != nil {
			return nil, err
		}
		qs["default_operator"] = op
	}
	b, _ := json.Marshal(map[string]any{"query_string": qs})
	return b, nil
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
			if f == "_script" || f == "_geo_distance" {
				return nil, illegalArgument("[eventpipe] [%s] sorts are not supported by this server", f)
			}
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
				case "nested", "nested_path", "nested_filter":
					return nil, illegalArgument("[eventpipe] nested sorts ([%s]) are not supported by this server", ok)
				case "unmapped_type":
					ss.unmappedType = sv
				case "mode":
					switch sv {
					case "min", "max":
						ss.mode = sv
					case "sum", "avg", "median":
						return nil, illegalArgument("[eventpipe] sort mode [%s] is not supported by this server (min and max are)", sv)
					default:
						return nil, illegalArgument("Unknown SortMode [%s]", sv)
					}
				case "format":
					if _, err := compileDateFormat(sv); err != nil {
						return nil, illegalArgument("Invalid format: [%s]: %s", sv, err.Error())
					}
					ss.format = sv
				case "numeric_type":
					return nil, illegalArgument("[eventpipe] sort option [numeric_type] is not supported by this server")
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
	matched []string // names of the named queries the hit matches
	ix      *index
	id      string
	score   float64
	keys    []sortKey
	source  []byte
	meta    string
}

// searchResult is the collected outcome of a search over indices.
type searchResult struct {
	// terminatedEarly: terminate_after stopped the collection of an index.
	terminatedEarly bool
	hits            []hitRec
	total           uint64
	maxScore        float64
	shards          int
	aggs            *aggCollector
	sorted          bool // by something other than score alone
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
		if s.format != "" && fm.Kind != kindDate {
			return nil, nil, illegalArgument("[eventpipe] sort [format] is supported on date fields only, not on [%s]", s.field)
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
	var named map[*index][]namedQuery
	for _, ix := range indices {
		m := ix.currentMapping()
		st := ix.currentSettings()
		if req.from+req.size > st.MaxResultWindow {
			return nil, shardFailure(ix.name, illegalArgument("Result window is too large, from + size must be less than or equal to: [%d] but was [%d]. See the scroll api for a more efficient way to request large data sets. This limit can be set by changing the [index.max_result_window] index level setting.", st.MaxResultWindow, req.from+req.size))
		}
		var q query.Query = query.NewMatchAllQuery()
		var pf query.Query
		qc := &qctx{m: m, now: now, index: ix.name, maxTerms: settingInt(st, "index.max_terms_count"),
			maxResultWindow: st.MaxResultWindow,
			defaultFields:   settingList(st, "index.query.default_field")}
		for _, part := range []struct {
			raw json.RawMessage
			dst *query.Query
		}{{req.queryRaw, &q}, {req.postFilter, &pf}} {
			if part.raw == nil {
				continue
			}
			cq, err := qc.compile(part.raw)
			if err != nil {
				if err.typ == "query_shard_exception" {
					return nil, shardFailure(ix.name, err)
				}
				return nil, err
			}
			*part.dst = cq
		}
		if len(qc.named) > 0 {
			if named == nil {
				named = map[*index][]namedQuery{}
			}
			named[ix] = qc.named
		}
		order, fms, err := buildSort(req.sorts, m, ix.name)
		if err != nil {
			return nil, err
		}
		after, err := searchAfterKeys(req, order, fms, ix.name)
		if err != nil {
			return nil, err
		}
		if pf != nil && res.aggs != nil {
			// post_filter: the aggregations see every hit of the query
			// (a first pass without hits), the hits only the filtered ones.
			aggReq := *req
			aggReq.from, aggReq.size = 0, 0
			aggRes := &searchResult{aggs: res.aggs}
			if err := s.searchOne(sctx, ix, m, q, order, fms, &aggReq, true, aggRes, nil, nil); err != nil {
				return nil, err
			}
			aggs := res.aggs
			res.aggs = nil
			err := s.searchOne(sctx, ix, m, q, order, fms, req, single, res, after, pf)
			res.aggs = aggs
			if err != nil {
				return nil, err
			}
			continue
		}
		if err := s.searchOne(sctx, ix, m, q, order, fms, req, single, res, after, pf); err != nil {
			return nil, err
		}
	}
	if !single {
		mergeHits(res, req)
	}
	if named != nil {
		if err := markMatchedQueries(sctx, res.hits, named); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func (s *Server) searchOne(ctx context.Context, ix *index, m *mappings, q query.Query, order search.SortOrder,
	fms []*fieldMapping, req *searchRequest, single bool, res *searchResult, after []string, postFilter query.Query) *esError {
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
	size, skip := req.from+req.size, 0
	if single {
		size, skip = req.size, req.from
	}
	base, err := ix.newSearcher(ctx, r, q, m, order, req, res.aggs, postFilter, after, size+skip)
	if err != nil {
		return shardFailure(ix.name, queryShardErr("failed to create query: %s", err.Error()))
	}
	defer base.Close()
	lim := limitHits(base, req)
	if postFilter != nil {
		if lim.allow, err = matchingDocs(ctx, r, postFilter); err != nil {
			return shardFailure(ix.name, queryShardErr("failed to create query: %s", err.Error()))
		}
	}
	coll := collector.NewTopNCollector(size, skip, order)
	if after != nil {
		coll = collector.NewTopNCollectorAfter(size, order, after)
	}
	// Aggregations and field sorts read doc-value columns (columns.go).
	if cerr := ix.collect(ctx, coll, lim, r, m, order, res.aggs); cerr != nil {
		return cerr
	}
	total := coll.Total()
	if ms, ok := base.(*maxScoreSearcher); ok {
		// Pruning may have skipped matches once more than
		// track_total_hits were known to exist.
		total = max(total, ms.matchesAtLeast())
	}
	res.total += total
	res.terminatedEarly = res.terminatedEarly || lim.terminated
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
	Matched     []string        `json:"matched_queries,omitempty"`
}

// render builds the _search response body.
func (res *searchResult) render(req *searchRequest, took time.Duration) map[string]any {
	hits := make([]hitJSON, 0, len(res.hits))
	showScore := !res.sorted || req.trackScores
	for _, h := range res.hits {
		hj := hitJSON{Index: h.ix.name, ID: h.id, Matched: h.matched}
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
				hj.Sort = append(hj.Sort, sortOutput(k, req.sorts, i, h))
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
	case req.restTotalAsInt && req.trackTotal == trackDisabled:
		hitsObj["total"] = -1 // SearchHits.toXContent without total hits
	case req.restTotalAsInt:
		hitsObj["total"] = res.total
	case req.trackTotal == trackDisabled:
	case res.total > uint64(req.trackTotal):
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
	if req.terminateAfter > 0 {
		out["terminated_early"] = res.terminatedEarly
	}
	if res.aggs != nil {
		out["aggregations"] = res.aggs.render(req.typedKeys)
	}
	return out
}

func sortOutput(k sortKey, specs []sortSpec, i int, h hitRec) any {
	if k.missing {
		return nil
	}
	if i < len(specs) && specs[i].field != "_score" && specs[i].field != "_doc" {
		fm := h.ix.currentMapping().lookup(specs[i].field)
		if fm != nil {
			switch {
			case fm.Kind == kindBool:
				if k.s == "T" {
					return 1
				}
				return 0
			case fm.Kind == kindDate && specs[i].format != "":
				// The sort's format renders the value (as a string).
				if df := sortFormat(specs[i]); df != nil {
					return df.format(int64(k.f), nil)
				}
				return int64(k.f)
			case fm.Kind == kindDate && fm.Type == "date_nanos":
				// Nanoseconds since the epoch, as Elasticsearch reports
				// date_nanos sort values.
				ms := int64(k.f)
				if n, ok := nanosSortValue(h.source, specs[i].field, fm, specs[i]); ok && floorDiv(n, 1e6) == ms {
					return n
				}
				return ms * 1e6
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
	if err := pSearch.check(rc); err != nil {
		return errResp(err)
	}
	req, err := parseSearchRequest(rc.body, rc.q, rc.r.URL.Path, false)
	if err != nil {
		return errResp(err)
	}
	indices, err := s.resolveSearch(target, rc.q)
	if err != nil {
		return errResp(err)
	}
	if err := refusePreFilter(rc.q, len(indices)); err != nil {
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
	if err := pCount.check(rc); err != nil {
		return errResp(err)
	}
	req, err := parseSearchRequest(rc.body, rc.q, rc.r.URL.Path, true)
	if err != nil {
		return errResp(err)
	}
	req.size, req.from = 0, 0
	req.trackTotal = trackAccurate // the count is always exact
	indices, err := s.resolveSearch(target, rc.q)
	if err != nil {
		return errResp(err)
	}
	res, err := s.runSearch(rc.r.Context(), indices, req)
	if err != nil {
		return errResp(err)
	}
	n := len(indices)
	out := map[string]any{
		"count":   res.total,
		"_shards": map[string]any{"total": n, "successful": n, "skipped": 0, "failed": 0},
	}
	if req.terminateAfter > 0 {
		out["terminated_early"] = res.terminatedEarly
	}
	return http.StatusOK, out
}
