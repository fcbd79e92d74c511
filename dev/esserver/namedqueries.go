package esserver

import (
	"context"
	"encoding/json"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"
)

// Named queries: a query given "_name" reports, in each hit it matches,
// its name under matched_queries (Elasticsearch's MatchedQueriesPhase).

type namedQuery struct {
	name string
	q    query.Query
}

// noteNamed records q under its _name, which sits beside the query's
// parameters ({"bool": {..., "_name": n}}) or, for queries on one field,
// inside the field's object ({"term": {"f": {"value": v, "_name": n}}}).
func (c *qctx) noteNamed(params map[string]json.RawMessage, q query.Query) {
	var name string
	if raw, ok := params["_name"]; ok {
		_ = json.Unmarshal(raw, &name)
	} else if len(params) == 1 {
		for _, v := range params {
			var inner map[string]json.RawMessage
			if json.Unmarshal(v, &inner) == nil {
				if raw, ok := inner["_name"]; ok {
					_ = json.Unmarshal(raw, &name)
				}
			}
		}
	}
	if name != "" {
		c.named = append(c.named, namedQuery{name: name, q: q})
	}
}

// markMatchedQueries sets the matched_queries of each hit: the named
// queries of its index that match it.
func markMatchedQueries(ctx context.Context, hits []hitRec, named map[*index][]namedQuery) *esError {
	byIndex := map[*index][]int{}
	for i, h := range hits {
		if len(named[h.ix]) > 0 {
			byIndex[h.ix] = append(byIndex[h.ix], i)
		}
	}
	for ix, idxs := range byIndex {
		ids := make([]string, len(idxs))
		pos := map[string]int{}
		for j, i := range idxs {
			ids[j] = hits[i].id
			pos[hits[i].id] = i
		}
		for _, nq := range named[ix] {
			matched, err := matchingIDs(ctx, ix, nq.q, ids)
			if err != nil {
				return err
			}
			for _, id := range matched {
				if i, ok := pos[id]; ok {
					hits[i].matched = append(hits[i].matched, nq.name)
				}
			}
		}
	}
	return nil
}

// matchingIDs returns which of ids q matches in ix.
func matchingIDs(ctx context.Context, ix *index, q query.Query, ids []string) ([]string, *esError) {
	ix.engMu.RLock()
	defer ix.engMu.RUnlock()
	if ix.bleve == nil {
		return nil, indexNotFound(ix.name)
	}
	conj := query.NewConjunctionQuery([]query.Query{query.NewDocIDQuery(ids), q})
	sr := bleve.NewSearchRequestOptions(conj, len(ids), 0, false)
	res, err := ix.bleve.SearchInContext(ctx, sr)
	if err != nil {
		return nil, internalError(err)
	}
	out := make([]string, 0, len(res.Hits))
	for _, h := range res.Hits {
		out = append(out, h.ID)
	}
	return out, nil
}
