package esserver

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/numeric"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/collector"
	bindex "github.com/blevesearch/bleve_index_api"
)

// Column-wise doc values.
//
// Aggregations and field sorts need the values of a few fields for every
// matching document (and so do the range filters of bool queries that
// colfilter.go tests per candidate). Reading them from bleve's doc values per hit decodes
// a compressed chunk and calls back per term, which dominates a search
// that matches 100k documents. Instead, the values of a field are turned
// into a column once per search-index segment: every value of the
// segment's documents, decoded (numbers and dates as float64, keywords and
// booleans as strings), in one slice indexed through a per-document
// offset. Aggregations and sorts then read a column slot per hit.
//
// Segments are immutable, so a column stays valid for as long as its
// segment is part of the index: a refresh adds a segment holding the
// changed documents (the old copies are only marked deleted in theirs) and
// only that segment's columns are built, on the first search that needs
// them; a refresh that changes nothing creates no segment and builds
// nothing. When bleve merges segments the merged one gets its columns on
// first use and the columns of the segments it replaced are dropped, so
// the cache never holds more than the columns of the live segments.
//
// Memory: per field that was aggregated or sorted on, about 36 bytes per
// value (a decoded value and a term ordinal) plus 4 bytes per document
// (deleted ones included) plus each distinct term once (16 bytes and its
// length); 100k single-valued documents cost about 4 MB per field, plus
// 2 MB if every value is distinct. Building a segment's columns costs
// about one old-style aggregation over all its documents (~50 ms per
// 100k documents and three fields here). Fields that no search uses are
// never loaded (a range filter loads its field only when the query's
// scoring clauses may match colFilterMinCandidates documents). Only the
// columns of the segments in the current snapshot are kept (merged-away
// segments drop theirs), and all of an index's columns go with its
// search index.
type columnCache struct {
	mu       sync.Mutex
	segs     map[uint64]*segColumns // by scorch segment id
	built    atomic.Int64           // columns built, for tests
	filtered atomic.Int64           // searchers testing range filters on columns (colfilter.go), for tests
	disabled atomic.Bool            // read doc values per hit (the benchmarks' baseline)
}

// segColumns are the columns of one segment.
type segColumns struct {
	docs   uint64 // documents in the segment, deleted ones included
	fields map[colKey]*column
}

type colKey struct {
	field string
	num   bool // numeric terms (numbers, dates): only full-precision terms are kept
}

// column holds one field's doc values for one segment: the values of
// local document d are vals[start[d]:start[d+1]], in the order bleve
// visits them, and strs[ords[i]] is the indexed term of vals[i].
type column struct {
	start []uint32
	vals  []dval
	ords  []uint32
	strs  []string
	terms [][]byte // strs while building
}

// reset drops every column (the search index was replaced).
func (cc *columnCache) reset() {
	cc.mu.Lock()
	cc.segs = nil
	cc.mu.Unlock()
}

// colView resolves the columns of a set of fields for one index snapshot.
type colView struct {
	offsets []uint64    // first global document number of each segment
	cols    [][]*column // [segment][field]
	keys    []colKey    // the fields
	last    int         // segment of the last located document
}

// locate maps a global document number to its segment and local number.
// Hits come in document order, so the last segment is tried first.
func (v *colView) locate(n uint64) (int, uint64) {
	i := v.last
	if n < v.offsets[i] || (i+1 < len(v.offsets) && n >= v.offsets[i+1]) {
		i = sort.Search(len(v.offsets), func(i int) bool { return v.offsets[i] > n }) - 1
		if i < 0 {
			i = 0
		}
		v.last = i
	}
	return i, n - v.offsets[i]
}

