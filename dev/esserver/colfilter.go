package esserver

import (
	"context"
	"math"

	"github.com/blevesearch/bleve/v2/numeric"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/blevesearch/bleve/v2/search/searcher"
	bindex "github.com/blevesearch/bleve_index_api"
)

// Range filters tested against doc-value columns.
//
// bleve evaluates a numeric range as a disjunction over the prefix-coded
// terms that cover it (dozens of posting lists, each segment's), and a
// bool query's filter is a searcher advanced to every candidate of the
// scoring clauses: with a filter that most documents pass, that
// disjunction is advanced once per candidate and dominates the search
// (100k candidates: several milliseconds). Filters do not score, so the
// same hits with the same scores come from testing each candidate's
// values in the column of the field (columns.go) instead, as Lucene's
// IndexOrDocValuesQuery does: a document matches a numeric range when one
// of its values, as the full-precision term bleve indexed, lies within
// the range's bounds computed as bleve's NumericRangeSearcher computes
// them.
//
// boolColumnSearcher builds the searcher of a top-level bool query
// exactly as bleve's BooleanQuery.Searcher does (the same scoring
// searchers, the same FilteringSearcher around them), except that the
// range clauses of its filter on numeric and date fields with doc values
// are tested against columns; the filter's other clauses are still
// searchers, intersected with the column tests. Everything else (nested
// bools, post_filter, queries without such a filter) is left to bleve.
//
// When no score of the search can be observed (hits sorted on fields
// only, without track_scores nor min_score: scoresUnused), the scoring
// clauses are built without scores, as bleve builds filters: the same
// matches in the same order, without reading term frequencies and norms,
// and a bool of must clauses only (or a conjunction of one clause) is
// left out since it matches what its clause matches.

// colFilterMinCandidates is the smallest worst-case number of candidates
// (the scoring clauses' Count) for which range filters read columns:
// below it bleve's range searcher costs little, and a search need not
// build the filter fields' columns (tests lower it).
var colFilterMinCandidates uint64 = 4096

// colRange is a numeric range clause of a filter: a document matches
// when one of its values in column slot lies in [lo, hi] (bleve's
// sortable int64 form of a float64).
type colRange struct {
	slot   int
	lo, hi int64
}

// numericRangeBounds returns the inclusive bounds of q in bleve's
// sortable int64 form, as NewNumericRangeSearcher computes them.
func numericRangeBounds(q *query.NumericRangeQuery) (lo, hi int64) {
	min, max := math.Inf(-1), math.Inf(1)
	if q.Min != nil {
		min = *q.Min
	}
	if q.Max != nil {
		max = *q.Max
	}
	inclMin, inclMax := true, false
	if q.InclusiveMin != nil {
		inclMin = *q.InclusiveMin
	}
	if q.InclusiveMax != nil {
		inclMax = *q.InclusiveMax
	}
	lo = numeric.Float64ToInt64(min)
	if !inclMin && lo != math.MaxInt64 {
		lo++
	}
	hi = numeric.Float64ToInt64(max)
	if !inclMax && hi != math.MinInt64 {
		hi--
	}
	return lo, hi
}

// columnRange returns the range of q as a column test when q is a
// numeric range on a number or date field with doc values.
func columnRange(q query.Query, m *mappings) (string, int64, int64, bool) {
	nq, ok := q.(*query.NumericRangeQuery)
	if !ok || nq.FieldVal == "" {
		return "", 0, 0, false
	}
	fm := m.lookup(nq.FieldVal)
	if fm == nil || (fm.Kind != kindNumber && fm.Kind != kindDate) || (fm.DocValues != nil && !*fm.DocValues) {
		return "", 0, 0, false
	}
	lo, hi := numericRangeBounds(nq)
	return nq.FieldVal, lo, hi, true
}

// colFilter tests candidates against range columns and, for the other
// clauses of the filter, against their searchers.
type colFilter struct {
	v      *colView
	ranges []colRange
	rest   []*filterCursor
}

// filterCursor follows one filter searcher through increasing candidates,
// as bleve's bool filter does.
type filterCursor struct {
	s    search.Searcher
	init bool
	ref  *search.DocumentMatch
	err  error
}

func (fc *filterCursor) accept(sctx *search.SearchContext, d *search.DocumentMatch) bool {
	if fc.err != nil {
		return false
	}
	if !fc.init {
		fc.ref, fc.err = fc.s.Next(sctx)
		if fc.err != nil {
			return false
		}
		fc.init = true
	}
	if fc.ref == nil {
		return false
	}
	cmp := fc.ref.IndexInternalID.Compare(d.IndexInternalID)
	if cmp < 0 {
		sctx.DocumentMatchPool.Put(fc.ref)
		fc.ref, fc.err = fc.s.Advance(sctx, d.IndexInternalID)
		if fc.err != nil || fc.ref == nil {
			return false
		}
		cmp = fc.ref.IndexInternalID.Compare(d.IndexInternalID)
	}
	return cmp == 0
}

