package esserver

import (
	"encoding/json"
	"maps"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/blevesearch/bleve/v2/numeric"
	"github.com/blevesearch/bleve/v2/search"
)

// aggSpec is one parsed aggregation request.
type aggSpec struct {
	name  string
	typ   string
	field string
	meta  any
	subs  []*aggSpec

	// terms
	size        int
	minDocCount int64
	orderKey    bool // order by key instead of count
	orderAsc    bool

	// histograms
	calendar  byte          // calendar unit (m h d w M q y), 0 when fixed
	fixed     time.Duration // fixed_interval
	interval  float64       // histogram interval
	offset    float64       // millis for date_histogram, value for histogram
	loc       *time.Location
	format    string
	boundsMin *float64
	boundsMax *float64

	// missing: the value a document without the field is aggregated
	// with (every values-source aggregation of Elasticsearch takes it);
	// missingVal is it converted for the index being collected.
	missing    any
	hasMissing bool
	missingVal []dval

	decFmt *decimalFormat // format on a numeric field

	// valueType: the type an unmapped field is taken as (value_type)
	valueType string
	// include / exclude (terms): exact values; incl and excl are them
	// converted for the field, as bucket keys, over the indices bound
	include, exclude []any
	incl, excl       map[dval]bool
	// mixedFloat: the field is a floating-point type in some index, so
	// integer keys are rendered as doubles (the reduced DoubleTerms)
	mixedFloat bool

	slot int           // doc-value slot in the collector
	fm   *fieldMapping // bound from the first index where the field is mapped
}

var metricAggs = map[string]bool{"sum": true, "avg": true, "min": true, "max": true, "value_count": true, "stats": true, "cardinality": true}
var bucketAggs = map[string]bool{"terms": true, "date_histogram": true, "histogram": true}

var unsupportedAggs = map[string]bool{
	"range": true, "date_range": true, "filter": true, "filters": true, "nested": true, "reverse_nested": true,
	"top_hits": true, "percentiles": true, "percentile_ranks": true, "composite": true, "significant_terms": true,
	"significant_text": true, "extended_stats": true, "geo_bounds": true, "geohash_grid": true, "missing": true,
	"global": true, "sampler": true, "multi_terms": true, "rare_terms": true, "auto_date_histogram": true,
	"variable_width_histogram": true, "median_absolute_deviation": true, "weighted_avg": true,
	"scripted_metric": true, "bucket_script": true, "bucket_selector": true, "bucket_sort": true,
	"avg_bucket": true, "sum_bucket": true, "max_bucket": true, "min_bucket": true, "cumulative_sum": true,
	"derivative": true, "moving_fn": true, "top_metrics": true, "string_stats": true, "boxplot": true,
	"adjacency_matrix": true, "ip_range": true, "diversified_sampler": true, "children": true, "parent": true,
}

// aggParams are the parameters each aggregation type's parser declares in
// Elasticsearch (ValuesSourceAggregationBuilder.declareFields and the
// builders' own fields); "*" lists those of every values-source type.
var aggParams = map[string]map[string]bool{
	"*": {"field": true, "missing": true, "value_type": true},
	"terms": {"format": true, "size": true, "shard_size": true, "min_doc_count": true, "shard_min_doc_count": true,
		"show_term_doc_count_error": true, "execution_hint": true, "collect_mode": true, "order": true,
		"include": true, "exclude": true},
	"histogram": {"format": true, "interval": true, "offset": true, "order": true, "keyed": true,
		"min_doc_count": true, "extended_bounds": true, "hard_bounds": true},
	"date_histogram": {"format": true, "time_zone": true, "calendar_interval": true, "fixed_interval": true,
		"interval": true, "offset": true, "order": true, "keyed": true, "min_doc_count": true, "extended_bounds": true,
		"hard_bounds": true},
	"sum": {"format": true}, "avg": {"format": true}, "min": {"format": true}, "max": {"format": true},
	"stats": {"format": true}, "value_count": {"format": true},
	"cardinality": {"precision_threshold": true, "execution_hint": true},
}

// metadataFields are Elasticsearch's metadata fields.
var metadataFields = map[string]bool{
	"_index": true, "_id": true, "_routing": true, "_seq_no": true, "_primary_term": true, "_version": true,
	"_source": true, "_ignored": true, "_tier": true, "_doc_count": true, "_field_names": true,
	"_data_stream_timestamp": true, "_ignored_source": true, "_nested_path": true,
}

var calendarUnits = map[string]byte{
	"minute": 'm', "1m": 'm', "hour": 'h', "1h": 'h', "day": 'd', "1d": 'd', "week": 'w', "1w": 'w',
	"month": 'M', "1M": 'M', "quarter": 'q', "1q": 'q', "year": 'y', "1y": 'y', "second": 's', "1s": 's',
}

func aggParseErr(format string, args ...any) *esError {
	return parsingError(format, args...)
}

