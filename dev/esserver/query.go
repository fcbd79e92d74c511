package esserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/blevesearch/bleve/v2/search/query"
)

// qctx compiles Elasticsearch query DSL into bleve queries for one index.
type qctx struct {
	m   *mappings
	now time.Time
	// index is the name of the index searched (for _index and shard
	// failures); maxTerms is its index.max_terms_count (0: the default).
	index    string
	maxTerms int
	// maxResultWindow is index.max_result_window (0: unchecked), which
	// also bounds the number of ids of an ids query.
	maxResultWindow int
	// defaultFields is index.query.default_field (nil: "*").
	defaultFields []string
	// named are the queries given a _name, in the order compiled; hits
	// report those they match as matched_queries.
	named []namedQuery
}

// defaultMaxTermsCount is index.max_terms_count's default (Elasticsearch
// IndexSettings.MAX_TERMS_COUNT_SETTING).
const defaultMaxTermsCount = 65536

// metaFieldQuery answers exact-value queries on the metadata fields _id
// and _index, which are not in the mapping: Elasticsearch's IdFieldMapper
// supports term, terms, match and ids queries on _id (values compared as
// strings, so numbers match their string form), and _index matches every
// document of the index named. ok is false for other fields.
func (c *qctx) metaFieldQuery(field string, vals []any) (q query.Query, ok bool) {
	switch field {
	case "_id":
		ids := make([]string, 0, len(vals))
		for _, v := range vals {
			if s, isScalar := scalarString(v); isScalar {
				ids = append(ids, s)
			}
		}
		if len(ids) == 0 {
			return query.NewMatchNoneQuery(), true
		}
		return query.NewDocIDQuery(ids), true
	case "_index":
		for _, v := range vals {
			if s, _ := scalarString(v); s != "" && (s == c.index || wildMatch(s, c.index)) {
				return query.NewMatchAllQuery(), true
			}
		}
		return query.NewMatchNoneQuery(), true
	}
	return nil, false
}

// unsupportedQueries are real query types this server does not implement.
var unsupportedQueries = map[string]bool{
	"match_phrase": true, "match_phrase_prefix": true, "match_bool_prefix": true,
	"simple_query_string": true, "nested": true, "has_child": true,
	"has_parent": true, "fuzzy": true, "regexp": true, "dis_max": true, "function_score": true,
	"script": true, "script_score": true, "geo_distance": true, "geo_bounding_box": true,
	"geo_shape": true, "geo_polygon": true, "more_like_this": true, "knn": true, "boosting": true,
	"intervals": true, "combined_fields": true, "distance_feature": true, "percolate": true,
	"rank_feature": true, "wrapper": true, "pinned": true, "span_term": true, "span_near": true,
	"terms_set": true, "type": true, "semantic": true, "sparse_vector": true, "text_expansion": true,
}

// decodeJSON decodes with numbers kept as json.Number.
func decodeJSON(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(v)
}

func queryMalformed(name string) *esError {
	return parsingError("[%s] query malformed, no start_object after query name", name)
}

// compile turns one query object {"type": {...}} into a bleve query.
func (c *qctx) compile(raw json.RawMessage) (query.Query, *esError) {
	var obj map[string]json.RawMessage
	if err := decodeJSON(raw, &obj); err != nil || obj == nil {
		return nil, parsingError("query malformed, must start with start_object")
	}
	if len(obj) == 0 {
		return nil, parsingError("query malformed, empty clause found")
	}
	if len(obj) > 1 {
		names := slices.Sorted(maps.Keys(obj))
		return nil, parsingError("[%s] malformed query, expected [END_OBJECT] but found [FIELD_NAME]", names[0])
	}
	for name, body := range obj {
		trimmed := bytes.TrimSpace(body)
		if len(trimmed) == 0 || trimmed[0] != '{' {
			if _, known := compilers[name]; known || unsupportedQueries[name] {
				return nil, queryMalformed(name)
			}
		}
		fn, ok := compilers[name]
		if !ok {
			if unsupportedQueries[name] {
				return nil, parsingError("[eventpipe] query [%s] is not supported by this server", name)
			}
			return nil, parsingError("unknown query [%s]", name).withCause(
				newErr(http.StatusBadRequest, "named_object_not_found_exception", "[1:%d] unknown field [%s]", len(name)+3, name))
		}
		var params map[string]json.RawMessage
		if err := decodeJSON(body, &params); err != nil {
			return nil, queryMalformed(name)
		}
		q, err := fn(c, name, params)
		if err == nil {
			c.noteNamed(params, q)
		}
		return q, err
	}
	return nil, nil
}

type compileFn func(c *qctx, name string, p map[string]json.RawMessage) (query.Query, *esError)

var compilers map[string]compileFn

func init() {
	compilers = map[string]compileFn{
		"match_all":      compileMatchAll,
		"match_none":     compileMatchNone,
		"match":          compileMatch,
		"multi_match":    compileMultiMatch,
		"term":           compileTerm,
		"terms":          compileTerms,
		"range":          compileRange,
		"bool":           compileBool,
		"exists":         compileExists,
		"ids":            compileIDs,
		"prefix":         compilePrefix,
		"wildcard":       compileWildcard,
		"constant_score": compileConstantScore,
		"query_string":   compileQueryString,
	}
}

// boostOf reads an optional "boost" parameter.
func boostOf(name string, p map[string]json.RawMessage) (float64, *esError) {
	raw, ok := p["boost"]
	if !ok {
		return 1, nil
	}
	var b float64
	if err := json.Unmarshal(raw, &b); err != nil {
		return 0, parsingError("[%s] failed to parse field [boost]", name)
	}
	if b < 0 {
		// AbstractQueryBuilder.checkNegativeBoost
		return 0, illegalArgument("negative [boost] are not allowed.")
	}
	return b, nil
}

