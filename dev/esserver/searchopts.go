package esserver

import (
	"context"
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	bindex "github.com/blevesearch/bleve_index_api"
)

// Search options that shape the collection of hits: min_score,
// terminate_after and search_after; and the nanosecond sort values of
// date_nanos fields.

// limitSearcher drops hits scoring below min_score (Elasticsearch's
// MinimumScoreCollector) and stops after terminate_after hits (its
// EarlyTerminatingCollector, which reports terminated_early when a further
// hit existed). Both act before counting, aggregating and sorting, as in
// Elasticsearch, so they shape hits.total and aggregations too.
type limitSearcher struct {
	search.Searcher
	minScore   *float64
	allow      map[string]bool // post_filter: the internal ids kept (nil: all)
	limit      int
	n          int
	terminated bool
}

// limitHits wraps s for req; the wrapper is transparent without min_score
// and terminate_after.
func limitHits(s search.Searcher, req *searchRequest) *limitSearcher {
	return &limitSearcher{Searcher: s, minScore: req.minScore, limit: req.terminateAfter}
}

func (s *limitSearcher) accept(ctx *search.SearchContext, d *search.DocumentMatch) bool {
	if s.allow != nil && !s.allow[string(d.IndexInternalID)] {
		ctx.DocumentMatchPool.Put(d)
		return false
	}
	if s.minScore != nil {
		sc := d.Score
		if math.IsNaN(sc) || math.IsInf(sc, 0) {
			sc = 0 // rendered as 0 (see searchOne)
		}
		if sc < *s.minScore {
			ctx.DocumentMatchPool.Put(d)
			return false
		}
	}
	return true
}

func (s *limitSearcher) next(ctx *search.SearchContext, d *search.DocumentMatch, err error) (*search.DocumentMatch, error) {
	for {
		if err != nil || d == nil {
			return d, err
		}
		if s.accept(ctx, d) {
			break
		}
		d, err = s.Searcher.Next(ctx)
	}
	if s.limit > 0 && s.n >= s.limit {
		// A hit beyond terminate_after: stop here.
		s.terminated = true
		ctx.DocumentMatchPool.Put(d)
		return nil, nil
	}
	s.n++
	return d, nil
}

func (s *limitSearcher) Next(ctx *search.SearchContext) (*search.DocumentMatch, error) {
	if s.terminated {
		return nil, nil
	}
	d, err := s.Searcher.Next(ctx)
	return s.next(ctx, d, err)
}

func (s *limitSearcher) Advance(ctx *search.SearchContext, id bindex.IndexInternalID) (*search.DocumentMatch, error) {
	if s.terminated {
		return nil, nil
	}
	d, err := s.Searcher.Advance(ctx, id)
	return s.next(ctx, d, err)
}

// searchAfterKeys converts search_after values into bleve's sort keys for
// one index (SearchAfterBuilder.buildFieldDoc): one value per sort field,
// numbers for numeric and date fields (dates may also be given in the
// field's format), strings for keywords. Errors are shard failures, as in
// Elasticsearch.
func searchAfterKeys(req *searchRequest, order search.SortOrder, fms []*fieldMapping, indexName string) ([]string, *esError) {
	if req.searchAfter == nil {
		return nil, nil
	}
	fail := func(format string, args ...any) *esError {
		return shardFailure(indexName, illegalArgument(format, args...))
	}
	if len(req.sorts) == 0 || len(req.sorts) == 1 && req.sorts[0].field == "_score" && req.sorts[0].desc {
		// SortBuilder.buildSort drops a lone _score desc sort.
		return nil, fail("Sort must contain at least one field.")
	}
	if len(req.searchAfter) != len(order) {
		return nil, fail("search_after has %d value(s) but sort has %d.", len(req.searchAfter), len(order))
	}
	if req.from > 0 {
		e := newErr(400, "search_exception", "`from` parameter must be set to 0 when `search_after` is used.")
		return nil, shardFailure(indexName, e)
	}
	out := make([]string, len(order))
	for i, v := range req.searchAfter {
		if v == nil {
			return nil, illegalArgument("[eventpipe] null values in [search_after] are not supported by this server")
		}
		s, ok := scalarString(v)
		if !ok {
			return nil, parsingError("[search_after] values must be numbers, strings or booleans")
		}
		switch so := order[i].(type) {
		case *search.SortScore:
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, fail("Failed to parse search_after value for field [_score].")
			}
			out[i] = strconv.FormatFloat(f, 'g', -1, 64)
		case *search.SortDocID:
			out[i] = s
		case *search.SortField:
			fm := fms[i]
			switch {
			case fm == nil:
				out[i] = s
			case fm.Kind == kindNumber:
				f, err := toNumber(v, fm.Type)
				if err != nil {
					return nil, fail("Failed to parse search_after value for field [%s].", so.Field)
				}
				out[i] = strconv.FormatFloat(f, 'g', -1, 64)
			case fm.Kind == kindDate:
				var ms int64
				if _, isNum := v.(json.Number); isNum {
					n, err := strconv.ParseFloat(s, 64)
					if err != nil {
						return nil, fail("Failed to parse search_after value for field [%s].", so.Field)
					}
					ms = int64(n)
					if fm.Type == "date_nanos" {
						ms = int64(math.Floor(n / 1e6))
					}
				} else {
					df := fm.dates
					if sf := sortFormat(req.sorts[i]); sf != nil {
						df = sf
					}
					var err error
					if ms, err = df.parse(v); err != nil {
						return nil, shardFailure(indexName, newErr(400, "parse_exception", "%s", err.Error()))
					}
				}
				out[i] = strconv.FormatInt(ms, 10)
			case fm.Kind == kindBool:
				switch s {
				case "true", "1":
					out[i] = "T"
				case "false", "0":
					out[i] = "F"
				default:
					return nil, fail("Failed to parse search_after value for field [%s].", so.Field)
				}
			default:
				out[i] = s
			}
		default:
			out[i] = s
		}
	}
	return out, nil
}

