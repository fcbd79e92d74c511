package esserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/character"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/single"
	bunicode "github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
)

// Field kinds as the engine treats them.
type kind int

const (
	kindObject kind = iota
	kindText
	kindKeyword
	kindNumber
	kindDate
	kindBool
)

// fieldTypes maps every supported Elasticsearch field type to its kind.
var fieldTypes = map[string]kind{
	"text": kindText, "match_only_text": kindText,
	"keyword": kindKeyword, "constant_keyword": kindKeyword, "wildcard": kindKeyword,
	"long": kindNumber, "integer": kindNumber, "short": kindNumber, "byte": kindNumber,
	"double": kindNumber, "float": kindNumber, "half_float": kindNumber,
	"scaled_float": kindNumber, "unsigned_long": kindNumber,
	"date": kindDate, "date_nanos": kindDate,
	"boolean": kindBool,
	"object":  kindObject, "nested": kindObject,
}

// unsupportedTypes are real Elasticsearch field types this server does not
// implement; they are refused with an honest message instead of
// "No handler for type".
var unsupportedTypes = map[string]bool{
	"ip": true, "geo_point": true, "geo_shape": true, "binary": true, "flattened": true,
	"dense_vector": true, "sparse_vector": true, "rank_feature": true, "rank_features": true,
	"completion": true, "search_as_you_type": true, "token_count": true, "alias": true,
	"join": true, "percolator": true, "histogram": true, "integer_range": true,
	"float_range": true, "long_range": true, "double_range": true, "date_range": true,
	"ip_range": true, "version": true, "murmur3": true, "annotated_text": true,
	"semantic_text": true, "shape": true, "point": true, "aggregate_metric_double": true,
	"counted_keyword": true, "passthrough": true,
}

// acceptedParams are mapping parameters that are accepted and echoed back
// but have no effect here (scoring, storage and tuning knobs).
var acceptedParams = map[string]bool{
	"store": true, "boost": true, "coerce": true, "ignore_malformed": true, "norms": true,
	"index_options": true, "eager_global_ordinals": true, "meta": true, "similarity": true,
	"term_vector": true, "position_increment_gap": true, "fielddata": true, "locale": true,
	"split_queries_on_whitespace": true, "time_series_dimension": true, "time_series_metric": true,
	"index_phrases": true, "index_prefixes": true, "value": true, "include_in_parent": true,
	"include_in_root": true, "subobjects": true, "search_quote_analyzer": true,
}

// fieldMapping is one field of an index mapping. Mappings are immutable
// once published; changes build a new tree.
type fieldMapping struct {
	Type          string
	Kind          kind
	Properties    map[string]*fieldMapping
	Fields        map[string]*fieldMapping
	Format        string
	Analyzer      string
	Index         *bool
	DocValues     *bool
	IgnoreAbove   int
	ScalingFactor float64
	NullValue     any
	Dynamic       string
	Enabled       *bool
	Extra         map[string]any

	dates *dateFormat
}

// mappings is the root mapping of an index.
type mappings struct {
	Dynamic          string
	DateDetection    *bool
	NumericDetection *bool
	Properties       map[string]*fieldMapping
	Extra            map[string]any
}

func newMappings() *mappings { return &mappings{Properties: map[string]*fieldMapping{}} }

func mapperParsing(format string, args ...any) *esError {
	return newErr(http.StatusBadRequest, "mapper_parsing_exception", format, args...)
}

// failedToParseMapping wraps a mapping error as Elasticsearch does on index
// creation: "Failed to parse mapping: <cause>".
func failedToParseMapping(cause *esError) *esError {
	e := mapperParsing("Failed to parse mapping: %s", cause.reason)
	e.causedBy = cause
	return e
}