// withBoost multiplies the boost of q by b. bleve's compound queries
// ignore their own boost, so they are wrapped in a boostQuery instead.
func withBoost(q query.Query, b float64) query.Query {
	if b == 1 {
		return q
	}
	switch x := q.(type) {
	case *query.DisjunctionQuery, *query.ConjunctionQuery, *query.BooleanQuery:
		return &boostQuery{q: q, boost: b}
	case query.BoostableQuery:
		x.SetBoost(x.Boost() * b)
	}
	return q
}

func checkKnown(name string, p map[string]json.RawMessage, allowed ...string) *esError {
	for k := range p {
		ok := false
		for _, a := range allowed {
			if k == a {
				ok = true
				break
			}
		}
		if !ok {
			return parsingError("[%s] query does not support [%s]", name, k)
		}
	}
	return nil
}

func compileMatchAll(c *qctx, name string, p map[string]json.RawMessage) (query.Query, *esError) {
	if err := checkKnown(name, p, "boost", "_name"); err != nil {
		return nil, err
	}
	b, err := boostOf(name, p)
	if err != nil {
		return nil, err
	}
	q := query.NewMatchAllQuery()
	return withBoost(q, b), nil
}

func compileMatchNone(c *qctx, name string, p map[string]json.RawMessage) (query.Query, *esError) {
	if err := checkKnown(name, p, "boost", "_name"); err != nil {
		return nil, err
	}
	return query.NewMatchNoneQuery(), nil
}

// singleField extracts the one field of a field-keyed query such as
// {"term": {"status": ...}}, returning the field and its (possibly
// object) value; boost and _name may sit beside the field in some queries.
func singleField(name string, p map[string]json.RawMessage, side ...string) (string, json.RawMessage, *esError) {
	var field string
	var val json.RawMessage
	for k, v := range p {
		isSide := false
		for _, s := range side {
			if k == s {
				isSide = true
			}
		}
		if isSide {
			continue
		}
		if field != "" {
			a, b := field, k
			if b < a {
				a, b = b, a
			}
			return "", nil, parsingError("[%s] query doesn't support multiple fields, found [%s] and [%s]", name, a, b)
		}
		field, val = k, v
	}
	if field == "" {
		return "", nil, parsingError("[%s] query requires a field", name)
	}
	return field, val, nil
}

// fieldParams splits a field value that is either a scalar (shorthand) or an
// object with a value key.
func fieldParams(name string, raw json.RawMessage, valueKey string) (map[string]json.RawMessage, *esError) {
	t := bytes.TrimSpace(raw)
	if len(t) > 0 && t[0] == '{' {
		var p map[string]json.RawMessage
		if err := decodeJSON(t, &p); err != nil {
			return nil, parsingError("[%s] malformed query", name)
		}
		if _, ok := p[valueKey]; !ok {
			return nil, parsingError("[%s] query does not have a [%s] parameter", name, valueKey)
		}
		return p, nil
	}
	if len(t) > 0 && t[0] == '[' {
		return nil, parsingError("[%s] query does not support array of values", name)
	}
	return map[string]json.RawMessage{valueKey: t}, nil
}

// fieldQuery reads the body of a single-field query ({"field": value} or
// {"field": {valueKey: value, ...}}): the field and its parameters.
func fieldQuery(name string, p map[string]json.RawMessage, valueKey string) (string, map[string]json.RawMessage, *esError) {
	field, raw, err := singleField(name, p)
	if err != nil {
		return "", nil, err
	}
	fp, err := fieldParams(name, raw, valueKey)
	if err != nil {
		return "", nil, err
	}
	return field, fp, nil
}

func scalarOf(raw json.RawMessage) (any, bool) {
	var v any
	if err := decodeJSON(raw, &v); err != nil {
		return nil, false
	}
	switch v.(type) {
	case string, json.Number, bool:
		return v, true
	}
	return nil, false
}

func queryShardErr(format string, args ...any) *esError {
	return newErr(http.StatusBadRequest, "query_shard_exception", format, args...)
}

// termQuery builds the exact-value query for one field and value.
func (c *qctx) termQuery(field string, fm *fieldMapping, v any) (query.Query, *esError) {
	if q, ok := c.metaFieldQuery(field, []any{v}); ok {
		return q, nil
	}
	if fm == nil || fm.Kind == kindObject {
		return query.NewMatchNoneQuery(), nil
	}
	switch fm.Kind {
	case kindText, kindKeyword:
		s, _ := scalarString(v)
		q := query.NewTermQuery(s)
		q.SetField(field)
		return q, nil
	case kindNumber:
		f, err := toNumber(v, "double")
		if err != nil {
			return nil, queryShardErr("failed to create query: %s", err.Error())
		}
		return numRange(field, &f, &f, true, true), nil
	case kindDate:
		ms, err := parseDateMath(v, fm.dates, c.now, false, nil)
		if err != nil {
			return nil, queryShardErr("failed to create query: %s", err.Error())
		}
		f := float64(ms)
		return numRange(field, &f, &f, true, true), nil
	case kindBool:
		s, _ := scalarString(v)
		switch s {
		case "true":
			s = "T"
		case "false", "":
			s = "F"
		default:
			return nil, queryShardErr("failed to create query: Can't parse boolean value [%s], expected [true] or [false]", s)
		}
		q := query.NewTermQuery(s)
		q.SetField(field)
		return q, nil
	}
	return query.NewMatchNoneQuery(), nil
}

