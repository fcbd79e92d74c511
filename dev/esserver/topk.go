package esserver

import (
	"context"
	"math"
	"sort"

	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/blevesearch/bleve/v2/search/scorer"
	"github.com/blevesearch/bleve/v2/search/searcher"
	bindex "github.com/blevesearch/bleve_index_api"
)

// Top-k retrieval of match queries (MaxScore pruning).
//
// A match query over several terms is a disjunction of term queries, and
// bleve scores every document any of its terms matches: a term found in
// every document ("number" in "number 7") makes each search score the
// whole index even though only the best `from + size` hits are returned
// and, by default, hits.total counts up to 10,000 only (answering "gte"
// beyond, as Elasticsearch does).
//
// maxScoreSearcher reproduces bleve's disjunction (the same term
// searchers, query norm, order of summation and coordination factor, so
// the same scores to the last bit) and, once the hits that must be counted
// have been returned, applies the MaxScore algorithm, as Lucene does for
// Elasticsearch: every term has an upper bound of its BM25 score; once the
// k best scores returned so far (the collector keeps exactly those) exceed
// what a document matching only the terms of lowest bounds could score,
// those terms become non-essential: candidates come from the other terms
// only; a candidate whose essential terms score too little even with the
// bounds of the non-essential ones added is skipped, and the others get
// their full score, the non-essential term searchers advancing to them.
// Skipped documents score at most the k-th
// best returned hit, and ties go to the earlier hit, so the collector's
// top k (hits, order, scores) are exactly those of the full evaluation;
// hits.total is exact until it exceeds track_total_hits, after which it is
// only reported as "gte". When one term alone matches more documents than
// track_total_hits (its posting count excludes deleted documents), the
// total is known to exceed it before any collection: pruning starts at
// once and that count stands for the total (matchesAtLeast).

// boundSlack widens the score bounds far beyond floating-point rounding.
const boundSlack = 1 + 1e-9

// topKEligible reports whether a search may prune: hits ordered by
// descending score only, and nothing else that needs every match
// (aggregations, post_filter, min_score, terminate_after, search_after).
func topKEligible(order search.SortOrder, req *searchRequest, aggs *aggCollector, postFilter query.Query, after []string) bool {
	if len(order) != 1 || aggs != nil || postFilter != nil || after != nil ||
		req.minScore != nil || req.terminateAfter > 0 {
		return false
	}
	ss, ok := order[0].(*search.SortScore)
	return ok && ss.Desc
}

// countUpTo is the number of matches hits.total must count exactly:
// beyond track_total_hits only "gte" is reported.
func countUpTo(req *searchRequest) uint64 {
	if req.trackTotal < 0 {
		return 0
	}
	return uint64(req.trackTotal)
}

// newMaxScoreSearcher returns a pruning searcher for q when q is a plain
// disjunction of BM25-scored term queries (a match query), or nil (the
// caller then uses q's own searcher). k is the number of best hits the
// collector keeps; exact is the number of matches hits.total must count
// exactly: they are all returned before any pruning, unless one term
// alone matches more documents.
func newMaxScoreSearcher(ctx context.Context, r bindex.IndexReader, q query.Query, k int, exact uint64) (search.Searcher, error) {
	tqs, ok := termDisjuncts(q)
	if !ok {
		return nil, nil
	}
	boosts := make(map[search.Searcher]float64, len(tqs))
	list := make(searcher.OrderedSearcherList, 0, len(tqs))
	closeAll := func() {
		for _, s := range list {
			_ = s.Close()
		}
	}
	for _, tq := range tqs {
		s, err := tq.Searcher(ctx, r, bleveIndexMapping, search.SearcherOptions{})
		if err != nil {
			closeAll()
			return nil, err
		}
		list = append(list, s)
		if ts, ok := s.(*searcher.TermSearcher); !ok || ts == nil {
			closeAll()
			return nil, nil
		}
		boosts[s] = tq.Boost()
	}
	// As newDisjunctionSliceSearcher: order by posting count, then the
	// query norm from the weights summed in that order.
	sort.Sort(list)
	sum := 0.0
	for _, s := range list {
		sum += s.Weight()
	}
	qnorm := 1.0 / math.Sqrt(sum)
	for _, s := range list {
		s.SetQueryNorm(qnorm)
	}
	ms := &maxScoreSearcher{
		searchers: list,
		currs:     make([]*search.DocumentMatch, len(list)),
		matching:  make([]*search.DocumentMatch, 0, len(list)),
		matchIdx:  make([]int, 0, len(list)),
		scorer:    scorer.NewDisjunctionQueryScorer(search.SearcherOptions{}),
		k:         k,
		exact:     exact,
	}
	for _, ts := range list {
		ms.atLeast = max(ms.atLeast, ts.Count())
	}
	ms.prune = bm25Fields(r, tqs) && ms.setBounds(boosts, qnorm)
	ms.threshold = math.Inf(-1)
	if k == 0 {
		ms.threshold = math.Inf(1) // nothing can enter an empty top
	}
	ms.updateEssential()
	return ms, nil
}