// parseMappings parses the "mappings" object of a create-index or
// put-mapping request.
func parseMappings(raw json.RawMessage) (*mappings, *esError) {
	m := newMappings()
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return m, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, mapperParsing("Failed to parse mapping: %s", err.Error())
	}
	for k, v := range obj {
		switch k {
		case "properties":
			props, err := parseProperties(v, "")
			if err != nil {
				return nil, err
			}
			m.Properties = props
		case "dynamic":
			d, err := parseDynamic(v)
			if err != nil {
				return nil, err
			}
			m.Dynamic = d
		case "date_detection", "numeric_detection":
			var b bool
			if err := json.Unmarshal(v, &b); err != nil {
				return nil, mapperParsing("Failed to parse mapping: [%s] must be a boolean", k)
			}
			if k == "date_detection" {
				m.DateDetection = &b
			} else {
				m.NumericDetection = &b
			}
		case "_meta", "_routing", "_source", "dynamic_date_formats", "runtime", "_field_names":
			if k == "_source" && bytes.Contains(v, []byte(`"enabled":false`)) {
				return nil, mapperParsing("Failed to parse mapping: [eventpipe] disabling _source is not supported by this server")
			}
			if m.Extra == nil {
				m.Extra = map[string]any{}
			}
			var x any
			_ = json.Unmarshal(v, &x)
			m.Extra[k] = x
		case "dynamic_templates":
			var x []any
			if err := json.Unmarshal(v, &x); err != nil || len(x) > 0 {
				return nil, mapperParsing("Failed to parse mapping: [eventpipe] dynamic_templates are not supported by this server")
			}
		default:
			return nil, failedToParseMapping(mapperParsing("Root mapping definition has unsupported parameters:  [%s : %s]", k, string(v)))
		}
	}
	return m, nil
}

func parseDynamic(v json.RawMessage) (string, *esError) {
	var b bool
	if err := json.Unmarshal(v, &b); err == nil {
		return strconv.FormatBool(b), nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		switch s {
		case "true", "false", "strict", "runtime":
			return s, nil
		}
	}
	return "", mapperParsing("Failed to parse mapping: Could not convert [dynamic] to boolean")
}

func parseProperties(raw json.RawMessage, prefix string) (map[string]*fieldMapping, *esError) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, mapperParsing("Failed to parse mapping: Expected map for property [properties] on [%s]", prefix)
	}
	props := map[string]*fieldMapping{}
	for name, v := range obj {
		if name == "" {
			return nil, failedToParseMapping(illegalArgument("field name cannot be an empty string"))
		}
		fm, err := parseField(prefix+name, v)
		if err != nil {
			return nil, err
		}
		if !strings.Contains(name, ".") {
			if err := addProp(props, name, fm, prefix); err != nil {
				return nil, err
			}
			continue
		}
		// A dotted name is a path of objects, as Elasticsearch expands
		// it ("a.b": {...} is "a": {"properties": {"b": {...}}}).
		parts := strings.Split(name, ".")
		for _, part := range parts {
			if part == "" {
				return nil, failedToParseMapping(illegalArgument("field name cannot contain only whitespace: ['%s']", name))
			}
		}
		leaf := fm
		for i := len(parts) - 1; i > 0; i-- {
			leaf = &fieldMapping{Type: "object", Kind: kindObject,
				Properties: map[string]*fieldMapping{parts[i]: leaf}}
		}
		if err := addProp(props, parts[0], leaf, prefix); err != nil {
			return nil, err
		}
	}
	return props, nil
}

// addProp puts fm at name in props, merging it with an object already
// there (from another dotted name of the same request).
func addProp(props map[string]*fieldMapping, name string, fm *fieldMapping, prefix string) *esError {
	d, ok := props[name]
	if !ok {
		props[name] = fm
		return nil
	}
	if d.Kind != kindObject || fm.Kind != kindObject {
		return failedToParseMapping(illegalArgument("can't merge a non object mapping [%s] with an object mapping", prefix+name))
	}
	if d.Properties == nil {
		d.Properties = map[string]*fieldMapping{}
	}
	for k, v := range fm.Properties {
		if err := addProp(d.Properties, k, v, prefix+name+"."); err != nil {
			return err
		}
	}
	return nil
}