func numRange(field string, min, max *float64, minIncl, maxIncl bool) query.Query {
	q := query.NewNumericRangeInclusiveQuery(min, max, &minIncl, &maxIncl)
	q.SetField(field)
	return q
}

func compileTerm(c *qctx, name string, p map[string]json.RawMessage) (query.Query, *esError) {
	field, fp, err := fieldQuery(name, p, "value")
	if err != nil {
		return nil, err
	}
	if err := checkKnown(name, fp, "value", "boost", "case_insensitive", "_name"); err != nil {
		return nil, err
	}
	v, ok := scalarOf(fp["value"])
	if !ok {
		return nil, parsingError("[%s] query does not support [value] of that type", name)
	}
	if ci, has := fp["case_insensitive"]; has {
		var on bool
		if json.Unmarshal(ci, &on) != nil {
			return nil, parsingError("[%s] failed to parse field [case_insensitive]", name)
		}
		if on {
			return nil, parsingError("[eventpipe] [%s] query option [case_insensitive] is not supported by this server", name)
		}
	}
	b, err := boostOf(name, fp)
	if err != nil {
		return nil, err
	}
	q, err := c.termQuery(field, c.m.lookup(field), v)
	if err != nil {
		return nil, err
	}
	return withBoost(q, b), nil
}

func compileTerms(c *qctx, name string, p map[string]json.RawMessage) (query.Query, *esError) {
	field, raw, err := singleField(name, p, "boost", "_name")
	if err != nil {
		return nil, err
	}
	if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '{' {
		return nil, parsingError("[eventpipe] terms lookup (a document's values as terms) is not supported by this server")
	}
	var vals []any
	if err := decodeJSON(raw, &vals); err != nil {
		return nil, parsingError("[terms] query does not support [%s]", field)
	}
	b, err := boostOf(name, p)
	if err != nil {
		return nil, err
	}
	// TermsQueryBuilder.doToQuery refuses more values than the index's
	// index.max_terms_count, on the shard.
	maxTerms := c.maxTerms
	if maxTerms <= 0 {
		maxTerms = defaultMaxTermsCount
	}
	if len(vals) > maxTerms {
		return nil, shardFailure(c.index, illegalArgument("The number of terms [%d] used in the Terms Query request has exceeded the allowed maximum of [%d]. This maximum can be set by changing the [index.max_terms_count] index level setting.", len(vals), maxTerms))
	}
	if q, ok := c.metaFieldQuery(field, vals); ok {
		return withBoost(q, b), nil
	}
	fm := c.m.lookup(field)
	if len(vals) == 0 {
		return query.NewMatchNoneQuery(), nil
	}
	qs := make([]query.Query, 0, len(vals))
	for _, v := range vals {
		if v == nil {
			continue
		}
		q, err := c.termQuery(field, fm, v)
		if err != nil {
			return nil, err
		}
		qs = append(qs, q)
	}
	return withBoost(query.NewDisjunctionQuery(qs), b), nil
}

func compileIDs(c *qctx, name string, p map[string]json.RawMessage) (query.Query, *esError) {
	if err := checkKnown(name, p, "values", "boost", "_name"); err != nil {
		return nil, err
	}
	// Elasticsearch reads each value as text, so numbers match the ids
	// that are their string form.
	var ids []string
	if raw, ok := p["values"]; ok {
		var vals []any
		if err := decodeJSON(raw, &vals); err != nil {
			return nil, parsingError("[ids] failed to parse field [values]")
		}
		for _, v := range vals {
			s, ok := scalarString(v)
			if !ok {
				return nil, parsingError("[ids] failed to parse field [values]")
			}
			ids = append(ids, s)
		}
	}
	b, err := boostOf(name, p)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return query.NewMatchNoneQuery(), nil
	}
	if c.maxResultWindow > 0 && len(ids) > c.maxResultWindow {
		// IdsQueryBuilder.doToQuery
		return nil, queryShardErr("failed to create query: Too many ids specified, allowed max result window is [%d]", c.maxResultWindow)
	}
	return withBoost(query.NewDocIDQuery(ids), b), nil
}

func compileExists(c *qctx, name string, p map[string]json.RawMessage) (query.Query, *esError) {
	if err := checkKnown(name, p, "field", "boost", "_name"); err != nil {
		return nil, err
	}
	var field string
	if err := json.Unmarshal(p["field"], &field); err != nil || field == "" {
		return nil, parsingError("[exists] must be provided with a [field]")
	}
	var paths []string
	if strings.Contains(field, "*") {
		for _, lp := range c.m.leafPaths() {
			if ok, _ := path.Match(field, lp); ok {
				paths = append(paths, lp)
			}
		}
	} else if c.m.lookup(field) != nil {
		paths = []string{field}
	} else if field == "_id" || field == "_index" || field == "_source" || field == "_seq_no" || field == "_version" || field == "_primary_term" {
		// Every document has these metadata fields.
		return anyOf(name, p, []query.Query{query.NewMatchAllQuery()})
	}
	if len(paths) == 0 {
		return query.NewMatchNoneQuery(), nil
	}
	qs := make([]query.Query, 0, len(paths))
	for _, f := range paths {
		q := query.NewTermQuery(f)
		q.SetField(fieldFieldNames)
		qs = append(qs, q)
	}
	return anyOf(name, p, qs)
}