// termDisjuncts returns the term queries of q when q is a disjunction of
// 2 to DisjunctionHeapTakeover term queries that any one of them
// satisfies: what newDisjunctionSliceSearcher evaluates. (Larger
// disjunctions go to bleve's heap searcher, which sums in another order.)
func termDisjuncts(q query.Query) ([]*query.TermQuery, bool) {
	dq, ok := q.(*query.DisjunctionQuery)
	if !ok || dq.Min > 1 || len(dq.Disjuncts) < 2 || len(dq.Disjuncts) > searcher.DisjunctionHeapTakeover {
		return nil, false
	}
	tqs := make([]*query.TermQuery, 0, len(dq.Disjuncts))
	for _, d := range dq.Disjuncts {
		tq, ok := d.(*query.TermQuery)
		if !ok || tq.Field() == "" {
			return nil, false
		}
		tqs = append(tqs, tq)
	}
	return tqs, true
}

// bm25Fields reports whether bleve scores the fields of tqs with BM25
// (it falls back to tf-idf, whose scores have no bound, for a field
// without tokens): the average field length it uses is positive.
func bm25Fields(r bindex.IndexReader, tqs []*query.TermQuery) bool {
	br, ok := r.(bindex.BM25Reader)
	if !ok {
		return false
	}
	count, err := r.DocCount()
	if err != nil || count == 0 {
		return false
	}
	for _, tq := range tqs {
		card, err := br.FieldCardinality(tq.Field())
		if err != nil || math.Ceil(float64(card)/float64(count)) <= 0 {
			return false
		}
	}
	return true
}

// setBounds computes the score bound of each term searcher; false when a
// bound is not a finite positive number (pruning is then off).
//
// bleve's BM25 term score is idf·k1·tf/(tf + k1·(1-b+b·len/avgLen))
// times the query weight boost·idf·queryNorm (the multiplication is
// skipped when the weight is exactly 1); with len ≥ 0 the middle factor
// is below 1, so the score is below idf·k1·weight. A searcher's Weight()
// is (boost·idf)².
func (s *maxScoreSearcher) setBounds(boosts map[search.Searcher]float64, qnorm float64) bool {
	s.bounds = make([]float64, len(s.searchers))
	for i, ts := range s.searchers {
		boost := boosts[ts]
		if !(boost > 0) {
			return false
		}
		bi := math.Sqrt(ts.Weight()) // boost·idf
		idf := bi / boost
		b := idf * search.BM25_k1 * (bi * qnorm) * boundSlack
		if !(b > 0) || math.IsInf(b, 0) {
			return false
		}
		s.bounds[i] = b
	}
	s.byBound = make([]int, len(s.searchers))
	for i := range s.byBound {
		s.byBound[i] = i
	}
	sort.SliceStable(s.byBound, func(a, b int) bool { return s.bounds[s.byBound[a]] < s.bounds[s.byBound[b]] })
	return true
}

// maxScoreSearcher is a disjunction of term searchers scored as bleve's
// DisjunctionSliceSearcher does, skipping documents that cannot enter the
// top k once exact matches were returned (see above).
type maxScoreSearcher struct {
	searchers []search.Searcher // in bleve's order (posting count)
	currs     []*search.DocumentMatch
	matching  []*search.DocumentMatch
	matchIdx  []int
	scorer    *scorer.DisjunctionQueryScorer
	cand      bindex.IndexInternalID // the document under consideration

	prune   bool      // the bounds are valid
	bounds  []float64 // score bound per searcher
	byBound []int     // searchers by ascending bound

	k         int       // hits the collector keeps
	top       []float64 // min-heap of the k best scores returned
	threshold float64   // the k-th best score returned (-Inf before k hits)
	exact     uint64    // matches to return before pruning
	returned  uint64
	atLeast   uint64 // the largest posting count: a floor of the matches
	// The searchers byBound[:nonEssential] (nonEss[i] true) cannot make a
	// document reach the threshold on their own: together they score
	// below nonEssBound.
	nonEssential int
	nonEss       []bool
	nonEssBound  float64
	initialized  bool
}

// updateEssential recomputes which searchers are non-essential for the
// current threshold: the longest prefix by bound whose summed bounds,
// times the coordination factor of matching them all, stay below it.
func (s *maxScoreSearcher) updateEssential() {
	if !s.prune {
		return
	}
	n := float64(len(s.searchers))
	sum, ne, neSum := 0.0, 0, 0.0
	for p, i := range s.byBound {
		sum += s.bounds[i]
		if !(sum*float64(p+1)/n < s.threshold) {
			break
		}
		ne, neSum = p+1, sum
	}
	s.nonEssential, s.nonEssBound = ne, neSum
	if s.nonEss == nil {
		s.nonEss = make([]bool, len(s.searchers))
	}
	for p, i := range s.byBound {
		s.nonEss[i] = p < ne
	}
}