func parseField(path string, raw json.RawMessage) (*fieldMapping, *esError) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, mapperParsing("Failed to parse mapping: Expected map for property [fields] on field [%s] but got a class java.lang.String", path)
	}
	fm := &fieldMapping{Type: "object"}
	if t, ok := obj["type"]; ok {
		if err := json.Unmarshal(t, &fm.Type); err != nil {
			return nil, failedToParseMapping(mapperParsing("No type specified for field [%s]", path))
		}
	} else if _, ok := obj["properties"]; !ok && len(obj) > 0 {
		if _, hasDyn := obj["dynamic"]; !hasDyn {
			if _, hasEnabled := obj["enabled"]; !hasEnabled {
				return nil, failedToParseMapping(mapperParsing("No type specified for field [%s]", path))
			}
		}
	}
	k, ok := fieldTypes[fm.Type]
	if !ok {
		if unsupportedTypes[fm.Type] {
			return nil, failedToParseMapping(mapperParsing("[eventpipe] field type [%s] declared on field [%s] is not supported by this server", fm.Type, path))
		}
		return nil, failedToParseMapping(mapperParsing("No handler for type [%s] declared on field [%s]", fm.Type, path))
	}
	fm.Kind = k
	for p, v := range obj {
		var perr *esError
		switch p {
		case "type":
		case "properties":
			if k != kindObject {
				perr = mapperParsing("unknown parameter [properties] on mapper [%s] of type [%s]", path, fm.Type)
				break
			}
			fm.Properties, perr = parseProperties(v, path+".")
			if perr != nil {
				return nil, perr
			}
		case "fields":
			if k == kindObject {
				perr = mapperParsing("unknown parameter [fields] on mapper [%s] of type [%s]", path, fm.Type)
				break
			}
			var subs map[string]json.RawMessage
			if err := json.Unmarshal(v, &subs); err != nil {
				perr = mapperParsing("Expected map for property [fields] on field [%s]", path)
				break
			}
			fm.Fields = map[string]*fieldMapping{}
			for sn, sv := range subs {
				sub, err := parseField(path+"."+sn, sv)
				if err != nil {
					return nil, err
				}
				if sub.Kind == kindObject {
					return nil, failedToParseMapping(mapperParsing("Type [%s] cannot be used in multi field", sub.Type))
				}
				fm.Fields[sn] = sub
			}
		case "format":
			if k != kindDate {
				perr = mapperParsing("unknown parameter [format] on mapper [%s] of type [%s]", path, fm.Type)
				break
			}
			if err := json.Unmarshal(v, &fm.Format); err != nil {
				perr = mapperParsing("[format] on mapper [%s] must be a string", path)
			}
		case "analyzer", "search_analyzer":
			if k != kindText {
				perr = mapperParsing("unknown parameter [%s] on mapper [%s] of type [%s]", p, path, fm.Type)
				break
			}
			var a string
			_ = json.Unmarshal(v, &a)
			if analyzerFor(a) == nil {
				perr = mapperParsing("analyzer [%s] has not been configured in mappings", a)
				break
			}
			if p == "analyzer" {
				fm.Analyzer = a
			} else if fm.Extra == nil {
				fm.Extra = map[string]any{p: a}
			} else {
				fm.Extra[p] = a
			}
		case "normalizer":
			perr = mapperParsing("[eventpipe] normalizers are not supported by this server (field [%s])", path)
		case "copy_to":
			perr = mapperParsing("[eventpipe] copy_to is not supported by this server (field [%s])", path)
		case "index", "doc_values", "enabled":
			var b bool
			if err := json.Unmarshal(v, &b); err != nil {
				perr = mapperParsing("Failed to parse value [%s] as only [true] or [false] are allowed.", string(v))
				break
			}
			switch p {
			case "index":
				fm.Index = &b
			case "doc_values":
				fm.DocValues = &b
			default:
				if k != kindObject {
					perr = mapperParsing("unknown parameter [enabled] on mapper [%s] of type [%s]", path, fm.Type)
				}
				fm.Enabled = &b
			}
		case "ignore_above":
			if k != kindKeyword {
				perr = mapperParsing("unknown parameter [ignore_above] on mapper [%s] of type [%s]", path, fm.Type)
				break
			}
			if err := json.Unmarshal(v, &fm.IgnoreAbove); err != nil || fm.IgnoreAbove < 0 {
				perr = mapperParsing("[ignore_above] must be a positive integer on field [%s]", path)
			}
		case "scaling_factor":
			if err := json.Unmarshal(v, &fm.ScalingFactor); err != nil {
				perr = mapperParsing("[scaling_factor] must be a number on field [%s]", path)
			}
		case "null_value":
			var x any
			_ = json.Unmarshal(v, &x)
			fm.NullValue = x
		case "dynamic":
			if k != kindObject {
				perr = mapperParsing("unknown parameter [dynamic] on mapper [%s] of type [%s]", path, fm.Type)
				break
			}
			fm.Dynamic, perr = parseDynamic(v)
		default:
			if !acceptedParams[p] {
				perr = mapperParsing("unknown parameter [%s] on mapper [%s] of type [%s]", p, path, fm.Type)
				break
			}
			var x any
			_ = json.Unmarshal(v, &x)
			if fm.Extra == nil {
				fm.Extra = map[string]any{}
			}
			fm.Extra[p] = x
		}
		if perr != nil {
			if strings.HasPrefix(perr.reason, "Failed to parse mapping") {
				return nil, perr
			}
			return nil, failedToParseMapping(perr)
		}
	}
	if fm.Type == "scaled_float" && fm.ScalingFactor == 0 {
		return nil, failedToParseMapping(mapperParsing("Field [scaling_factor] is required"))
	}
	if k == kindDate {
		df, err := compileDateFormat(fm.Format)
		if err != nil {
			return nil, failedToParseMapping(mapperParsing("Invalid format: [%s]: %s", fm.Format, err.Error()))
		}
		fm.dates = df
	}
	return fm, nil
}