// anyOf combines alternative queries under the boost of query name: no
// alternative matches nothing, one stands alone, more form a disjunction.
func anyOf(name string, p map[string]json.RawMessage, qs []query.Query) (query.Query, *esError) {
	b, err := boostOf(name, p)
	if err != nil {
		return nil, err
	}
	switch len(qs) {
	case 0:
		return query.NewMatchNoneQuery(), nil
	case 1:
		return withBoost(qs[0], b), nil
	}
	return withBoost(query.NewDisjunctionQuery(qs), b), nil
}

func compileRange(c *qctx, name string, p map[string]json.RawMessage) (query.Query, *esError) {
	field, raw, err := singleField(name, p)
	if err != nil {
		return nil, err
	}
	var rp map[string]json.RawMessage
	if err := decodeJSON(raw, &rp); err != nil || rp == nil {
		return nil, parsingError("[range] query malformed, no start_object after query name")
	}
	type bound struct {
		v    any
		incl bool
		set  bool
	}
	var lo, hi bound
	var format, tz string
	b := 1.0
	for k, v := range rp {
		var x any
		_ = decodeJSON(v, &x)
		switch k {
		case "gt":
			lo = bound{x, false, x != nil}
		case "gte", "from":
			lo = bound{x, true, x != nil}
		case "lt":
			hi = bound{x, false, x != nil}
		case "lte", "to":
			hi = bound{x, true, x != nil}
		case "include_lower":
			if bv, ok := x.(bool); ok {
				lo.incl = bv
			}
		case "include_upper":
			if bv, ok := x.(bool); ok {
				hi.incl = bv
			}
		case "format":
			format, _ = x.(string)
		case "time_zone":
			tz, _ = x.(string)
		case "boost":
			f, ok := x.(json.Number)
			if !ok {
				return nil, parsingError("[range] failed to parse field [boost]")
			}
			b, _ = f.Float64()
		case "relation", "_name":
		default:
			return nil, parsingError("[range] query does not support [%s]", k)
		}
	}
	fm := c.m.lookup(field)
	if fm == nil || fm.Kind == kindObject {
		return query.NewMatchNoneQuery(), nil
	}
	if tz != "" && fm.Kind != kindDate {
		return nil, queryShardErr("[range] time_zone can not be applied to non date field [%s]", field)
	}
	switch fm.Kind {
	case kindNumber:
		var min, max *float64
		if lo.set {
			f, err := toNumber(lo.v, "double")
			if err != nil {
				return nil, queryShardErr("failed to create query: %s", err.Error())
			}
			min = &f
		}
		if hi.set {
			f, err := toNumber(hi.v, "double")
			if err != nil {
				return nil, queryShardErr("failed to create query: %s", err.Error())
			}
			max = &f
		}
		return withBoost(numRange(field, min, max, lo.incl || !lo.set, hi.incl || !hi.set), b), nil
	case kindDate:
		df := fm.dates
		if format != "" {
			var ferr error
			df, ferr = compileDateFormat(format)
			if ferr != nil {
				return nil, parsingError("[range] failed to parse format [%s]", format)
			}
		}
		var loc *time.Location
		if tz != "" {
			var lerr error
			loc, lerr = parseTimeZone(tz)
			if lerr != nil {
				return nil, parsingError("[range] failed to parse time_zone [%s]", tz)
			}
		}
		var min, max *float64
		if lo.set {
			// gt rounds up, gte rounds down.
			ms, err := parseDateMath(lo.v, df, c.now, !lo.incl, loc)
			if err != nil {
				return nil, newErr(http.StatusBadRequest, "parse_exception", "%s", err.Error())
			}
			f := float64(ms)
			min = &f
		}
		if hi.set {
			// lte rounds up, lt rounds down.
			ms, err := parseDateMath(hi.v, df, c.now, hi.incl, loc)
			if err != nil {
				return nil, newErr(http.StatusBadRequest, "parse_exception", "%s", err.Error())
			}
			f := float64(ms)
			max = &f
		}
		return withBoost(numRange(field, min, max, lo.incl || !lo.set, hi.incl || !hi.set), b), nil
	default:
		var min, max string
		if lo.set {
			min, _ = scalarString(lo.v)
		}
		if hi.set {
			max, _ = scalarString(hi.v)
		}
		li, hincl := lo.incl, hi.incl
		q := query.NewTermRangeInclusiveQuery(min, max, &li, &hincl)
		q.SetField(field)
		return withBoost(q, b), nil
	}
}

func parseTimeZone(tz string) (*time.Location, error) {
	if tz == "Z" || strings.EqualFold(tz, "UTC") {
		return time.UTC, nil
	}
	if len(tz) >= 3 && (tz[0] == '+' || tz[0] == '-') {
		digits := strings.ReplaceAll(tz[1:], ":", "")
		if len(digits) != 2 && len(digits) != 4 {
			return nil, fmt.Errorf("bad offset")
		}
		h, err := strconv.Atoi(digits[:2])
		if err != nil {
			return nil, err
		}
		m := 0
		if len(digits) == 4 {
			if m, err = strconv.Atoi(digits[2:]); err != nil {
				return nil, err
			}
		}
		off := h*3600 + m*60
		if tz[0] == '-' {
			off = -off
		}
		return time.FixedZone(tz, off), nil
	}
	return time.LoadLocation(tz)
}