// parseAggs parses an "aggs"/"aggregations" object.
func parseAggs(raw json.RawMessage) ([]*aggSpec, *esError) {
	var obj map[string]json.RawMessage
	if err := decodeJSON(raw, &obj); err != nil || obj == nil {
		return nil, aggParseErr("Aggregation definition must be an object")
	}
	names := slices.Sorted(maps.Keys(obj))
	out := make([]*aggSpec, 0, len(obj))
	for _, name := range names {
		var body map[string]json.RawMessage
		if err := decodeJSON(obj[name], &body); err != nil || body == nil {
			return nil, aggParseErr("Expected [START_OBJECT] under [%s], but got a [VALUE] in [%s]", name, name)
		}
		a := &aggSpec{name: name}
		var typeBody json.RawMessage
		for k, v := range body {
			switch k {
			case "aggs", "aggregations":
				subs, err := parseAggs(v)
				if err != nil {
					return nil, err
				}
				a.subs = subs
			case "meta":
				_ = decodeJSON(v, &a.meta)
			default:
				if a.typ != "" {
					return nil, aggParseErr("Found two aggregation type definitions in [%s]: [%s] and [%s]", name, a.typ, k)
				}
				a.typ, typeBody = k, v
			}
		}
		if a.typ == "" {
			return nil, aggParseErr("Missing definition for aggregation [%s]", name)
		}
		if unsupportedAggs[a.typ] {
			return nil, aggParseErr("[eventpipe] aggregation type [%s] is not supported by this server", a.typ)
		}
		if !metricAggs[a.typ] && !bucketAggs[a.typ] {
			return nil, aggParseErr("Unknown aggregation type [%s]", a.typ).withCause(
				newErr(http.StatusBadRequest, "named_object_not_found_exception", "unknown field [%s]", a.typ))
		}
		if metricAggs[a.typ] && len(a.subs) > 0 {
			return nil, newErr(http.StatusBadRequest, "aggregation_initialization_exception",
				"Aggregator [%s] of type [%s] cannot accept sub-aggregations", name, a.typ)
		}
		if err := a.parseBody(typeBody); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func (a *aggSpec) parseBody(raw json.RawMessage) *esError {
	var p map[string]json.RawMessage
	if err := decodeJSON(raw, &p); err != nil || p == nil {
		return aggParseErr("Expected [START_OBJECT] under [%s], but got a [VALUE] in [%s]", a.typ, a.name)
	}
	if _, ok := p["script"]; ok {
		return aggParseErr("[eventpipe] scripts are not supported by this server")
	}
	f, ok := p["field"]
	if !ok || json.Unmarshal(f, &a.field) != nil || a.field == "" {
		return illegalArgument("Required one of fields [field, script], but none were specified. ")
	}
	if metadataFields[a.field] {
		// metadata fields (_index, _id, _routing, ...) have no doc values here
		return aggParseErr("[eventpipe] aggregations on metadata field [%s] are not supported by this server", a.field)
	}
	a.size = 10
	a.minDocCount = 1
	if a.typ == "date_histogram" || a.typ == "histogram" {
		a.minDocCount = 0
		a.orderKey, a.orderAsc = true, true
	}
	var shardMin int64
	defer func() {
		if shardMin > a.minDocCount {
			a.minDocCount = shardMin
		}
	}()
	for k, v := range p {
		var x any
		_ = decodeJSON(v, &x)
		if !aggParams[a.typ][k] && !aggParams["*"][k] {
			return aggParseErr("[%s] unknown field [%s]", a.typ, k)
		}
		switch k {
		case "hard_bounds":
			return aggParseErr("[eventpipe] [hard_bounds] on [%s] is not supported by this server", a.typ)
		case "shard_min_doc_count":
			// one shard: its buckets below shard_min_doc_count never
			// reach the result
			n, err := strconv.ParseInt(toStr(x), 10, 64)
			if err != nil || n < 0 {
				return illegalArgument("[shard_min_doc_count] must be greater than or equal to 0. Found [%s] in [%s]", toStr(x), a.name)
			}
			shardMin = n
		case "field", "shard_size", "show_term_doc_count_error", "execution_hint", "collect_mode", "keyed":
			if k == "keyed" && x == true {
				return aggParseErr("[eventpipe] keyed bucket responses are not supported by this server")
			}
		case "include", "exclude":
			if a.typ != "terms" {
				return aggParseErr("[%s] unknown field [%s]", a.typ, k)
			}
			list, ok := x.([]any)
			if !ok {
				if _, isObj := x.(map[string]any); isObj {
					return aggParseErr("[eventpipe] terms [%s] partitions are not supported by this server", k)
				}
				return aggParseErr("[eventpipe] terms [%s] regular expressions are not supported by this server (only arrays of exact values are)", k)
			}
			if k == "include" {
				a.include = list
			} else {
				a.exclude = list
			}
		case "value_type":
			vt := toStr(x)
			switch vt {
			case "string", "long", "double", "number", "numeric", "date", "boolean":
				a.valueType = vt
			case "ip", "geo_point", "range", "date_nanos":
				return aggParseErr("[eventpipe] value_type [%s] is not supported by this server", vt)
			default:
				return illegalArgument("Unknown value type [%s]", vt)
			}
		case "missing":
			if x == nil {
				return aggParseErr("[%s] missing cannot be null", a.typ)
			}
			a.missing, a.hasMissing = x, true
		case "precision_threshold":
			if a.typ != "cardinality" {
				return aggParseErr("[%s] unknown field [%s]", a.typ, k)
			}
			// Counting is exact here; Elasticsearch's HyperLogLog++ is
			// exact below the threshold too, which only bounds memory.
			n, err := strconv.ParseInt(toStr(x), 10, 64)
			if err != nil {
				return aggParseErr("[cardinality] failed to parse field [precision_threshold]")
			}
			if n < 0 {
				return illegalArgument("[precisionThreshold] must be greater than or equal to 0. Found [%d] in [%s]", n, a.name)
			}
		case "size":
			n, err := strconv.Atoi(toStr(x))
			if err != nil || n < 1 {
				return illegalArgument("[size] must be greater than 0. Found [%s] in [%s]", toStr(x), a.name)
			}
			a.size = n
		case "min_doc_count":
			n, err := strconv.ParseInt(toStr(x), 10, 64)
			if err != nil || n < 0 {
				return illegalArgument("[min_doc_count] must be greater than or equal to 0. Found [%s] in [%s]", toStr(x), a.name)
			}
			a.minDocCount = n
		case "order":
			m, ok := x.(map[string]any)
			if !ok || len(m) != 1 {
				return aggParseErr("[eventpipe] only a single order criterion is supported")
			}
			for ok, ov := range m {
				dir, _ := ov.(string)
				switch ok {
				case "_count":
					a.orderKey = false
				case "_key", "_term":
					a.orderKey = true
				default:
					return aggParseErr("[eventpipe] ordering by [%s] is not supported by this server", ok)
				}
				switch strings.ToLower(dir) {
				case "asc":
					a.orderAsc = true
				case "desc":
					a.orderAsc = false
				default:
					return aggParseErr("Unknown order direction [%s]", dir)
				}
			}
		case "calendar_interval":
			u, ok := calendarUnits[toStr(x)]
			if !ok {
				return illegalArgument("The supplied interval [%s] could not be parsed as a calendar interval.", toStr(x))
			}
			a.calendar = u
		case "fixed_interval":
			d, err := parseTimeValue(toStr(x))
			if err != nil || d <= 0 {
				return illegalArgument("failed to parse setting [date_histogram.fixedInterval] with value [%s] as a time value: unit is missing or unrecognized", toStr(x))
			}
			a.fixed = d
		case "interval":
			if a.typ == "date_histogram" {
				return illegalArgument("[interval] on [date_histogram] is not supported; use [fixed_interval] or [calendar_interval]")
			}
			f, err := strconv.ParseFloat(toStr(x), 64)
			if err != nil || f <= 0 {
				return illegalArgument("[interval] must be >0 for histogram aggregation [%s]", a.name)
			}
			a.interval = f
		case "offset":
			if a.typ == "date_histogram" {
				s := toStr(x)
				neg := strings.HasPrefix(s, "-")
				d, err := parseTimeValue(strings.TrimPrefix(strings.TrimPrefix(s, "+"), "-"))
				if err != nil {
					return illegalArgument("failed to parse [offset] [%s]", s)
				}
				a.offset = float64(d.Milliseconds())
				if neg {
					a.offset = -a.offset
				}
			} else {
				f, err := strconv.ParseFloat(toStr(x), 64)
				if err != nil {
					return illegalArgument("failed to parse [offset] [%s]", toStr(x))
				}
				a.offset = f
			}
		case "time_zone":
			loc, err := parseTimeZone(toStr(x))
			if err != nil {
				return illegalArgument("unknown time zone [%s]", toStr(x))
			}
			a.loc = loc
		case "format":
			a.format = toStr(x)
		case "extended_bounds":
			m, _ := x.(map[string]any)
			df, _ := compileDateFormat(a.format)
			for bk, bv := range m {
				var f float64
				if a.typ == "date_histogram" {
					ms, err := parseDateMath(bv, df, time.Now(), false, a.loc)
					if err != nil {
						return illegalArgument("failed to parse [extended_bounds.%s]", bk)
					}
					f = float64(ms)
				} else {
					var err error
					if f, err = toNumber(bv, "double"); err != nil {
						return illegalArgument("failed to parse [extended_bounds.%s]", bk)
					}
				}
				switch bk {
				case "min":
					a.boundsMin = &f
				case "max":
					a.boundsMax = &f
				}
			}
		default:
			return aggParseErr("[%s] unknown field [%s]", a.typ, k)
		}
	}
	switch a.typ {
	case "date_histogram":
		if a.calendar == 0 && a.fixed == 0 {
			return illegalArgument("Required one of fields [fixed_interval, calendar_interval], but none were specified.")
		}
		if a.calendar != 0 && a.fixed != 0 {
			return illegalArgument("Cannot use [fixed_interval] with [calendar_interval] configuration option.")
		}
	case "histogram":
		if a.interval == 0 {
			return illegalArgument("[interval] must be >0 for histogram aggregation [%s]", a.name)
		}
	}
	return nil
}

func toStr(x any) string {
	s, _ := scalarString(x)
	return s
}

// typedName is the typed_keys prefix Elasticsearch uses for this agg.
func (a *aggSpec) typedName(fm *fieldMapping) string {
	switch a.typ {
	case "terms":
		if fm == nil {
			return "sterms"
		}
		switch fm.Kind {
		case kindNumber:
			if isIntegerType(fm.Type) {
				return "lterms"
			}
			return "dterms"
		case kindDate, kindBool:
			return "lterms"
		}
		return "sterms"
	}
	return a.typ
}

func isIntegerType(t string) bool {
	switch t {
	case "long", "integer", "short", "byte", "unsigned_long":
		return true
	}
	return false
}

// dval is one doc value of a field.
type dval struct {
	f     float64
	s     string
	isNum bool
}

// aggState accumulates one aggregation (and its buckets' sub-aggs).
type aggState struct {
	spec *aggSpec

	count    int64
	sum      float64
	min, max float64
	distinct map[string]struct{}

	buckets map[dval]*bucketState

	// Column path (collectColumns): the bucket of each term ordinal of
	// the current segment's column, and the last bucket used.
	ordCol     *column
	ordBuckets []*bucketState
	lastKey    dval
	lastBucket *bucketState
	// typed: isBucket holds bucketAggs[spec.typ] (read once, not looked
	// up per hit).
	typed, isBucket bool
}

type bucketState struct {
	key   dval
	count int64
	subs  []*aggState
}

// aggCollector receives doc values for every matching document through
// bleve's facet-builder hooks and feeds the aggregation tree.
type aggCollector struct {
	fields []string
	slot   map[string]int
	kinds  []kind // of the index being collected
	cur    [][]dval
	inDoc  bool
	roots  []*aggState
	specs  []*aggSpec
}

func newAggCollector(specs []*aggSpec) *aggCollector {
	c := &aggCollector{slot: map[string]int{}}
	var walk func([]*aggSpec)
	walk = func(ss []*aggSpec) {
		for _, s := range ss {
			if _, ok := c.slot[s.field]; !ok {
				c.slot[s.field] = len(c.fields)
				c.fields = append(c.fields, s.field)
			}
			s.slot = c.slot[s.field]
			walk(s.subs)
		}
	}
	walk(specs)
	c.cur = make([][]dval, len(c.fields))
	c.kinds = make([]kind, len(c.fields))
	c.roots = newStates(specs)
	c.specs = specs
	return c
}

func newStates(specs []*aggSpec) []*aggState {
	out := make([]*aggState, len(specs))
	for i, s := range specs {
		out[i] = &aggState{spec: s, min: math.Inf(1), max: math.Inf(-1)}
	}
	return out
}

// bind prepares collection for one index: validates field types, records
// the kind of every field and, when fb is not nil (the per-document path),
// registers facet proxies for the mapped fields.
func (c *aggCollector) bind(m *mappings, fb *search.FacetsBuilder, indexName string) *esError {
	anyMissing := false
	var check func([]*aggSpec) *esError
	check = func(specs []*aggSpec) *esError {
		for _, sp := range specs {
			fm := m.lookup(sp.field)
			if (fm == nil || fm.Kind == kindObject) && sp.valueType != "" {
				fm = valueTypeMapping(sp.valueType)
			}
			if fm != nil && fm.Kind == kindNumber && !isIntegerType(fm.Type) {
				sp.mixedFloat = true
			}
			if fm != nil && fm.Kind != kindObject && fm.Kind != kindText {
				for _, in := range []struct {
					vals []any
					set  *map[dval]bool
				}{{sp.include, &sp.incl}, {sp.exclude, &sp.excl}} {
					if in.vals == nil {
						continue
					}
					if *in.set == nil {
						*in.set = map[dval]bool{}
					}
					for _, v := range in.vals {
						if lv, err := convertLeaf(sp.field, fm, v); err == nil && lv != nil {
							if fm.Kind == kindNumber || fm.Kind == kindDate {
								(*in.set)[dval{f: lv.f, isNum: true}] = true
							} else {
								(*in.set)[dval{s: lv.s}] = true
							}
						}
					}
				}
			}
			if fm != nil && fm.Kind != kindObject {
				if err := checkAggField(sp, fm, indexName); err != nil {
					return shardFailure(indexName, err)
				}
				if sp.fm == nil {
					sp.fm = fm
				}
				if sp.format != "" && fm.Kind == kindNumber && sp.decFmt == nil {
					df, err := compileDecimalFormat(sp.format)
					if err != nil {
						return illegalArgument("%s", err.Error())
					}
					sp.decFmt = df
				}
			}
			if sp.hasMissing {
				mv, err := sp.missingFor(fm)
				if err != nil {
					return shardFailure(indexName, err)
				}
				sp.missingVal = mv
				anyMissing = true
			}
			if err := check(sp.subs); err != nil {
				return err
			}
		}
		return nil
	}
	if err := check(c.specs); err != nil {
		return err
	}
	for i, f := range c.fields {
		fm := m.lookup(f)
		if fm == nil || fm.Kind == kindObject || fm.Kind == kindText {
			c.kinds[i] = kindObject // never receives values
			if fb != nil && anyMissing {
				// documents must still be seen to take the missing value
				fb.Add("eventpipe_agg_"+strconv.Itoa(i), &slotProxy{c: c, slot: i, field: f})
			}
			continue
		}
		c.kinds[i] = fm.Kind
		if fb != nil {
			fb.Add("eventpipe_agg_"+strconv.Itoa(i), &slotProxy{c: c, slot: i, field: f})
		}
	}
	return nil
}

// valueTypeMapping is the mapping value_type gives an unmapped field.
func valueTypeMapping(vt string) *fieldMapping {
	switch vt {
	case "string":
		return &fieldMapping{Type: "keyword", Kind: kindKeyword}
	case "long":
		return &fieldMapping{Type: "long", Kind: kindNumber}
	case "boolean":
		return &fieldMapping{Type: "boolean", Kind: kindBool}
	case "date":
		df, _ := compileDateFormat("")
		return &fieldMapping{Type: "date", Kind: kindDate, dates: df}
	}
	return &fieldMapping{Type: "double", Kind: kindNumber}
}

// allowed says whether a terms bucket key passes include and exclude.
func (a *aggSpec) allowed(k dval) bool {
	if a.include != nil && !a.incl[k] {
		return false
	}
	return !a.excl[k]
}

// missingFor converts the missing value for the field's mapping fm in one
// index (nil: unmapped there, when Elasticsearch takes it as a number for
// the numeric aggregations and as it is written otherwise).
func (a *aggSpec) missingFor(fm *fieldMapping) ([]dval, *esError) {
	bad := func() *esError {
		return illegalArgument("failed to parse missing value [%s] for field [%s]", toStr(a.missing), a.field)
	}
	if fm == nil || fm.Kind == kindObject || fm.Kind == kindText {
		switch a.typ {
		case "sum", "avg", "min", "max", "stats", "histogram", "date_histogram":
			f, err := toNumber(a.missing, "double")
			if err != nil {
				return nil, bad()
			}
			return []dval{{f: f, isNum: true}}, nil
		}
		switch x := a.missing.(type) {
		case json.Number:
			f, err := x.Float64()
			if err != nil {
				return nil, bad()
			}
			return []dval{{f: f, isNum: true}}, nil
		case float64:
			return []dval{{f: x, isNum: true}}, nil
		}
		s, ok := scalarString(a.missing)
		if !ok {
			return nil, bad()
		}
		return []dval{{s: s}}, nil
	}
	lv, err := convertLeaf(a.field, fm, a.missing)
	if err != nil || lv == nil {
		return nil, bad()
	}
	if fm.Kind == kindNumber || fm.Kind == kindDate {
		return []dval{{f: lv.f, isNum: true}}, nil
	}
	return []dval{{s: lv.s}}, nil
}

func checkAggField(a *aggSpec, fm *fieldMapping, indexName string) *esError {
	if fm.Kind == kindText {
		return illegalArgument("Fielddata is disabled on [%s] in [%s]. Text fields are not optimised for operations that require per-document field data like aggregations and sorting, so these operations are disabled by default. Please use a keyword field instead. Alternatively, set fielddata=true on [%s] in order to load field data by uninverting the inverted index. Note that this can use significant memory.", a.field, indexName, a.field)
	}
	switch a.typ {
	case "sum", "avg", "min", "max", "stats", "histogram":
		if fm.Kind == kindKeyword {
			return illegalArgument("Field [%s] of type [%s] is not supported for aggregation [%s]", a.field, fm.Type, a.typ)
		}
	case "date_histogram":
		if fm.Kind != kindDate && fm.Kind != kindNumber {
			return illegalArgument("Field [%s] of type [%s] is not supported for aggregation [date_histogram]", a.field, fm.Type)
		}
	}
	if fm.DocValues != nil && !*fm.DocValues {
		return illegalArgument("Can't load fielddata on [%s] because fielddata is unsupported on fields of type [%s]. Use doc values instead.", a.field, fm.Type)
	}
	return nil
}

type slotProxy struct {
	c     *aggCollector
	slot  int
	field string
}

func (p *slotProxy) StartDoc() {
	c := p.c
	if !c.inDoc {
		c.inDoc = true
		for i := range c.cur {
			c.cur[i] = c.cur[i][:0]
		}
	}
}

func (p *slotProxy) UpdateVisitor(term []byte) {
	c := p.c
	switch c.kinds[p.slot] {
	case kindKeyword, kindBool:
		c.cur[p.slot] = append(c.cur[p.slot], dval{s: string(term)})
	case kindNumber, kindDate:
		pc := numeric.PrefixCoded(term)
		if shift, err := pc.Shift(); err != nil || shift != 0 {
			return
		}
		i64, err := pc.Int64()
		if err != nil {
			return
		}
		c.cur[p.slot] = append(c.cur[p.slot], dval{f: numeric.Int64ToFloat64(i64), isNum: true})
	}
}

func (p *slotProxy) EndDoc() {
	c := p.c
	if c.inDoc {
		c.inDoc = false
		for _, st := range c.roots {
			st.collect(c.cur)
		}
	}
}

func (p *slotProxy) Result() *search.FacetResult { return &search.FacetResult{Field: p.field} }
func (p *slotProxy) Field() string               { return p.field }
func (p *slotProxy) Size() int                   { return 0 }

func (st *aggState) collect(doc [][]dval) {
	vals := doc[st.spec.slot]
	a := st.spec
	if len(vals) == 0 && a.hasMissing {
		vals = a.missingVal
	}
	switch a.typ {
	case "sum", "avg", "min", "max", "stats":
		for _, v := range vals {
			st.count++
			st.sum += v.f
			st.min = math.Min(st.min, v.f)
			st.max = math.Max(st.max, v.f)
		}
		return
	case "value_count":
		st.count += int64(len(vals))
		return
	case "cardinality":
		if st.distinct == nil {
			st.distinct = map[string]struct{}{}
		}
		for _, v := range vals {
			st.distinct[v.key()] = struct{}{}
		}
		return
	}
	if len(vals) == 0 {
		return
	}
	var seen []dval // a document counts once per bucket
	for _, v := range vals {
		key := a.bucketKey(v)
		if a.typ == "terms" && !a.allowed(key) {
			continue
		}
		if len(vals) > 1 {
			dup := false
			for _, s := range seen {
				if s == key {
					dup = true
					break
				}
			}
			if dup {
				continue
			}
			seen = append(seen, key)
		}
		b := st.bucket(key)
		b.count++
		for _, sub := range b.subs {
			sub.collect(doc)
		}
	}
}

// bucketKey is the bucket key of value v.
func (a *aggSpec) bucketKey(v dval) dval {
	switch a.typ {
	case "date_histogram":
		return dval{f: a.dateBucket(v.f), isNum: true}
	case "histogram":
		return dval{f: math.Floor((v.f-a.offset)/a.interval)*a.interval + a.offset, isNum: true}
	}
	return v
}

// bucket returns the bucket of key, creating it.
func (st *aggState) bucket(key dval) *bucketState {
	if st.lastBucket != nil && st.lastKey == key {
		return st.lastBucket
	}
	if st.buckets == nil {
		st.buckets = map[dval]*bucketState{}
	}
	b := st.buckets[key]
	if b == nil {
		b = &bucketState{key: key, subs: newStates(st.spec.subs)}
		st.buckets[key] = b
	}
	if key == key { // not NaN: a NaN key never finds its bucket again
		st.lastKey, st.lastBucket = key, b
	}
	return b
}

// maxOrdCache bounds the per-ordinal bucket cache of one aggregation
// (8 bytes per distinct term of a segment's column).
const maxOrdCache = 1024

// collectColumns is collect for a hit read from columns: cols are the
// columns of the hit's segment per slot, local its number there and doc
// its values per slot. A single-valued hit finds its bucket through its
// term ordinal, so a bucket key is computed and looked up once per
// distinct value of a segment instead of once per hit; the result is the
// same as collect's.
func (st *aggState) collectColumns(cols []*column, local uint64, doc [][]dval) {
	a := st.spec
	if !st.typed {
		st.isBucket, st.typed = bucketAggs[a.typ], true
	}
	c := cols[a.slot]
	if c == nil || len(doc[a.slot]) != 1 || !st.isBucket || a.include != nil || a.exclude != nil {
		st.collect(doc)
		return
	}
	ord := c.ords[c.start[local]]
	if st.ordCol != c {
		st.ordCol, st.ordBuckets = c, nil
		if len(c.strs) <= maxOrdCache {
			st.ordBuckets = make([]*bucketState, len(c.strs))
		}
	}
	var b *bucketState
	if st.ordBuckets != nil {
		b = st.ordBuckets[ord]
	}
	if b == nil {
		key := a.bucketKey(doc[a.slot][0])
		b = st.bucket(key)
		if st.ordBuckets != nil && key == key {
			st.ordBuckets[ord] = b
		}
	}
	b.count++
	for _, sub := range b.subs {
		sub.collectColumns(cols, local, doc)
	}
}

func (v dval) key() string {
	if v.isNum {
		return strconv.FormatFloat(v.f, 'g', -1, 64)
	}
	return v.s
}

// dateBucket returns the bucket start (epoch millis) for t.
func (a *aggSpec) dateBucket(ms float64) float64 {
	if a.fixed > 0 {
		iv := float64(a.fixed.Milliseconds())
		if a.loc != nil && a.loc != time.UTC {
			_, off := time.UnixMilli(int64(ms)).In(a.loc).Zone()
			o := float64(off * 1000)
			return math.Floor((ms+o-a.offset)/iv)*iv + a.offset - o
		}
		return math.Floor((ms-a.offset)/iv)*iv + a.offset
	}
	loc := a.loc
	if loc == nil || loc == time.UTC {
		// Fixed-length calendar units need no calendar arithmetic in UTC.
		var unit float64
		switch a.calendar {
		case 's':
			unit = 1000
		case 'm':
			unit = 60000
		case 'h', 'H':
			unit = 3600000
		case 'd':
			unit = 86400000
		}
		if unit > 0 {
			return math.Floor((ms-a.offset)/unit)*unit + a.offset
		}
		loc = time.UTC
	}
	t := time.UnixMilli(int64(ms) - int64(a.offset)).In(loc)
	return float64(floorUnit(t, a.calendar).UnixMilli()) + a.offset
}

// nextDateBucket returns the key after k.
func (a *aggSpec) nextDateBucket(k float64) float64 {
	if a.fixed > 0 {
		return k + float64(a.fixed.Milliseconds())
	}
	loc := a.loc
	if loc == nil {
		loc = time.UTC
	}
	t := time.UnixMilli(int64(k - a.offset)).In(loc)
	var n time.Time
	if a.calendar == 'q' {
		n = t.AddDate(0, 3, 0)
	} else {
		n = addUnit(t, a.calendar, 1)
	}
	return float64(floorUnit(n, a.calendar).UnixMilli()) + a.offset
}

// result renders the aggregation in Elasticsearch's response shape.
func (st *aggState) result() map[string]any {
	a := st.spec
	fm := a.fm
	out := map[string]any{}
	if a.meta != nil {
		out["meta"] = a.meta
	}
	isDate := fm != nil && fm.Kind == kindDate
	var df *dateFormat
	if isDate {
		df = fm.dates
	}
	if a.format != "" {
		if f, err := compileDateFormat(a.format); err == nil {
			df = f
		}
	}
	asString := func(v float64) (string, bool) {
		switch {
		case isDate && df != nil:
			return df.format(int64(v), nil), true
		case a.decFmt != nil && fm != nil && fm.Kind == kindNumber:
			return a.decFmt.format(v), true
		}
		return "", false
	}
	valueAsString := func(v float64) {
		if s, ok := asString(v); ok {
			out["value_as_string"] = s
		}
	}
	switch a.typ {
	case "sum":
		out["value"] = st.sum
		valueAsString(st.sum)
		return out
	case "avg":
		if st.count == 0 {
			out["value"] = nil
		} else {
			out["value"] = st.sum / float64(st.count)
			valueAsString(st.sum / float64(st.count))
		}
		return out
	case "min", "max":
		v := st.min
		if a.typ == "max" {
			v = st.max
		}
		if st.count == 0 {
			out["value"] = nil
		} else {
			out["value"] = v
			valueAsString(v)
		}
		return out
	case "value_count":
		out["value"] = st.count
		return out
	case "cardinality":
		out["value"] = len(st.distinct)
		return out
	case "stats":
		out["count"] = st.count
		out["sum"] = st.sum
		if st.count == 0 {
			out["min"], out["max"], out["avg"] = nil, nil, nil
		} else {
			out["min"], out["max"], out["avg"] = st.min, st.max, st.sum/float64(st.count)
			// InternalStats renders the *_as_string values when the
			// field has a format (dates, or a numeric "format")
			for _, kv := range []struct {
				k string
				v float64
			}{{"min", st.min}, {"max", st.max}, {"avg", st.sum / float64(st.count)}, {"sum", st.sum}} {
				if s, ok := asString(kv.v); ok {
					out[kv.k+"_as_string"] = s
				}
			}
		}
		return out
	}
	buckets := make([]*bucketState, 0, len(st.buckets))
	for _, b := range st.buckets {
		buckets = append(buckets, b)
	}
	if a.typ != "terms" {
		buckets = st.fillHistogram(buckets)
	}
	sort.Slice(buckets, func(i, j int) bool {
		bi, bj := buckets[i], buckets[j]
		if !a.orderKey && bi.count != bj.count {
			if a.orderAsc {
				return bi.count < bj.count
			}
			return bi.count > bj.count
		}
		c := compareDval(bi.key, bj.key)
		if a.orderKey && !a.orderAsc {
			return c > 0
		}
		return c < 0
	})
	var other int64
	list := make([]any, 0, len(buckets))
	for _, b := range buckets {
		if b.count < a.minDocCount {
			continue
		}
		if a.typ == "terms" && len(list) >= a.size {
			other += b.count
			continue
		}
		bo := map[string]any{"doc_count": b.count}
		st.renderKey(bo, b.key, fm, df)
		for _, sub := range b.subs {
			bo[sub.spec.name] = sub.result()
		}
		list = append(list, bo)
	}
	if a.typ == "terms" {
		out["doc_count_error_upper_bound"] = 0
		out["sum_other_doc_count"] = other
	}
	out["buckets"] = list
	return out
}

func (st *aggState) renderKey(bo map[string]any, k dval, fm *fieldMapping, df *dateFormat) {
	a := st.spec
	switch {
	case a.typ == "date_histogram" || (fm != nil && fm.Kind == kindDate):
		bo["key"] = int64(k.f)
		if df == nil {
			df, _ = compileDateFormat("")
		}
		bo["key_as_string"] = df.format(int64(k.f), a.loc)
	case fm != nil && fm.Kind == kindBool:
		if k.s == "T" {
			bo["key"], bo["key_as_string"] = 1, "true"
		} else {
			bo["key"], bo["key_as_string"] = 0, "false"
		}
	case k.isNum && a.typ == "terms" && fm != nil && isIntegerType(fm.Type) && !a.mixedFloat:
		bo["key"] = int64(k.f)
	case k.isNum:
		bo["key"] = k.f
	default:
		bo["key"] = k.s
	}
	if k.isNum && a.decFmt != nil && fm != nil && fm.Kind == kindNumber {
		bo["key_as_string"] = a.decFmt.format(k.f)
	}
}

// fillHistogram adds the empty buckets between the first and last bucket
// (and extended_bounds) when min_doc_count is 0.
func (st *aggState) fillHistogram(buckets []*bucketState) []*bucketState {
	a := st.spec
	if a.minDocCount > 0 {
		return buckets
	}
	have := map[float64]bool{}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, b := range buckets {
		have[b.key.f] = true
		lo, hi = math.Min(lo, b.key.f), math.Max(hi, b.key.f)
	}
	bucketOf := func(v float64) float64 {
		if a.typ == "date_histogram" {
			return a.dateBucket(v)
		}
		return math.Floor((v-a.offset)/a.interval)*a.interval + a.offset
	}
	if a.boundsMin != nil {
		lo = math.Min(lo, bucketOf(*a.boundsMin))
	}
	if a.boundsMax != nil {
		hi = math.Max(hi, bucketOf(*a.boundsMax))
	}
	if math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return buckets
	}
	for k, n := lo, 0; k <= hi && n < 100000; n++ {
		if !have[k] {
			buckets = append(buckets, &bucketState{key: dval{f: k, isNum: true}, subs: newStates(a.subs)})
		}
		if a.typ == "date_histogram" {
			k = a.nextDateBucket(k)
		} else {
			k = lo + float64(n+1)*a.interval
		}
	}
	return buckets
}

func compareDval(x, y dval) int {
	if x.isNum && y.isNum {
		switch {
		case x.f < y.f:
			return -1
		case x.f > y.f:
			return 1
		}
		return 0
	}
	return strings.Compare(x.s, y.s)
}

// renderAggs renders all root aggregations, optionally with typed keys.
func (c *aggCollector) render(typed bool) map[string]any {
	out := map[string]any{}
	for _, st := range c.roots {
		name := st.spec.name
		if typed {
			name = st.spec.typedName(st.spec.fm) + "#" + name
		}
		res := st.result()
		if typed {
			res = typedSubs(res, st.spec)
		}
		out[name] = res
	}
	return out
}

// typedSubs renames sub-aggregation keys inside buckets for typed_keys.
func typedSubs(res map[string]any, spec *aggSpec) map[string]any {
	list, ok := res["buckets"].([]any)
	if !ok {
		return res
	}
	for _, b := range list {
		bo := b.(map[string]any)
		for _, sub := range spec.subs {
			if v, ok := bo[sub.name].(map[string]any); ok {
				delete(bo, sub.name)
				bo[sub.typedName(sub.fm)+"#"+sub.name] = typedSubs(v, sub)
			}
		}
	}
	return res
}