// render produces the JSON form of a mapping for GET _mapping.
func (m *mappings) render() map[string]any {
	out := map[string]any{}
	if m.Dynamic != "" {
		out["dynamic"] = m.Dynamic
	}
	if m.DateDetection != nil {
		out["date_detection"] = *m.DateDetection
	}
	if m.NumericDetection != nil {
		out["numeric_detection"] = *m.NumericDetection
	}
	for k, v := range m.Extra {
		out[k] = v
	}
	if len(m.Properties) > 0 {
		out["properties"] = renderProps(m.Properties)
	}
	return out
}

func renderProps(props map[string]*fieldMapping) map[string]any {
	out := make(map[string]any, len(props))
	for name, fm := range props {
		out[name] = fm.render()
	}
	return out
}

func (fm *fieldMapping) render() map[string]any {
	out := map[string]any{}
	if fm.Type != "object" || len(fm.Properties) == 0 {
		out["type"] = fm.Type
	}
	if len(fm.Properties) > 0 {
		out["properties"] = renderProps(fm.Properties)
	}
	if len(fm.Fields) > 0 {
		out["fields"] = renderProps(fm.Fields)
	}
	if fm.Format != "" {
		out["format"] = fm.Format
	}
	if fm.Analyzer != "" {
		out["analyzer"] = fm.Analyzer
	}
	if fm.Index != nil {
		out["index"] = *fm.Index
	}
	if fm.DocValues != nil {
		out["doc_values"] = *fm.DocValues
	}
	if fm.Enabled != nil {
		out["enabled"] = *fm.Enabled
	}
	if fm.IgnoreAbove > 0 {
		out["ignore_above"] = fm.IgnoreAbove
	}
	if fm.ScalingFactor != 0 {
		out["scaling_factor"] = fm.ScalingFactor
	}
	if fm.NullValue != nil {
		out["null_value"] = fm.NullValue
	}
	if fm.Dynamic != "" {
		out["dynamic"] = fm.Dynamic
	}
	for k, v := range fm.Extra {
		out[k] = v
	}
	return out
}

func (m *mappings) marshal() []byte {
	b, _ := json.Marshal(m.render())
	return b
}

// clone deep-copies the mapping tree (fields are shared immutable leaves
// except for the maps, which are copied along the whole tree).
func (m *mappings) clone() *mappings {
	c := *m
	c.Properties = cloneProps(m.Properties)
	return &c
}

func cloneProps(p map[string]*fieldMapping) map[string]*fieldMapping {
	if p == nil {
		return nil
	}
	out := make(map[string]*fieldMapping, len(p))
	for k, v := range p {
		c := *v
		c.Properties = cloneProps(v.Properties)
		c.Fields = cloneProps(v.Fields)
		out[k] = &c
	}
	return out
}