// minimumShouldMatch resolves ES's minimum_should_match forms: integers,
// negative integers and (negative) percentages.
func minimumShouldMatch(raw json.RawMessage, n int) (int, *esError) {
	var v any
	if err := decodeJSON(raw, &v); err != nil {
		return 0, parsingError("[minimum_should_match] malformed")
	}
	s, _ := scalarString(v)
	s = strings.TrimSpace(s)
	var r int
	if strings.HasSuffix(s, "%") {
		pct, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
		if err != nil {
			return 0, parsingError("[minimum_should_match] malformed value [%s]", s)
		}
		if pct < 0 {
			r = n - int(math.Floor(float64(n)*(-pct)/100))
		} else {
			r = int(math.Floor(float64(n) * pct / 100))
		}
	} else {
		i, err := strconv.Atoi(s)
		if err != nil {
			return 0, parsingError("[minimum_should_match] malformed value [%s]", s)
		}
		if i < 0 {
			r = n + i
		} else {
			r = i
		}
	}
	return max(0, r), nil
}

// matchQuery builds a full-text match on one field.
func (c *qctx) matchQuery(field string, fm *fieldMapping, text any, operator string, msm json.RawMessage, fuzziness string, prefixLen int, zeroAll bool) (query.Query, *esError) {
	if q, ok := c.metaFieldQuery(field, []any{text}); ok {
		return q, nil
	}
	if fm == nil || fm.Kind == kindObject {
		return query.NewMatchNoneQuery(), nil
	}
	if fm.Kind != kindText {
		return c.termQuery(field, fm, text)
	}
	s, _ := scalarString(text)
	terms := fm.analyze(s)
	if len(terms) == 0 {
		if zeroAll {
			return query.NewMatchAllQuery(), nil
		}
		return query.NewMatchNoneQuery(), nil
	}
	qs := make([]query.Query, 0, len(terms))
	for _, t := range terms {
		if f := fuzzyEdits(fuzziness, t); f > 0 {
			fq := query.NewFuzzyQuery(t)
			fq.SetField(field)
			fq.SetFuzziness(f)
			fq.SetPrefix(prefixLen) // the leading characters that must match exactly
			qs = append(qs, fq)
			continue
		}
		tq := query.NewTermQuery(t)
		tq.SetField(field)
		qs = append(qs, tq)
	}
	return combineTerms(qs, operator, msm)
}

// combineTerms joins the per-term queries of a match query: all of them
// with operator and, else any of them, or minimum_should_match of them.
func combineTerms(qs []query.Query, operator string, msm json.RawMessage) (query.Query, *esError) {
	if strings.EqualFold(operator, "and") {
		if len(qs) == 1 {
			return qs[0], nil
		}
		return query.NewConjunctionQuery(qs), nil
	}
	dq := query.NewDisjunctionQuery(qs)
	if msm != nil {
		n, err := minimumShouldMatch(msm, len(qs))
		if err != nil {
			return nil, err
		}
		if n > len(qs) {
			return query.NewMatchNoneQuery(), nil
		}
		dq.SetMin(float64(max(n, 1)))
	}
	if len(qs) == 1 {
		return qs[0], nil
	}
	return dq, nil
}

func fuzzyEdits(f, term string) int {
	switch strings.ToUpper(f) {
	case "", "0":
		return 0
	case "1":
		return 1
	case "2":
		return 2
	case "AUTO":
		n := len([]rune(term))
		switch {
		case n < 3:
			return 0
		case n <= 5:
			return 1
		default:
			return 2
		}
	}
	return 0
}

func compileMatch(c *qctx, name string, p map[string]json.RawMessage) (query.Query, *esError) {
	field, mp, err := fieldQuery(name, p, "query")
	if err != nil {
		return nil, err
	}
	if err := checkKnown(name, mp, "query", "operator", "minimum_should_match", "boost", "analyzer",
		"fuzziness", "zero_terms_query", "lenient", "prefix_length", "max_expansions", "fuzzy_transpositions",
		"auto_generate_synonyms_phrase_query", "_name"); err != nil {
		return nil, err
	}
	v, ok := scalarOf(mp["query"])
	if !ok {
		return nil, parsingError("[match] unknown token [START_OBJECT] after [query]")
	}
	var op, fuzz, zero string
	_ = json.Unmarshal(mp["operator"], &op)
	if op != "" && !strings.EqualFold(op, "or") && !strings.EqualFold(op, "and") {
		_, oerr := parseOperator(op) // Operator.fromString
		return nil, oerr
	}
	if f, ok := mp["fuzziness"]; ok {
		var fv any
		_ = decodeJSON(f, &fv)
		fuzz, _ = scalarString(fv)
	}
	_ = json.Unmarshal(mp["zero_terms_query"], &zero)
	b, err := boostOf(name, mp)
	if err != nil {
		return nil, err
	}
	lenient, err := boolOption(name, "lenient", mp)
	if err != nil {
		return nil, err
	}
	if err := refuseNoTranspositions(name, mp); err != nil {
		return nil, err
	}
	fm, err := withAnalyzer(name, c.m.lookup(field), mp["analyzer"])
	if err != nil {
		return nil, err
	}
	prefixLen, err := intOption(name, "prefix_length", mp)
	if err != nil {
		return nil, err
	}
	q, err := c.matchQuery(field, fm, v, op, mp["minimum_should_match"], fuzz, prefixLen, strings.EqualFold(zero, "all"))
	if err != nil {
		if lenient && err.typ == "query_shard_exception" {
			// lenient: a value the field's type cannot hold matches nothing.
			return query.NewMatchNoneQuery(), nil
		}
		return nil, err
	}
	return withBoost(q, b), nil
}

// multiMatchTarget is one field a multi_match query searches.
type multiMatchTarget struct {
	field string
	fm    *fieldMapping
	boost float64
}