// pruning reports whether documents may be skipped now: once more
// matches than must be counted exactly are known to exist.
func (s *maxScoreSearcher) pruning() bool {
	return s.prune && s.nonEssential > 0 && (s.returned > s.exact || s.atLeast > s.exact)
}

// matchesAtLeast is a floor of the number of matches, to count as the
// total when it exceeds the collected hits (pruning skipped some).
func (s *maxScoreSearcher) matchesAtLeast() uint64 {
	return s.atLeast
}

// noteScore records the score of a returned hit in the top-k heap and
// raises the threshold when the heap is full.
func (s *maxScoreSearcher) noteScore(score float64) {
	s.returned++
	if !s.prune || s.k == 0 {
		return
	}
	if math.IsNaN(score) {
		return // not with finite bounds; and NaN does not order
	}
	switch {
	case len(s.top) < s.k:
		s.top = append(s.top, score)
		heapUp(s.top, len(s.top)-1)
	case score > s.top[0]:
		s.top[0] = score
		heapDown(s.top, 0)
	default:
		return
	}
	if len(s.top) == s.k && s.top[0] > s.threshold {
		s.threshold = s.top[0]
		s.updateEssential()
	}
}

// heapUp restores the min-heap order of h after h[i] was added.
func heapUp(h []float64, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p] <= h[i] {
			return
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

// heapDown restores the min-heap order of h after h[i] grew.
func heapDown(h []float64, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r] < h[l] {
			m = r
		}
		if h[i] <= h[m] {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

func (s *maxScoreSearcher) init(ctx *search.SearchContext) error {
	for i, ts := range s.searchers {
		d, err := ts.Next(ctx)
		if err != nil {
			return err
		}
		s.currs[i] = d
	}
	s.initialized = true
	return nil
}

// nextCandidate sets s.cand to the smallest document the searchers that
// matter (all, or only the essential ones when pruning) are on; false
// when none is left.
func (s *maxScoreSearcher) nextCandidate(pruning bool) bool {
	var cand bindex.IndexInternalID
	for i, c := range s.currs {
		if c != nil && !(pruning && s.nonEss[i]) &&
			(cand == nil || c.IndexInternalID.Compare(cand) < 0) {
			cand = c.IndexInternalID
		}
	}
	s.cand = append(s.cand[:0], cand...)
	return cand != nil
}

// cannotCompete reports whether the candidate scores at most the
// threshold whatever the non-essential terms add: the exact scores of the
// essential terms on it plus the bound of the non-essential ones, with
// the coordination factor of matching them all. A hit scoring the
// threshold comes after the k-th best one and loses the tie.
func (s *maxScoreSearcher) cannotCompete() bool {
	partial, m := 0.0, 0
	for i, c := range s.currs {
		if c != nil && !s.nonEss[i] && c.IndexInternalID.Equals(s.cand) {
			partial += c.Score
			m++
		}
	}
	n := float64(len(s.searchers))
	return (partial*boundSlack+s.nonEssBound)*float64(m+s.nonEssential)/n <= s.threshold
}

// skipCandidate moves the essential searchers on the candidate past it.
func (s *maxScoreSearcher) skipCandidate(ctx *search.SearchContext) error {
	for i, c := range s.currs {
		if c == nil || s.nonEss[i] || !c.IndexInternalID.Equals(s.cand) {
			continue
		}
		ctx.DocumentMatchPool.Put(c)
		d, err := s.searchers[i].Next(ctx)
		if err != nil {
			return err
		}
		s.currs[i] = d
	}
	return nil
}

// advanceTo moves the searchers behind the candidate (the non-essential
// ones while pruning) to it or beyond.
func (s *maxScoreSearcher) advanceTo(ctx *search.SearchContext, id bindex.IndexInternalID) error {
	for i, c := range s.currs {
		if c == nil || c.IndexInternalID.Compare(id) >= 0 {
			continue
		}
		ctx.DocumentMatchPool.Put(c)
		d, err := s.searchers[i].Advance(ctx, id)
		if err != nil {
			return err
		}
		s.currs[i] = d
	}
	return nil
}

// scoreCandidate scores the candidate from the searchers on it, in
// bleve's order, and moves them on.
func (s *maxScoreSearcher) scoreCandidate(ctx *search.SearchContext) (*search.DocumentMatch, error) {
	s.matching, s.matchIdx = s.matching[:0], s.matchIdx[:0]
	for i, c := range s.currs {
		if c != nil && c.IndexInternalID.Equals(s.cand) {
			s.matching = append(s.matching, c)
			s.matchIdx = append(s.matchIdx, i)
		}
	}
	rv := s.scorer.Score(ctx, s.matching, len(s.matching), len(s.searchers))
	for _, i := range s.matchIdx {
		if s.currs[i] != rv {
			ctx.DocumentMatchPool.Put(s.currs[i])
		}
		d, err := s.searchers[i].Next(ctx)
		if err != nil {
			return nil, err
		}
		s.currs[i] = d
	}
	s.noteScore(rv.Score)
	return rv, nil
}

// Next returns the next match that may enter the top k, scored as
// bleve's disjunction scores it.
func (s *maxScoreSearcher) Next(ctx *search.SearchContext) (*search.DocumentMatch, error) {
	if !s.initialized {
		if err := s.init(ctx); err != nil {
			return nil, err
		}
	}
	for {
		pruning := s.pruning()
		if pruning && s.nonEssential == len(s.searchers) {
			return nil, nil // no document can enter the top k any more
		}
		if !s.nextCandidate(pruning) {
			return nil, nil
		}
		if pruning {
			if s.cannotCompete() {
				if err := s.skipCandidate(ctx); err != nil {
					return nil, err
				}
				continue
			}
			if err := s.advanceTo(ctx, s.cand); err != nil {
				return nil, err
			}
		}
		return s.scoreCandidate(ctx)
	}
}

// Advance moves every searcher to id or beyond and returns the next match.
func (s *maxScoreSearcher) Advance(ctx *search.SearchContext, id bindex.IndexInternalID) (*search.DocumentMatch, error) {
	if !s.initialized {
		if err := s.init(ctx); err != nil {
			return nil, err
		}
	}
	if err := s.advanceTo(ctx, id); err != nil {
		return nil, err
	}
	return s.Next(ctx)
}

// Weight is the sum of the term weights, as for bleve's disjunction.
func (s *maxScoreSearcher) Weight() float64 {
	var w float64
	for _, ts := range s.searchers {
		w += ts.Weight()
	}
	return w
}

// SetQueryNorm passes a norm on to the term searchers (unused: the
// searcher is never nested).
func (s *maxScoreSearcher) SetQueryNorm(qnorm float64) {
	for _, ts := range s.searchers {
		ts.SetQueryNorm(qnorm)
	}
}

// Count is a worst case, as for bleve's disjunction.
func (s *maxScoreSearcher) Count() uint64 {
	var n uint64
	for _, ts := range s.searchers {
		n += ts.Count()
	}
	return n
}

// Min is 0: any one term matches.
func (s *maxScoreSearcher) Min() int { return 0 }

// Size estimates the memory held, as bleve's searchers report it.
func (s *maxScoreSearcher) Size() int {
	n := 0
	for _, ts := range s.searchers {
		n += ts.Size()
	}
	return n + 8*(len(s.top)+len(s.bounds))
}

// DocumentMatchPoolSize is what the searchers may hold at once.
func (s *maxScoreSearcher) DocumentMatchPoolSize() int {
	n := len(s.currs)
	for _, ts := range s.searchers {
		n += ts.DocumentMatchPoolSize()
	}
	return n
}

// Close closes the term searchers.
func (s *maxScoreSearcher) Close() error {
	var first error
	for _, ts := range s.searchers {
		if err := ts.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// scoresUnused reports whether no score of a search can be observed: its
// hits are sorted on fields only (no _score), which leaves _score and
// max_score null, without track_scores nor min_score (aggregations do
// not read scores).
func scoresUnused(order search.SortOrder, req *searchRequest) bool {
	if req.trackScores || req.minScore != nil {
		return false
	}
	for _, so := range order {
		if _, ok := so.(*search.SortScore); ok {
			return false
		}
	}
	return true
}

// newSearcher returns the searcher of q over r: a pruning one when the
// search allows it (k is the number of hits the collector keeps), one
// testing range filters against columns (colfilter.go) when q has them,
// else q's own. m is the index's mapping.
func (ix *index) newSearcher(ctx context.Context, r bindex.IndexReader, q query.Query, m *mappings, order search.SortOrder,
	req *searchRequest, aggs *aggCollector, postFilter query.Query, after []string, k int) (search.Searcher, error) {
	if !ix.noPrune.Load() && topKEligible(order, req, aggs, postFilter, after) {
		s, err := newMaxScoreSearcher(ctx, r, q, k, countUpTo(req))
		if s != nil || err != nil {
			return s, err
		}
	}
	if s, err := ix.boolColumnSearcher(ctx, r, q, m, scoresUnused(order, req)); s != nil || err != nil {
		return s, err
	}
	return q.Searcher(ctx, r, bleveIndexMapping, search.SearcherOptions{})
}