// merge adds the fields of upd to m (for PUT _mapping), refusing type
// changes. It returns a new mapping.
func (m *mappings) merge(upd *mappings) (*mappings, *esError) {
	out := m.clone()
	if upd.Dynamic != "" {
		out.Dynamic = upd.Dynamic
	}
	if upd.DateDetection != nil {
		out.DateDetection = upd.DateDetection
	}
	if upd.NumericDetection != nil {
		out.NumericDetection = upd.NumericDetection
	}
	for k, v := range upd.Extra {
		if out.Extra == nil {
			out.Extra = map[string]any{}
		}
		out.Extra[k] = v
	}
	if err := mergeProps(out.Properties, upd.Properties, ""); err != nil {
		return nil, err
	}
	return out, nil
}

func mergeProps(dst, src map[string]*fieldMapping, prefix string) *esError {
	for name, s := range src {
		d, ok := dst[name]
		if !ok {
			dst[name] = s
			continue
		}
		if d.Type != s.Type {
			return illegalArgument("mapper [%s] cannot be changed from type [%s] to [%s]", prefix+name, d.Type, s.Type)
		}
		if d.Kind == kindObject {
			if d.Properties == nil {
				d.Properties = map[string]*fieldMapping{}
			}
			if err := mergeProps(d.Properties, s.Properties, prefix+name+"."); err != nil {
				return err
			}
			if s.Dynamic != "" {
				d.Dynamic = s.Dynamic
			}
			continue
		}
		if d.Kind == kindDate && d.Format != s.Format && s.Format != "" {
			return illegalArgument("Mapper for [%s] conflicts with existing mapper:\n\tCannot update parameter [format] from [%s] to [%s]", prefix+name, d.Format, s.Format)
		}
		// meta is updatable and replaced as a whole (FieldMapper's meta
		// parameter), not merged key by key
		if meta, ok := s.Extra["meta"]; ok {
			extra := make(map[string]any, len(d.Extra)+1)
			for k, v := range d.Extra {
				extra[k] = v
			}
			extra["meta"] = meta
			d.Extra = extra
		}
		if s.Fields != nil {
			if d.Fields == nil {
				d.Fields = map[string]*fieldMapping{}
			}
			if err := mergeProps(d.Fields, s.Fields, prefix+name+"."); err != nil {
				return err
			}
		}
	}
	return nil
}

// lookup resolves a dotted field path (including multi-fields such as
// "title.keyword") to its mapping.
func (m *mappings) lookup(path string) *fieldMapping {
	props := m.Properties
	var cur *fieldMapping
	parts := strings.Split(path, ".")
	for i := 0; i < len(parts); i++ {
		// Allow field names that themselves contain dots.
		found := false
		for j := len(parts); j > i; j-- {
			name := strings.Join(parts[i:j], ".")
			if f, ok := props[name]; ok {
				cur, i, found = f, j-1, true
				break
			}
		}
		if !found {
			return nil
		}
		if cur.Kind == kindObject {
			props = cur.Properties
		} else {
			props = cur.Fields
		}
	}
	return cur
}

// leafPaths lists every non-object field path (including multi-fields).
func (m *mappings) leafPaths() []string {
	var out []string
	var walk func(props map[string]*fieldMapping, prefix string)
	walk = func(props map[string]*fieldMapping, prefix string) {
		for name, f := range props {
			if f.Kind == kindObject {
				walk(f.Properties, prefix+name+".")
				continue
			}
			out = append(out, prefix+name)
			walk(f.Fields, prefix+name+".")
		}
	}
	walk(m.Properties, "")
	sort.Strings(out)
	return out
}

// Analyzers. These are assembled from bleve's own components.

var analyzers = func() map[string]analysis.Analyzer {
	lower := lowercase.NewLowerCaseFilter()
	return map[string]analysis.Analyzer{
		// Elasticsearch's standard analyzer: Unicode text segmentation
		// (UAX#29) and lowercasing, no stop words.
		"standard": &analysis.DefaultAnalyzer{Tokenizer: bunicode.NewUnicodeTokenizer(), TokenFilters: []analysis.TokenFilter{lower}},
		// simple: split on non-letters, lowercase.
		"simple": &analysis.DefaultAnalyzer{Tokenizer: character.NewCharacterTokenizer(unicode.IsLetter), TokenFilters: []analysis.TokenFilter{lower}},
		// whitespace: split on whitespace only.
		"whitespace": &analysis.DefaultAnalyzer{Tokenizer: character.NewCharacterTokenizer(func(r rune) bool { return !unicode.IsSpace(r) })},
		// keyword: the whole input is one token.
		"keyword": &analysis.DefaultAnalyzer{Tokenizer: single.NewSingleTokenTokenizer()},
	}
}()