// compileMultiMatch follows Elasticsearch's multi_match types:
//
//   - best_fields (default): a match query per field (operator and
//     minimum_should_match apply within each field), combined as dis_max
//     with tie_breaker (default 0).
//   - most_fields: the same per-field match queries with their scores
//     summed (dis_max with tie_breaker 1, as Elasticsearch does).
//   - cross_fields: term-centric. Fields are grouped by analyzer; in each
//     group every analysed term is looked for in any of the group's fields
//     (a dis_max over the fields, field boosts applied), and operator and
//     minimum_should_match count those terms. Keyword, numeric, date and
//     boolean fields form one group whose single term is the whole query
//     value. The groups are combined as dis_max with tie_breaker.
func compileMultiMatch(c *qctx, name string, p map[string]json.RawMessage) (query.Query, *esError) {
	if err := checkKnown(name, p, "query", "fields", "type", "operator", "minimum_should_match", "boost",
		"fuzziness", "zero_terms_query", "lenient", "tie_breaker", "analyzer", "prefix_length",
		"max_expansions", "auto_generate_synonyms_phrase_query", "fuzzy_transpositions", "_name"); err != nil {
		return nil, err
	}
	v, ok := scalarOf(p["query"])
	if !ok {
		return nil, parsingError("[multi_match] requires query value")
	}
	var typ, op, fuzz, zero string
	_ = json.Unmarshal(p["type"], &typ)
	tie := 0.0
	switch typ {
	case "", "best_fields", "cross_fields":
	case "most_fields":
		tie = 1
	default:
		return nil, parsingError("[eventpipe] multi_match type [%s] is not supported by this server", typ)
	}
	if raw, ok := p["tie_breaker"]; ok {
		var tv any
		_ = decodeJSON(raw, &tv)
		ts, _ := scalarString(tv)
		f, err := strconv.ParseFloat(ts, 64)
		if err != nil {
			return nil, parsingError("[multi_match] failed to parse field [tie_breaker]")
		}
		tie = f
	}
	_ = json.Unmarshal(p["operator"], &op)
	if op != "" && !strings.EqualFold(op, "or") && !strings.EqualFold(op, "and") {
		_, oerr := parseOperator(op) // Operator.fromString
		return nil, oerr
	}
	if f, ok := p["fuzziness"]; ok {
		var fv any
		_ = decodeJSON(f, &fv)
		fuzz, _ = scalarString(fv)
		if typ == "cross_fields" {
			return nil, parsingError("Fuzziness not allowed for type [%s]", typ)
		}
	}
	_ = json.Unmarshal(p["zero_terms_query"], &zero)
	zeroAll := strings.EqualFold(zero, "all")
	var fields []string
	if raw, ok := p["fields"]; ok {
		var one string
		if err := json.Unmarshal(raw, &fields); err != nil {
			if err := json.Unmarshal(raw, &one); err != nil {
				return nil, parsingError("[multi_match] failed to parse field [fields]")
			}
			fields = []string{one}
		}
	}
	if len(fields) == 0 {
		fields = []string{"*"}
	}
	lenient, lerr := boolOption(name, "lenient", p)
	if lerr != nil {
		return nil, lerr
	}
	if err := refuseNoTranspositions(name, p); err != nil {
		return nil, err
	}
	if len(fields) == 1 && (fields[0] == "*" || fields[0] == "*.*") {
		lenient = true // an all-fields query is always lenient
	}
	var targets []multiMatchTarget
	for _, f := range fields {
		boost := 1.0
		if i := strings.LastIndexByte(f, '^'); i > 0 {
			bv, err := strconv.ParseFloat(f[i+1:], 64)
			if err != nil {
				return nil, parsingError("[multi_match] malformed boost in field [%s]", f)
			}
			f, boost = f[:i], bv
		}
		if strings.Contains(f, "*") {
			for _, lp := range c.m.leafPaths() {
				fm := c.m.lookup(lp)
				if ok, _ := path.Match(f, lp); ok && (fm.Kind == kindText || fm.Kind == kindKeyword) {
					targets = append(targets, multiMatchTarget{lp, fm, boost})
				}
			}
			continue
		}
		fm := c.m.lookup(f)
		if fm == nil || fm.Kind == kindObject {
			continue // unmapped fields are ignored
		}
		if fm.Kind != kindText && fm.Kind != kindKeyword {
			// A value the field's type cannot hold is an error unless
			// lenient (MultiMatchQueryBuilder, as match).
			if _, err := c.termQuery(f, fm, v); err != nil {
				if lenient {
					continue
				}
				return nil, err
			}
		}
		targets = append(targets, multiMatchTarget{f, fm, boost})
	}
	if len(targets) == 0 {
		return query.NewMatchNoneQuery(), nil
	}
	for i := range targets {
		fm, err := withAnalyzer(name, targets[i].fm, p["analyzer"])
		if err != nil {
			return nil, err
		}
		targets[i].fm = fm
	}
	var qs []query.Query
	var err *esError
	if typ == "cross_fields" {
		qs, err = c.crossFieldsGroups(targets, v, op, p["minimum_should_match"], tie)
	} else {
		var prefixLen int
		if prefixLen, err = intOption(name, "prefix_length", p); err != nil {
			return nil, err
		}
		qs, err = c.perFieldMatches(targets, v, op, p["minimum_should_match"], fuzz, prefixLen)
	}
	if err != nil {
		return nil, err
	}
	if len(qs) == 0 {
		// The query text analysed to no terms in any field.
		if zeroAll {
			return query.NewMatchAllQuery(), nil
		}
		return query.NewMatchNoneQuery(), nil
	}
	b, err := boostOf(name, p)
	if err != nil {
		return nil, err
	}
	return withBoost(newDisMax(qs, tie), b), nil
}