// view returns the columns of keys for snapshot r, building what is
// missing, or nil when r is not a scorch snapshot.
func (cc *columnCache) view(r bindex.IndexReader, keys []colKey) (*colView, error) {
	snap, ok := r.(*scorch.IndexSnapshot)
	if !ok {
		return nil, nil
	}
	segs := snap.Segments()
	v := &colView{offsets: make([]uint64, len(segs)), cols: make([][]*column, len(segs)), keys: keys}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.segs == nil {
		cc.segs = map[uint64]*segColumns{}
	}
	live := make(map[uint64]bool, len(segs))
	var running uint64
	for i, ss := range segs {
		docs := ss.Segment().Count()
		v.offsets[i] = running
		sc := cc.segs[ss.Id()]
		if sc == nil || sc.docs != docs {
			sc = &segColumns{docs: docs, fields: map[colKey]*column{}}
			cc.segs[ss.Id()] = sc
		}
		live[ss.Id()] = true
		var missing []colKey
		for _, k := range keys {
			if k.field == "" {
				continue
			}
			if _, ok := sc.fields[k]; !ok && !containsKey(missing, k) {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			if err := buildColumns(snap, running, docs, missing, sc); err != nil {
				return nil, err
			}
			cc.built.Add(int64(len(missing)))
		}
		v.cols[i] = make([]*column, len(keys))
		for j, k := range keys {
			if k.field != "" {
				v.cols[i][j] = sc.fields[k]
			}
		}
		running += docs
	}
	for id := range cc.segs {
		if !live[id] {
			delete(cc.segs, id)
		}
	}
	return v, nil
}

func containsKey(ks []colKey, k colKey) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

// buildColumns reads the doc values of keys for the docs documents of a
// segment that starts at global number base.
func buildColumns(snap *scorch.IndexSnapshot, base, docs uint64, keys []colKey, sc *segColumns) error {
	fields := make([]string, 0, len(keys))
	byField := map[string][]int{}
	for i, k := range keys {
		if _, ok := byField[k.field]; !ok {
			fields = append(fields, k.field)
		}
		byField[k.field] = append(byField[k.field], i)
	}
	dvr, err := snap.DocValueReader(fields)
	if err != nil {
		return err
	}
	cols := make([]*column, len(keys))
	dicts := make([]map[string]uint32, len(keys))
	for i := range cols {
		cols[i] = &column{start: make([]uint32, docs+1), vals: make([]dval, 0, docs), ords: make([]uint32, 0, docs)}
		dicts[i] = map[string]uint32{}
	}
	visit := func(field string, term []byte) {
		for _, i := range byField[field] {
			c := cols[i]
			var v dval
			if keys[i].num {
				pc := numeric.PrefixCoded(term)
				if shift, err := pc.Shift(); err != nil || shift != 0 {
					continue
				}
				i64, err := pc.Int64()
				if err != nil {
					continue
				}
				v = dval{f: numeric.Int64ToFloat64(i64), isNum: true}
			}
			ord, ok := dicts[i][string(term)]
			if !ok {
				ord = uint32(len(c.terms))
				t := append([]byte(nil), term...)
				c.terms = append(c.terms, t)
				dicts[i][string(t)] = ord
			}
			c.vals = append(c.vals, v)
			c.ords = append(c.ords, ord)
		}
	}
	id := bindex.NewIndexInternalID(nil, 0)
	for d := uint64(0); d < docs; d++ {
		for _, c := range cols {
			c.start[d] = uint32(len(c.vals))
		}
		id.SetValue(base + d)
		if err := dvr.VisitDocValues(id, visit); err != nil {
			return err
		}
	}
	for i, c := range cols {
		c.start[docs] = uint32(len(c.vals))
		if cap(c.vals) > 2*len(c.vals) { // a sparse field: do not keep room for every document
			c.vals = append([]dval(nil), c.vals...)
			c.ords = append([]uint32(nil), c.ords...)
		}
		sc.fields[keys[i]] = c
	}
	internStrings(cols, keys)
	return nil
}

// internStrings makes keyword values share one string per distinct term.
func internStrings(cols []*column, keys []colKey) {
	for i, c := range cols {
		c.strs = make([]string, len(c.terms))
		for j, t := range c.terms {
			c.strs[j] = string(t)
		}
		c.terms = nil // only needed while building
		if keys[i].num {
			continue
		}
		for j, o := range c.ords {
			c.vals[j].s = c.strs[o]
		}
	}
}

// colSort is a field sort read from columns. It gives every hit the
// sort value bleve's SortField would (the doc's term, or its smallest or
// largest one by mode, numeric fields by their full-precision term, the
// missing markers otherwise), without visiting doc values nor allocating.
type colSort struct {
	sf   *search.SortField
	v    *colView
	slot int
}

func (s *colSort) UpdateVisitor(string, []byte) {}

func (s *colSort) Value(d *search.DocumentMatch) string {
	seg, local := s.v.locate(d.IndexInternalID.Value())
	c := s.v.cols[seg][s.slot]
	var lo, hi uint32
	if c != nil {
		lo, hi = c.start[local], c.start[local+1]
	}
	switch {
	case hi == lo:
		if s.sf.Missing == search.SortFieldMissingLast {
			if s.sf.Desc {
				return search.LowTerm
			}
			return search.HighTerm
		}
		if s.sf.Desc {
			return search.HighTerm
		}
		return search.LowTerm
	case hi-lo == 1 || s.sf.Mode == search.SortFieldDefault:
		return c.strs[c.ords[lo]]
	}
	best := c.strs[c.ords[lo]]
	for j := lo + 1; j < hi; j++ {
		t := c.strs[c.ords[j]]
		if (s.sf.Mode == search.SortFieldMin && t < best) || (s.sf.Mode == search.SortFieldMax && t > best) {
			best = t
		}
	}
	return best
}

func (s *colSort) DecodeValue(v string) string { return v }
func (s *colSort) Descending() bool            { return s.sf.Desc }
func (s *colSort) RequiresDocID() bool         { return false }
func (s *colSort) RequiresScoring() bool       { return false }
func (s *colSort) RequiresFields() []string    { return []string{s.sf.Field} }
func (s *colSort) Reverse()                    { s.sf.Reverse() }
func (s *colSort) Copy() search.SearchSort {
	return &colSort{sf: s.sf.Copy().(*search.SortField), v: s.v, slot: s.slot}
}

// colReader is the reader handed to the collector: the sort fields' doc
// values come from columns (colSort), everything else from the snapshot.
// Searchers are built on the snapshot itself.
type colReader struct {
	bindex.IndexReader
	sorted map[string]bool
}

func (r *colReader) DocValueReader(fields []string) (bindex.DocValueReader, error) {
	for _, f := range fields {
		if !r.sorted[f] {
			return r.IndexReader.DocValueReader(fields)
		}
	}
	return noDocValues{}, nil
}

type noDocValues struct{}

func (noDocValues) VisitDocValues(bindex.IndexInternalID, bindex.DocValueVisitor) error { return nil }
func (noDocValues) BytesRead() uint64                                                   { return 0 }

// collect runs coll over searcher and feeds the aggregations, from
// columns, or (when columns are disabled) from bleve's doc values per hit.
// order must be the sort order coll was made with: its field sorts are
// replaced by column sorts for the collection.
func (ix *index) collect(ctx context.Context, coll *collector.TopNCollector, searcher search.Searcher,
	r bindex.IndexReader, m *mappings, order search.SortOrder, aggs *aggCollector) *esError {
	if ix.cols.disabled.Load() {
		return collectDocValues(ctx, coll, searcher, r, m, aggs, ix.name)
	}
	var keys []colKey
	if aggs != nil {
		if aerr := aggs.bind(m, nil, ix.name); aerr != nil {
			return aerr
		}
		for i, f := range aggs.fields {
			switch k := aggs.kinds[i]; k {
			case kindKeyword, kindBool, kindNumber, kindDate:
				keys = append(keys, colKey{field: f, num: k == kindNumber || k == kindDate})
			default:
				keys = append(keys, colKey{}) // never receives values
			}
		}
	}
	nAgg := len(keys)
	sortSlot := map[int]int{} // order index -> column slot
	for i, so := range order {
		if sf, ok := so.(*search.SortField); ok {
			k := colKey{field: sf.Field, num: sf.Type != search.SortFieldAsString}
			if fm := m.lookup(sf.Field); fm != nil && fm.Kind != kindObject && fm.Kind != kindText {
				k.num = fm.Kind == kindNumber || fm.Kind == kindDate
			}
			sortSlot[i] = len(keys)
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		if err := coll.Collect(ctx, searcher, r); err != nil {
			return internalError(err)
		}
		return nil
	}
	v, err := ix.cols.view(r, keys)
	if err != nil {
		return internalError(err)
	}
	if v == nil {
		return collectDocValues(ctx, coll, searcher, r, m, aggs, ix.name)
	}
	cr := &colReader{IndexReader: r, sorted: map[string]bool{}}
	for i, slot := range sortSlot {
		sf := order[i].(*search.SortField)
		cr.sorted[sf.Field] = true
		order[i] = &colSort{sf: sf, v: v, slot: slot}
		defer func() { order[i] = sf }()
	}
	if aggs != nil {
		cur := make([][]dval, nAgg)
		ctx = context.WithValue(ctx, search.MakeDocumentMatchHandlerKey, search.MakeDocumentMatchHandler(
			func(sc *search.SearchContext) (search.DocumentMatchHandler, bool, error) {
				next, loadID, err := collector.MakeTopNDocumentMatchHandler(sc)
				if err != nil {
					return nil, false, err
				}
				return func(d *search.DocumentMatch) error {
					if d != nil {
						seg, local := v.locate(d.IndexInternalID.Value())
						cols := v.cols[seg][:nAgg]
						for i, c := range cols {
							if c == nil {
								cur[i] = nil
							} else {
								cur[i] = c.vals[c.start[local]:c.start[local+1]]
							}
						}
						for _, st := range aggs.roots {
							st.collectColumns(cols, local, cur)
						}
					}
					return next(d)
				}, loadID, nil
			}))
	}
	if err := coll.Collect(ctx, searcher, cr); err != nil {
		return internalError(err)
	}
	return nil
}

// collectDocValues is the per-document path: bleve reads the doc values of
// every hit and hands them to the aggregations through its facet hooks.
func collectDocValues(ctx context.Context, coll *collector.TopNCollector, searcher search.Searcher,
	r bindex.IndexReader, m *mappings, aggs *aggCollector, indexName string) *esError {
	if aggs != nil {
		fb := search.NewFacetsBuilder(r)
		if aerr := aggs.bind(m, fb, indexName); aerr != nil {
			return aerr
		}
		coll.SetFacetsBuilder(fb)
	}
	if err := coll.Collect(ctx, searcher, r); err != nil {
		return internalError(err)
	}
	return nil
}