func analyzerFor(name string) analysis.Analyzer {
	if name == "" || name == "default" {
		name = "standard"
	}
	return analyzers[name]
}

// analyze returns the terms of text under the field's analyzer.
func (fm *fieldMapping) analyze(text string) []string {
	a := analyzerFor(fm.Analyzer)
	if fm.Kind != kindText {
		a = analyzers["keyword"]
	}
	toks := a.Analyze([]byte(text))
	out := make([]string, 0, len(toks))
	for _, t := range toks {
		out = append(out, string(t.Term))
	}
	return out
}

// Document parsing against a mapping.

// leafValue is one indexable value of a document.
type leafValue struct {
	path string
	fm   *fieldMapping
	s    string  // text/keyword; "T"/"F" for booleans
	f    float64 // numbers; epoch millis for dates
}

// docParser walks a decoded JSON document against a mapping, optionally
// adding dynamic fields (copy-on-write).
type docParser struct {
	id      string
	m       *mappings
	dynamic bool // whether new fields may be added
	changed bool
	leaves  []leafValue
	names   map[string]bool
}

func docParsingErr(format string, args ...any) *esError {
	e := newErr(http.StatusBadRequest, "document_parsing_exception", format, args...)
	return e
}

func preview(v any) string {
	b, _ := json.Marshal(v)
	s := string(b)
	if str, ok := v.(string); ok {
		s = str
	}
	if len(s) > 20 {
		s = s[:20] + "..."
	}
	return s
}

// decodeSource decodes a document source, which must be one JSON object.
func decodeSource(src []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if doc == nil {
		return nil, fmt.Errorf("document source must be an object")
	}
	if dec.More() {
		return nil, fmt.Errorf("unexpected data after the document object")
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("unexpected data after the document object")
	}
	return doc, nil
}

// parseDocument validates doc against m and collects its indexable leaves.
// With allowDynamic, unmapped fields are added per the dynamic setting and
// the resulting mapping is returned when it changed.
func parseDocument(id string, doc map[string]any, m *mappings, allowDynamic bool) (*docParser, *esError) {
	p := &docParser{id: id, m: m, dynamic: allowDynamic, names: map[string]bool{}}
	rootDyn := m.Dynamic
	if rootDyn == "" {
		rootDyn = "true"
	}
	if err := p.object(doc, "", rootDyn); err != nil {
		return nil, err
	}
	return p, nil
}

// ensureWritable makes the mapping private to this parser before mutation.
func (p *docParser) ensureWritable() {
	if !p.changed {
		p.m = p.m.clone()
		p.changed = true
	}
}

func (p *docParser) object(obj map[string]any, prefix string, dyn string) *esError {
	keys := slices.Sorted(maps.Keys(obj))
	for _, k := range keys {
		v := obj[k]
		if k == "" {
			return docParsingErr("field name cannot be an empty string")
		}
		if strings.HasPrefix(k, "_") && prefix == "" && isMetadataField(k) {
			return docParsingErr("Field [%s] is a metadata field and cannot be added inside a document. Use the index API request parameters.", k)
		}
		// Dotted names are objects: {"a.b":1} == {"a":{"b":1}}.
		if i := strings.IndexByte(k, '.'); i > 0 && i < len(k)-1 {
			if err := p.object(map[string]any{k[:i]: map[string]any{k[i+1:]: v}}, prefix, dyn); err != nil {
				return err
			}
			continue
		}
		if err := p.value(k, v, prefix, dyn); err != nil {
			return err
		}
	}
	return nil
}

func isMetadataField(k string) bool {
	switch k {
	case "_id", "_index", "_source", "_routing", "_version", "_seq_no", "_primary_term", "_field_names", "_ignored", "_doc_count", "_tier", "_data_stream_timestamp":
		return true
	}
	return false
}