func (f *colFilter) accept(sctx *search.SearchContext, d *search.DocumentMatch) bool {
	seg, local := f.v.locate(d.IndexInternalID.Value())
	cols := f.v.cols[seg]
	for _, rg := range f.ranges {
		c := cols[rg.slot]
		if c == nil {
			return false
		}
		ok := false
		for _, x := range c.vals[c.start[local]:c.start[local+1]] {
			if i := numeric.Float64ToInt64(x.f); i >= rg.lo && i <= rg.hi {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	for _, fc := range f.rest {
		if !fc.accept(sctx, d) {
			return false
		}
	}
	return true
}

// colFilteredSearcher closes the filter's remaining searchers with the
// filtered one.
type colFilteredSearcher struct {
	*searcher.FilteringSearcher
	rest []*filterCursor
}

func (s *colFilteredSearcher) Close() error {
	err := s.FilteringSearcher.Close()
	for _, fc := range s.rest {
		if cerr := fc.s.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	return err
}

// boolColumnSearcher returns the searcher of q with its range filters
// read from columns (see above), or nil when q is not a bool query with
// such a filter, when its scoring clauses match too few documents to
// gain from columns, or when columns are disabled. When scoreless, no
// score of the search is observed (scoresUnused): the clauses are built
// without scoring, as bleve builds filters (the same matches, in the same
// order; scores are then 0).
func (ix *index) boolColumnSearcher(ctx context.Context, r bindex.IndexReader, q query.Query, m *mappings, scoreless bool) (search.Searcher, error) {
	if m == nil || ix.cols.disabled.Load() || ix.noColFilter.Load() {
		return nil, nil
	}
	bq, ok := q.(*query.BooleanQuery)
	if !ok || bq.Filter == nil {
		return nil, nil
	}
	clauses := []query.Query{bq.Filter}
	if cq, ok := bq.Filter.(*query.ConjunctionQuery); ok {
		clauses = cq.Conjuncts
	}
	var keys []colKey
	var ranges []colRange
	var others []query.Query
	for _, c := range clauses {
		field, lo, hi, ok := columnRange(c, m)
		if !ok {
			others = append(others, c)
			continue
		}
		k := colKey{field: field, num: true}
		slot := len(keys)
		for i, x := range keys {
			if x == k {
				slot = i
			}
		}
		if slot == len(keys) {
			keys = append(keys, k)
		}
		ranges = append(ranges, colRange{slot: slot, lo: lo, hi: hi})
	}
	if len(ranges) == 0 {
		return nil, nil
	}

	// The scoring clauses, as BooleanQuery.Searcher builds them.
	options := search.SearcherOptions{}
	if scoreless {
		options.Score = "none"
	}
	var opened []search.Searcher
	fail := func(err error) (search.Searcher, error) {
		for _, s := range opened {
			_ = s.Close()
		}
		return nil, err
	}
	clause := func(cq query.Query) (search.Searcher, error) {
		if cq == nil {
			return nil, nil
		}
		s, err := cq.Searcher(ctx, r, bleveIndexMapping, options)
		if err != nil {
			return nil, err
		}
		opened = append(opened, s)
		if _, ok := s.(*searcher.MatchNoneSearcher); ok {
			return nil, nil
		}
		return s, nil
	}
	mustNot, err := clause(bq.MustNot)
	if err != nil {
		return fail(err)
	}
	var must search.Searcher
	if cq, ok := bq.Must.(*query.ConjunctionQuery); ok && scoreless && len(cq.Conjuncts) == 1 {
		// Without scores, a conjunction of one clause matches what the
		// clause matches (unless that is match_none, which bleve's
		// conjunction and bool treat specially: built as usual below).
		s, err := cq.Conjuncts[0].Searcher(ctx, r, bleveIndexMapping, options)
		if err != nil {
			return fail(err)
		}
		if _, none := s.(*searcher.MatchNoneSearcher); none {
			_ = s.Close()
		} else {
			opened = append(opened, s)
			must = s
		}
	}
	if must == nil {
		if must, err = clause(bq.Must); err != nil {
			return fail(err)
		}
	}
	should, err := clause(bq.Should)
	if err != nil {
		return fail(err)
	}
	var driver search.Searcher
	switch {
	case must == nil && should == nil && mustNot == nil:
		// Only a filter: every document is a candidate.
		all, err := searcher.NewMatchAllSearcher(ctx, r, 1.0, options)
		if err != nil {
			return fail(err)
		}
		opened = append(opened, all)
		driver = all
	case scoreless && should == nil && mustNot == nil:
		// Without scores, a bool of must clauses only matches what they
		// match.
		driver = must
	default:
		if must == nil && should == nil {
			all, err := searcher.NewMatchAllSearcher(ctx, r, 1.0, options)
			if err != nil {
				return fail(err)
			}
			opened = append(opened, all)
			must = all
		}
		bs, err := searcher.NewBooleanSearcher(ctx, r, must, should, mustNot, options)
		if err != nil {
			return fail(err)
		}
		driver = bs
	}
	if driver.Count() < colFilterMinCandidates {
		return fail(nil)
	}

	// The filter's other clauses, as searchers without scores.
	f := &colFilter{ranges: ranges}
	filterOptions := search.SearcherOptions{Score: "none"}
	for _, oq := range others {
		s, err := oq.Searcher(ctx, r, bleveIndexMapping, filterOptions)
		if err != nil {
			return fail(err)
		}
		opened = append(opened, s)
		if _, ok := s.(*searcher.MatchNoneSearcher); ok {
			// A conjunction may skip such clauses (query_string mode):
			// leave the whole query to bleve.
			return fail(nil)
		}
		f.rest = append(f.rest, &filterCursor{s: s})
	}
	v, err := ix.cols.view(r, keys)
	if err != nil || v == nil {
		return fail(err)
	}
	f.v = v
	ix.cols.filtered.Add(1)
	fs := searcher.NewFilteringSearcher(ctx, driver, f.accept)
	return &colFilteredSearcher{FilteringSearcher: fs, rest: f.rest}, nil
}