// perFieldMatches builds one match query per field (best_fields and
// most_fields), leaving out fields where the text analyses to no terms.
func (c *qctx) perFieldMatches(targets []multiMatchTarget, v any, op string, msm json.RawMessage, fuzz string, prefixLen int) ([]query.Query, *esError) {
	var qs []query.Query
	for _, t := range targets {
		q, err := c.matchQuery(t.field, t.fm, v, op, msm, fuzz, prefixLen, true)
		if err != nil {
			return nil, err
		}
		if _, noTerms := q.(*query.MatchAllQuery); noTerms {
			continue
		}
		qs = append(qs, withBoost(q, t.boost))
	}
	return qs, nil
}

// crossFieldsGroups builds the term-centric query of each analyzer group
// (cross_fields).
func (c *qctx) crossFieldsGroups(targets []multiMatchTarget, v any, op string, msm json.RawMessage, tie float64) ([]query.Query, *esError) {
	const exact = "\x00exact"
	var order []string
	groups := map[string][]multiMatchTarget{}
	for _, t := range targets {
		key := exact
		if t.fm.Kind == kindText {
			key = t.fm.Analyzer
			if key == "" || key == "default" {
				key = "standard"
			}
		}
		if _, seen := groups[key]; !seen {
			order = append(order, key)
		}
		groups[key] = append(groups[key], t)
	}
	s, _ := scalarString(v)
	var qs []query.Query
	for _, key := range order {
		fields := groups[key]
		var clauses []query.Query
		if key == exact {
			// The whole value is one term, looked for in every field.
			var alts []query.Query
			for _, t := range fields {
				q, err := c.termQuery(t.field, t.fm, v)
				if err != nil {
					continue // lenient
				}
				alts = append(alts, withBoost(q, t.boost))
			}
			if len(alts) > 0 {
				clauses = append(clauses, newDisMax(alts, tie))
			}
		} else {
			for _, term := range fields[0].fm.analyze(s) {
				alts := make([]query.Query, 0, len(fields))
				for _, t := range fields {
					tq := query.NewTermQuery(term)
					tq.SetField(t.field)
					alts = append(alts, withBoost(tq, t.boost))
				}
				clauses = append(clauses, newDisMax(alts, tie))
			}
		}
		if len(clauses) == 0 {
			continue
		}
		q, err := combineTerms(clauses, op, msm)
		if err != nil {
			return nil, err
		}
		qs = append(qs, q)
	}
	return qs, nil
}

func compilePrefix(c *qctx, name string, p map[string]json.RawMessage) (query.Query, *esError) {
	field, fp, err := fieldQuery(name, p, "value")
	if err != nil {
		return nil, err
	}
	return c.patternQuery(name, field, fp, func(v string) query.FieldableQuery { return query.NewPrefixQuery(v) })
}

func compileWildcard(c *qctx, name string, p map[string]json.RawMessage) (query.Query, *esError) {
	field, raw, err := singleField(name, p)
	if err != nil {
		return nil, err
	}
	fp := map[string]json.RawMessage{}
	t := bytes.TrimSpace(raw)
	if len(t) > 0 && t[0] == '{' {
		if err := decodeJSON(t, &fp); err != nil {
			return nil, parsingError("[wildcard] malformed query")
		}
		if w, ok := fp["wildcard"]; ok {
			fp["value"] = w
		}
	} else {
		fp["value"] = t
	}
	return c.patternQuery(name, field, fp, func(v string) query.FieldableQuery { return query.NewWildcardQuery(v) })
}

// patternQuery finishes a prefix or wildcard query: a string pattern that
// only matches keyword and text fields.
func (c *qctx) patternQuery(name, field string, fp map[string]json.RawMessage, build func(string) query.FieldableQuery) (query.Query, *esError) {
	if err := checkKnown(name, fp, "value", "wildcard", "boost", "rewrite", "case_insensitive", "_name"); err != nil {
		return nil, err
	}
	if on, err := boolOption(name, "case_insensitive", fp); err != nil {
		return nil, err
	} else if on {
		return nil, parsingError("[eventpipe] [%s] query option [case_insensitive] is not supported by this server", name)
	}
	if field == "_id" || field == "_index" {
		return nil, parsingError("[eventpipe] [%s] queries on [%s] are not supported by this server", name, field)
	}
	var v string
	if err := json.Unmarshal(fp["value"], &v); err != nil {
		return nil, parsingError("[%s] value must be a string", name)
	}
	b, err := boostOf(name, fp)
	if err != nil {
		return nil, err
	}
	fm := c.m.lookup(field)
	if fm == nil || (fm.Kind != kindKeyword && fm.Kind != kindText) {
		return query.NewMatchNoneQuery(), nil
	}
	q := build(v)
	q.SetField(field)
	return withBoost(q, b), nil
}

func compileConstantScore(c *qctx, name string, p map[string]json.RawMessage) (query.Query, *esError) {
	if err := checkKnown(name, p, "filter", "boost", "_name"); err != nil {
		return nil, err
	}
	raw, ok := p["filter"]
	if !ok {
		return nil, parsingError("[constant_score] requires a 'filter' element")
	}
	f, err := c.compile(raw)
	if err != nil {
		return nil, err
	}
	b, err := boostOf(name, p)
	if err != nil {
		return nil, err
	}
	all := query.NewMatchAllQuery()
	all.SetBoost(b)
	bq := query.NewBooleanQuery([]query.Query{all}, nil, nil)
	bq.AddFilter(f)
	return bq, nil
}