func (p *docParser) value(name string, v any, prefix string, dyn string) *esError {
	path := prefix + name
	if arr, ok := v.([]any); ok {
		for _, e := range arr {
			if err := p.value(name, e, prefix, dyn); err != nil {
				return err
			}
		}
		return nil
	}
	fm := p.propsAt(prefix)[name]
	if v == nil {
		if fm != nil && fm.NullValue != nil && fm.Kind != kindObject {
			return p.leaf(path, fm, fm.NullValue)
		}
		return nil
	}
	if fm == nil {
		switch dyn {
		case "strict":
			return newErr(http.StatusBadRequest, "strict_dynamic_mapping_exception",
				"[1:2] mapping set to strict, dynamic introduction of [%s] within [%s] is not allowed", name, parentName(prefix))
		case "false", "runtime":
			return nil
		}
		if !p.dynamic {
			return nil
		}
		fm = p.dynamicField(v)
		p.ensureWritable()
		p.writablePropsAt(prefix)[name] = fm
	}
	if fm.Kind == kindObject {
		obj, ok := v.(map[string]any)
		if !ok {
			return docParsingErr("object mapping for [%s] tried to parse field [%s] as object, but found a concrete value", path, name)
		}
		if fm.Enabled != nil && !*fm.Enabled {
			return nil
		}
		p.names[path] = true
		childDyn := fm.Dynamic
		if childDyn == "" {
			childDyn = dyn
		}
		return p.object(obj, path+".", childDyn)
	}
	return p.leaf(path, fm, v)
}

func parentName(prefix string) string {
	if prefix == "" {
		return "_doc"
	}
	return strings.TrimSuffix(prefix, ".")
}

// propsAt returns the properties for the object at prefix (nil when absent).
func (p *docParser) propsAt(prefix string) map[string]*fieldMapping {
	props := p.m.Properties
	if prefix == "" {
		return props
	}
	for _, part := range strings.Split(strings.TrimSuffix(prefix, "."), ".") {
		f := props[part]
		if f == nil {
			return nil
		}
		props = f.Properties
	}
	return props
}

// writablePropsAt is propsAt on the parser's private mapping, creating
// property maps on the way.
func (p *docParser) writablePropsAt(prefix string) map[string]*fieldMapping {
	if p.m.Properties == nil {
		p.m.Properties = map[string]*fieldMapping{}
	}
	props := p.m.Properties
	if prefix == "" {
		return props
	}
	for _, part := range strings.Split(strings.TrimSuffix(prefix, "."), ".") {
		f := props[part]
		if f.Properties == nil {
			f.Properties = map[string]*fieldMapping{}
		}
		props = f.Properties
	}
	return props
}

// dynamicField applies Elasticsearch's default dynamic mapping rules.
func (p *docParser) dynamicField(v any) *fieldMapping {
	switch x := v.(type) {
	case map[string]any:
		return &fieldMapping{Type: "object", Kind: kindObject, Properties: map[string]*fieldMapping{}}
	case bool:
		return &fieldMapping{Type: "boolean", Kind: kindBool}
	case json.Number:
		if _, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return &fieldMapping{Type: "long", Kind: kindNumber}
		}
		return &fieldMapping{Type: "float", Kind: kindNumber}
	case string:
		if p.m.DateDetection == nil || *p.m.DateDetection {
			if looksLikeDate(x) {
				return dynamicDateField(x)
			}
		}
		if p.m.NumericDetection != nil && *p.m.NumericDetection {
			if _, err := strconv.ParseInt(x, 10, 64); err == nil {
				return &fieldMapping{Type: "long", Kind: kindNumber}
			}
			if _, err := strconv.ParseFloat(x, 64); err == nil {
				return &fieldMapping{Type: "float", Kind: kindNumber}
			}
		}
		return &fieldMapping{Type: "text", Kind: kindText, Fields: map[string]*fieldMapping{
			"keyword": {Type: "keyword", Kind: kindKeyword, IgnoreAbove: 256},
		}}
	}
	return &fieldMapping{Type: "text", Kind: kindText}
}

