package esserver

import (
	"context"
	"math"

	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/blevesearch/bleve/v2/search/searcher"
	bindex "github.com/blevesearch/bleve_index_api"
)

// bleve has no dis_max query, and its compound queries (disjunction,
// conjunction, boolean) accept a boost but ignore it. The two query types
// here fill those gaps for multi_match and for boosts on compound queries.
//
// Boosts follow bleve's query-norm scheme: a term scorer's weight is
// boost*idf*queryNorm, and every compound searcher normalises its children
// by 1/sqrt(sum of their Weight()s). A boost on a compound searcher
// therefore scales its Weight by boost² and the norm it hands down by
// boost, which scales every score beneath it by boost.

// disMaxQuery is Lucene's DisjunctionMaxQuery: a document matches when any
// disjunct matches and scores max + tieBreaker*(sum of the other scores).
type disMaxQuery struct {
	disjuncts []query.Query
	tie       float64
	boost     float64
}

// newDisMax combines alternatives: none match nothing, one stands alone.
func newDisMax(qs []query.Query, tie float64) query.Query {
	switch len(qs) {
	case 0:
		return query.NewMatchNoneQuery()
	case 1:
		return qs[0]
	}
	return &disMaxQuery{disjuncts: qs, tie: tie, boost: 1}
}

func (q *disMaxQuery) SetBoost(b float64) { q.boost = b }
func (q *disMaxQuery) Boost() float64     { return q.boost }

func (q *disMaxQuery) Searcher(ctx context.Context, i bindex.IndexReader, m mapping.IndexMapping, options search.SearcherOptions) (search.Searcher, error) {
	ss := make([]search.Searcher, 0, len(q.disjuncts))
	for _, d := range q.disjuncts {
		s, err := d.Searcher(ctx, i, m, options)
		if err != nil {
			for _, o := range ss {
				_ = o.Close()
			}
			return nil, err
		}
		if _, none := s.(*searcher.MatchNoneSearcher); none {
			_ = s.Close()
			continue
		}
		ss = append(ss, s)
	}
	if len(ss) == 0 {
		return searcher.NewMatchNoneSearcher(i)
	}
	s := &disMaxSearcher{searchers: ss, currs: make([]*search.DocumentMatch, len(ss)), tie: q.tie, boost: q.boost}
	// Normalise the children as bleve's own compound searchers do; a parent
	// searcher overrides this through SetQueryNorm.
	var sum float64
	for _, c := range ss {
		sum += c.Weight()
	}
	if sum > 0 {
		norm := 1 / math.Sqrt(sum)
		for _, c := range ss {
			c.SetQueryNorm(norm)
		}
	}
	return s, nil
}

type disMaxSearcher struct {
	searchers   []search.Searcher
	currs       []*search.DocumentMatch
	tie, boost  float64
	initialized bool
}

func (s *disMaxSearcher) init(ctx *search.SearchContext) error {
	for i, c := range s.searchers {
		m, err := c.Next(ctx)
		if err != nil {
			return err
		}
		s.currs[i] = m
	}
	s.initialized = true
	return nil
}

func (s *disMaxSearcher) Next(ctx *search.SearchContext) (*search.DocumentMatch, error) {
	if !s.initialized {
		if err := s.init(ctx); err != nil {
			return nil, err
		}
	}
	first := -1
	for i, c := range s.currs {
		if c != nil && (first < 0 || c.IndexInternalID.Compare(s.currs[first].IndexInternalID) < 0) {
			first = i
		}
	}
	if first < 0 {
		return nil, nil
	}
	rv := s.currs[first]
	id := rv.IndexInternalID
	best, sum := rv.Score, 0.0
	var others []*search.DocumentMatch
	var expl []*search.Explanation
	for i, c := range s.currs {
		if c == nil || c.IndexInternalID.Compare(id) != 0 {
			continue
		}
		sum += c.Score
		best = max(best, c.Score)
		if c.Expl != nil {
			expl = append(expl, c.Expl)
		}
		if i != first {
			others = append(others, c)
		}
		next, err := s.searchers[i].Next(ctx)
		if err != nil {
			return nil, err
		}
		s.currs[i] = next
	}
	rv.Score = best + s.tie*(sum-best)
	if expl != nil {
		rv.Expl = &search.Explanation{Value: rv.Score, Message: "max plus tie_breaker times others of:", Children: expl}
	}
	if len(others) > 0 {
		rv.FieldTermLocations = search.MergeFieldTermLocations(rv.FieldTermLocations, others)
		for _, o := range others {
			ctx.DocumentMatchPool.Put(o)
		}
	}
	return rv, nil
}

func (s *disMaxSearcher) Advance(ctx *search.SearchContext, id bindex.IndexInternalID) (*search.DocumentMatch, error) {
	if !s.initialized {
		if err := s.init(ctx); err != nil {
			return nil, err
		}
	}
	for i, c := range s.currs {
		if c == nil || c.IndexInternalID.Compare(id) >= 0 {
			// exhausted, or already there
			continue
		}
		ctx.DocumentMatchPool.Put(c)
		next, err := s.searchers[i].Advance(ctx, id)
		if err != nil {
			return nil, err
		}
		s.currs[i] = next
	}
	return s.Next(ctx)
}

func (s *disMaxSearcher) Close() error {
	var rv error
	for _, c := range s.searchers {
		if err := c.Close(); err != nil && rv == nil {
			rv = err
		}
	}
	return rv
}

func (s *disMaxSearcher) Weight() float64 {
	var sum float64
	for _, c := range s.searchers {
		sum += c.Weight()
	}
	return s.boost * s.boost * sum
}

func (s *disMaxSearcher) SetQueryNorm(n float64) {
	for _, c := range s.searchers {
		c.SetQueryNorm(n * s.boost)
	}
}

func (s *disMaxSearcher) Count() uint64 {
	var sum uint64
	for _, c := range s.searchers {
		sum += c.Count()
	}
	return sum
}

func (s *disMaxSearcher) Min() int { return 0 }

func (s *disMaxSearcher) Size() int {
	n := 64 + 8*len(s.currs)
	for _, c := range s.searchers {
		n += c.Size()
	}
	return n
}

func (s *disMaxSearcher) DocumentMatchPoolSize() int {
	n := len(s.currs)
	for _, c := range s.searchers {
		n += c.DocumentMatchPoolSize()
	}
	return n
}

// boostQuery applies a boost to a compound bleve query, which would
// otherwise ignore it.
type boostQuery struct {
	q     query.Query
	boost float64
}

func (q *boostQuery) SetBoost(b float64) { q.boost = b }
func (q *boostQuery) Boost() float64     { return q.boost }

func (q *boostQuery) Searcher(ctx context.Context, i bindex.IndexReader, m mapping.IndexMapping, options search.SearcherOptions) (search.Searcher, error) {
	s, err := q.q.Searcher(ctx, i, m, options)
	if err != nil {
		return nil, err
	}
	if _, none := s.(*searcher.MatchNoneSearcher); none {
		return s, nil
	}
	return &boostSearcher{Searcher: s, boost: q.boost}, nil
}

type boostSearcher struct {
	search.Searcher
	boost float64
}

func (s *boostSearcher) Weight() float64        { return s.boost * s.boost * s.Searcher.Weight() }
func (s *boostSearcher) SetQueryNorm(n float64) { s.Searcher.SetQueryNorm(n * s.boost) }