// clauses compiles a bool clause given as one object or an array.
func (c *qctx) clauses(raw json.RawMessage) ([]query.Query, *esError) {
	t := bytes.TrimSpace(raw)
	var items []json.RawMessage
	if len(t) > 0 && t[0] == '[' {
		if err := json.Unmarshal(t, &items); err != nil {
			return nil, parsingError("[bool] malformed clause array")
		}
	} else {
		items = []json.RawMessage{t}
	}
	out := make([]query.Query, 0, len(items))
	for _, it := range items {
		q, err := c.compile(it)
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, nil
}

func compileBool(c *qctx, name string, p map[string]json.RawMessage) (query.Query, *esError) {
	var must, filter, should, mustNot []query.Query
	var msmRaw json.RawMessage
	b := 1.0
	for k, v := range p {
		var err *esError
		switch k {
		case "must":
			must, err = c.clauses(v)
		case "filter":
			filter, err = c.clauses(v)
		case "should":
			should, err = c.clauses(v)
		case "must_not", "mustNot":
			mustNot, err = c.clauses(v)
		case "minimum_should_match":
			msmRaw = v
		case "boost":
			b, err = boostOf(name, p)
		case "adjust_pure_negative", "_name":
		default:
			return nil, parsingError("[bool] query does not support [%s]", k)
		}
		if err != nil {
			return nil, err
		}
	}
	minShould := -1
	if msmRaw != nil {
		n, err := minimumShouldMatch(msmRaw, len(should))
		if err != nil {
			return nil, err
		}
		minShould = n
	}
	return boolQuery(must, filter, should, mustNot, minShould, b), nil
}

// boolQuery combines clauses as Elasticsearch's bool query does;
// minShould < 0 means the default (1 when there is no must or filter).
func boolQuery(must, filter, should, mustNot []query.Query, minShould int, b float64) query.Query {
	if len(must)+len(filter)+len(should)+len(mustNot) == 0 {
		return withBoost(query.NewMatchAllQuery(), b)
	}
	if minShould < 0 {
		minShould = 0
		if len(must)+len(filter) == 0 && len(should) > 0 {
			minShould = 1
		}
	}
	if minShould > len(should) {
		return query.NewMatchNoneQuery()
	}
	bq := query.NewBooleanQuery(nil, nil, nil)
	switch {
	case len(must) > 0:
		bq.Must = query.NewConjunctionQuery(must)
	case minShould == 0 || len(should) == 0:
		// Only filters / must_not / optional shoulds: every document is a
		// candidate and non-scoring clauses contribute a score of 0.
		all := query.NewMatchAllQuery()
		all.SetBoost(0)
		bq.Must = query.NewConjunctionQuery([]query.Query{all})
	}
	if len(should) > 0 {
		dq := query.NewDisjunctionQuery(should)
		dq.SetMin(float64(minShould))
		bq.Should = dq
	}
	if len(mustNot) > 0 {
		bq.MustNot = query.NewDisjunctionQuery(mustNot)
	}
	if len(filter) > 0 {
		if len(filter) == 1 {
			bq.AddFilter(filter[0])
		} else {
			bq.AddFilter(query.NewConjunctionQuery(filter))
		}
	}
	return withBoost(bq, b)
}

// boolOption reads an optional boolean parameter of query name.
func boolOption(name, key string, p map[string]json.RawMessage) (bool, *esError) {
	raw, ok := p[key]
	if !ok {
		return false, nil
	}
	var v any
	if err := decodeJSON(raw, &v); err != nil {
		return false, parsingError("[%s] failed to parse field [%s]", name, key)
	}
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		switch x {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
	}
	return false, parsingError("[%s] failed to parse field [%s]", name, key)
}

// withAnalyzer applies the analyzer parameter of a full-text query: the
// named analyzer replaces the text field's own for analysing the query
// text (MatchQueryBuilder refuses an unknown one on the shard with
// "[match] analyzer [x] not found").
func withAnalyzer(name string, fm *fieldMapping, raw json.RawMessage) (*fieldMapping, *esError) {
	if raw == nil {
		return fm, nil
	}
	var a string
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, parsingError("[%s] failed to parse field [analyzer]", name)
	}
	if analyzerFor(a) == nil {
		return nil, queryShardErr("[%s] analyzer [%s] not found", name, a)
	}
	if fm == nil || fm.Kind != kindText {
		return fm, nil
	}
	cp := *fm
	cp.Analyzer = a
	return &cp, nil
}

// intOption reads an optional non-negative integer parameter of query name.
func intOption(name, key string, p map[string]json.RawMessage) (int, *esError) {
	raw, ok := p[key]
	if !ok {
		return 0, nil
	}
	n, err := intParam(raw)
	if err != nil || n < 0 {
		return 0, parsingError("[%s] failed to parse field [%s]", name, key)
	}
	return n, nil
}

// refuseNoTranspositions refuses fuzzy_transpositions=false: fuzzy
// matching here always counts a transposition as one edit, as
// Elasticsearch does by default.
func refuseNoTranspositions(name string, p map[string]json.RawMessage) *esError {
	if _, has := p["fuzzy_transpositions"]; !has {
		return nil
	}
	on, err := boolOption(name, "fuzzy_transpositions", p)
	if err != nil {
		return err
	}
	if !on {
		return parsingError("[eventpipe] [%s] option [fuzzy_transpositions] false is not supported by this server", name)
	}
	return nil
}