// sortFormat is the compiled format option of a date sort, or nil.
func sortFormat(ss sortSpec) *dateFormat {
	if ss.format == "" {
		return nil
	}
	df, err := compileDateFormat(ss.format)
	if err != nil {
		return nil
	}
	return df
}

// settingInt reads an integer index setting (0 when unset or invalid).
func settingInt(st *indexSettings, key string) int {
	if st == nil {
		return 0
	}
	n, _ := strconv.Atoi(st.raw[key])
	return n
}

// settingList reads a list index setting ("a,b" or a JSON array).
func settingList(st *indexSettings, key string) []string {
	if st == nil {
		return nil
	}
	v := strings.TrimSpace(st.raw[key])
	if v == "" {
		return nil
	}
	var arr []string
	if json.Unmarshal([]byte(v), &arr) == nil {
		return arr
	}
	var out []string
	for _, f := range strings.Split(strings.Trim(v, "[]"), ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// nanosSortValue is the sort value of a date_nanos field: nanoseconds
// since the epoch, read from the hit's _source because the index keeps
// milliseconds. The value chosen among several is the smallest for
// ascending sorts (mode min) and the largest for descending (mode max).
func nanosSortValue(src []byte, field string, fm *fieldMapping, ss sortSpec) (int64, bool) {
	var doc map[string]any
	if decodeJSON(src, &doc) != nil {
		return 0, false
	}
	var vals []any
	var walk func(v any, rest []string)
	walk = func(v any, rest []string) {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				walk(e, rest)
			}
		case map[string]any:
			if len(rest) == 0 {
				return
			}
			// Dotted keys in the source ("a.b") as well as nested objects.
			for i := len(rest); i >= 1; i-- {
				if sub, ok := x[strings.Join(rest[:i], ".")]; ok {
					walk(sub, rest[i:])
				}
			}
		default:
			if len(rest) == 0 && v != nil {
				vals = append(vals, v)
			}
		}
	}
	walk(doc, strings.Split(field, "."))
	useMax := ss.desc
	switch ss.mode {
	case "min":
		useMax = false
	case "max":
		useMax = true
	}
	found := false
	var best int64
	for _, v := range vals {
		n, err := fm.dates.parseNanos(v)
		if err != nil {
			continue
		}
		if !found || (useMax && n > best) || (!useMax && n < best) {
			best, found = n, true
		}
	}
	return best, found
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// matchingDocs returns the internal ids of the documents q matches.
func matchingDocs(ctx context.Context, r bindex.IndexReader, q query.Query) (map[string]bool, error) {
	s, err := q.Searcher(ctx, r, bleveIndexMapping, search.SearcherOptions{})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	sc := &search.SearchContext{DocumentMatchPool: search.NewDocumentMatchPool(s.DocumentMatchPoolSize(), 0)}
	out := map[string]bool{}
	for {
		d, err := s.Next(sc)
		if err != nil {
			return nil, err
		}
		if d == nil {
			return out, nil
		}
		out[string(d.IndexInternalID)] = true
		sc.DocumentMatchPool.Put(d)
	}
}