func (p *docParser) leaf(path string, fm *fieldMapping, v any) *esError {
	if _, isObj := v.(map[string]any); isObj {
		return docParsingErr("failed to parse field [%s] of type [%s] in document with id '%s'. Preview of field's value: '%s'", path, fm.Type, p.id, preview(v)).
			withCause(illegalArgument("Can't parse [%s] as a value of type [%s]: found an object", path, fm.Type))
	}
	lv, err := convertLeaf(path, fm, v)
	if err != nil {
		return docParsingErr("failed to parse field [%s] of type [%s] in document with id '%s'. Preview of field's value: '%s'", path, fm.Type, p.id, preview(v)).
			withCause(illegalArgument("%s", err.Error()))
	}
	if lv == nil {
		return nil
	}
	p.leaves = append(p.leaves, *lv)
	p.names[path] = true
	// Multi-fields index the same value under path.sub.
	for sub, sfm := range fm.Fields {
		slv, err := convertLeaf(path+"."+sub, sfm, v)
		if err != nil {
			return docParsingErr("failed to parse field [%s.%s] of type [%s] in document with id '%s'. Preview of field's value: '%s'", path, sub, sfm.Type, p.id, preview(v)).
				withCause(illegalArgument("%s", err.Error()))
		}
		if slv != nil {
			p.leaves = append(p.leaves, *slv)
			p.names[path+"."+sub] = true
		}
	}
	return nil
}

func (e *esError) withCause(c *esError) *esError {
	e.causedBy = c
	self := *e
	self.causedBy = nil
	e.rootCause = &self
	return e
}

// scalarString renders a JSON scalar as Elasticsearch does for string fields.
func scalarString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return string(x), true
	case bool:
		return strconv.FormatBool(x), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	}
	return "", false
}

// convertLeaf coerces a scalar for fm. A nil result means "nothing to index"
// (for example a keyword over ignore_above).
func convertLeaf(path string, fm *fieldMapping, v any) (*leafValue, error) {
	lv := &leafValue{path: path, fm: fm}
	switch fm.Kind {
	case kindText, kindKeyword:
		s, ok := scalarString(v)
		if !ok {
			return nil, fmt.Errorf("unsupported value for field [%s]", path)
		}
		if fm.Kind == kindKeyword && fm.IgnoreAbove > 0 && len([]rune(s)) > fm.IgnoreAbove {
			return nil, nil
		}
		lv.s = s
	case kindNumber:
		f, err := toNumber(v, fm.Type)
		if err != nil {
			return nil, err
		}
		lv.f = f
	case kindDate:
		ms, err := fm.dates.parse(v)
		if err != nil {
			return nil, err
		}
		lv.f = float64(ms)
	case kindBool:
		switch x := v.(type) {
		case bool:
			lv.s = boolTerm(x)
		case string:
			switch x {
			case "true":
				lv.s = "T"
			case "false", "":
				lv.s = "F"
			default:
				return nil, reasonf("Failed to parse value [%s] as only [true] or [false] are allowed.", x)
			}
		default:
			return nil, reasonf("Failed to parse value [%v] as only [true] or [false] are allowed.", v)
		}
	}
	if fm.Index != nil && !*fm.Index && (fm.DocValues != nil && !*fm.DocValues) {
		return nil, nil
	}
	return lv, nil
}

func boolTerm(b bool) string {
	if b {
		return "T"
	}
	return "F"
}

var intRanges = map[string][2]float64{
	"long":          {math.MinInt64, math.MaxInt64},
	"integer":       {math.MinInt32, math.MaxInt32},
	"short":         {math.MinInt16, math.MaxInt16},
	"byte":          {math.MinInt8, math.MaxInt8},
	"unsigned_long": {0, math.MaxUint64},
}

// toNumber coerces a JSON number or numeric string, truncating for integer
// types as Elasticsearch's coerce does.
func toNumber(v any, typ string) (float64, error) {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = string(x)
	case string:
		s = strings.TrimSpace(x)
	case float64:
		s = strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return 0, reasonf("Current token (VALUE_%s) not numeric, can not use numeric value accessors", strings.ToUpper(strconv.FormatBool(x)))
	default:
		return 0, fmt.Errorf("unsupported value")
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, reasonf("For input string: \"%s\"", s)
	}
	if r, ok := intRanges[typ]; ok {
		f = math.Trunc(f)
		if f < r[0] || f > r[1] {
			return 0, reasonf("Value [%s] is out of range for %s", s, typ)
		}
	}
	return f, nil
}

// esReason is an error whose text is an Elasticsearch reason, quoted as
// Elasticsearch words it (capitalised, sometimes with a final period).
type esReason string

func (r esReason) Error() string { return string(r) }

func reasonf(format string, args ...any) error { return esReason(fmt.Sprintf(format, args...)) }
