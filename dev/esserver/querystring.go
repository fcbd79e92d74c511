package esserver

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode"

	"github.com/blevesearch/bleve/v2/search/query"
)

// The query_string query and q= URI search (which Elasticsearch turns into
// a query_string query, RestActions.urlParamsToQueryBuilder) over a subset
// of Lucene's classic query syntax:
//
//   - terms, with default_operator (OR or AND) between them;
//   - field:value, field:(group), _exists_:field;
//   - AND, OR, NOT, &&, ||, !, +, -, parentheses;
//   - wildcards (* and ?) and prefixes (val*), field:* (exists);
//   - ranges field:[a TO b], field:{a TO b}, field:>a, >=, <, <=;
//   - term~ fuzziness, ^boost, backslash escapes;
//   - "quoted" values that analyse to at most one term.
//
// Phrases of several terms, proximity (~ on a phrase) and /regex/ are
// refused with a 400 naming them. Terms go through a match query per
// field (so the field's analyzer, or the analyzer parameter, applies);
// with no field and no default_field the index's index.query.default_field
// (default "*") is used, leniently, over every mapped field, the fields
// combined as dis_max as Elasticsearch does.

// qsOptions are the query_string parameters that shape the query.
type qsOptions struct {
	defaultFields   []string
	and             bool
	analyzer        json.RawMessage
	lenient         bool
	analyzeWildcard bool
	allowLeadingWc  bool
}

type qsOccur int

const (
	qsShould qsOccur = iota
	qsMust
	qsMustNot
)

type qsClause struct {
	occur qsOccur
	node  *qsNode
}

// qsNode is a parsed query_string expression: a group of clauses or a leaf.
type qsNode struct {
	clauses []qsClause // group
	field   string     // leaf: "" = default fields
	text    string
	quoted  bool
	exists  bool
	isRange bool
	lo, hi  string // "" or "*" = open
	loIncl  bool
	hiIncl  bool
	fuzzy   string
	boost   float64
}

type qsParser struct {
	s   []rune
	pos int
	and bool
}

func qsError(format string, args ...any) *esError {
	// QueryStringQueryBuilder wraps Lucene's ParseException as
	// query_shard_exception "Failed to parse query [...]".
	return queryShardErr(format, args...)
}

func unsupportedQS(what string) *esError {
	return parsingError("[eventpipe] query_string syntax [%s] is not supported by this server", what)
}

func (p *qsParser) eof() bool { return p.pos >= len(p.s) }

func (p *qsParser) skipSpace() {
	for !p.eof() && unicode.IsSpace(p.s[p.pos]) {
		p.pos++
	}
}

func (p *qsParser) peekWord(w string) bool {
	rs := []rune(w)
	if p.pos+len(rs) > len(p.s) || string(p.s[p.pos:p.pos+len(rs)]) != w {
		return false
	}
	end := p.pos + len(rs)
	return end == len(p.s) || unicode.IsSpace(p.s[end]) || p.s[end] == '(' || p.s[end] == ')'
}

// parseGroup parses clauses up to the end or a closing parenthesis,
// combining them with Lucene's QueryParserBase.addClause rules.
func (p *qsParser) parseGroup(field string, depth int) (*qsNode, *esError) {
	g := &qsNode{}
	for {
		p.skipSpace()
		if p.eof() {
			break
		}
		if p.s[p.pos] == ')' {
			if depth == 0 {
				return nil, qsError("Failed to parse query [%s]", string(p.s))
			}
			break
		}
		conj := 0 // 0 none, 1 AND, 2 OR
		switch {
		case p.peekWord("AND") || p.peekWord("&&"):
			conj = 1
		case p.peekWord("OR") || p.peekWord("||"):
			conj = 2
		}
		if conj != 0 {
			if p.peekWord("AND") {
				p.pos += 3
			} else {
				p.pos += 2
			}
			if len(g.clauses) == 0 {
				return nil, qsError("Failed to parse query [%s]", string(p.s))
			}
			p.skipSpace()
		}
		mod := 0 // 0 none, 1 required, 2 prohibited
		switch {
		case p.eof():
			return nil, qsError("Failed to parse query [%s]", string(p.s))
		case p.s[p.pos] == '+':
			mod = 1
			p.pos++
		case p.s[p.pos] == '-' || p.s[p.pos] == '!':
			mod = 2
			p.pos++
		case p.peekWord("NOT"):
			mod = 2
			p.pos += 3
			p.skipSpace()
		}
		n, err := p.parseClause(field, depth)
		if err != nil {
			return nil, err
		}
		// QueryParserBase.addClause.
		if len(g.clauses) > 0 {
			last := &g.clauses[len(g.clauses)-1]
			if conj == 1 && last.occur != qsMustNot {
				last.occur = qsMust
			}
			if p.and && conj == 2 && last.occur != qsMustNot {
				last.occur = qsShould
			}
		}
		var required, prohibited bool
		if !p.and {
			prohibited = mod == 2
			required = mod == 1
			if conj == 1 && !prohibited {
				required = true
			}
		} else {
			prohibited = mod == 2
			required = !prohibited && conj != 2
		}
		occ := qsShould
		switch {
		case required && !prohibited:
			occ = qsMust
		case prohibited:
			occ = qsMustNot
		}
		g.clauses = append(g.clauses, qsClause{occur: occ, node: n})
	}
	return g, nil
}

const qsSpecial = `()[]{}:^~"\/`

// readTerm reads an unquoted term, resolving backslash escapes.
func (p *qsParser) readTerm() string {
	var b strings.Builder
	for !p.eof() {
		r := p.s[p.pos]
		if unicode.IsSpace(r) || strings.ContainsRune(qsSpecial, r) && r != '\\' {
			break
		}
		if r == '\\' && p.pos+1 < len(p.s) {
			b.WriteRune(p.s[p.pos+1])
			p.pos += 2
			continue
		}
		b.WriteRune(r)
		p.pos++
	}
	return b.String()
}

func (p *qsParser) parseClause(field string, depth int) (*qsNode, *esError) {
	p.skipSpace()
	if p.eof() {
		return nil, qsError("Failed to parse query [%s]", string(p.s))
	}
	var n *qsNode
	var err *esError
	switch r := p.s[p.pos]; r {
	case '(':
		p.pos++
		n, err = p.parseGroup(field, depth+1)
		if err != nil {
			return nil, err
		}
		if p.eof() || p.s[p.pos] != ')' {
			return nil, qsError("Failed to parse query [%s]", string(p.s))
		}
		p.pos++
	case '/':
		return nil, unsupportedQS("/regular expression/")
	default:
		if field == "" {
			// field:value?
			save := p.pos
			name := p.readTerm()
			if name != "" && !p.eof() && p.s[p.pos] == ':' {
				p.pos++
				if name == "_exists_" {
					f := p.readTerm()
					if f == "" {
						return nil, qsError("Failed to parse query [%s]", string(p.s))
					}
					return p.suffixes(&qsNode{field: f, exists: true})
				}
				if !p.eof() && p.s[p.pos] == '(' {
					p.pos++
					n, err = p.parseGroup(name, depth+1)
					if err != nil {
						return nil, err
					}
					if p.eof() || p.s[p.pos] != ')' {
						return nil, qsError("Failed to parse query [%s]", string(p.s))
					}
					p.pos++
					return p.suffixes(n)
				}
				return p.parseValue(name)
			}
			p.pos = save
		}
		return p.parseValue(field)
	}
	return p.suffixes(n)
}

// parseValue parses the value of a (possibly implicit) field.
func (p *qsParser) parseValue(field string) (*qsNode, *esError) {
	if p.eof() {
		return nil, qsError("Failed to parse query [%s]", string(p.s))
	}
	n := &qsNode{field: field}
	switch r := p.s[p.pos]; {
	case r == '/':
		return nil, unsupportedQS("/regular expression/")
	case r == '"':
		end := p.pos + 1
		var b strings.Builder
		for end < len(p.s) && p.s[end] != '"' {
			if p.s[end] == '\\' && end+1 < len(p.s) {
				end++
			}
			b.WriteRune(p.s[end])
			end++
		}
		if end >= len(p.s) {
			return nil, qsError("Failed to parse query [%s]", string(p.s))
		}
		p.pos = end + 1
		n.text, n.quoted = b.String(), true
	case r == '[' || r == '{':
		end := p.pos + 1
		for end < len(p.s) && p.s[end] != ']' && p.s[end] != '}' {
			end++
		}
		if end >= len(p.s) {
			return nil, qsError("Failed to parse query [%s]", string(p.s))
		}
		parts := strings.Fields(string(p.s[p.pos+1 : end]))
		if len(parts) != 3 || parts[1] != "TO" {
			return nil, qsError("Failed to parse query [%s]", string(p.s))
		}
		n.isRange = true
		n.lo, n.hi = strings.Trim(parts[0], `"`), strings.Trim(parts[2], `"`)
		n.loIncl, n.hiIncl = r == '[', p.s[end] == ']'
		p.pos = end + 1
	case r == '>' || r == '<':
		op := string(r)
		p.pos++
		if !p.eof() && p.s[p.pos] == '=' {
			op += "="
			p.pos++
		}
		v := p.readTerm()
		if v == "" {
			return nil, qsError("Failed to parse query [%s]", string(p.s))
		}
		n.isRange = true
		switch op {
		case ">":
			n.lo = v
		case ">=":
			n.lo, n.loIncl = v, true
		case "<":
			n.hi = v
		case "<=":
			n.hi, n.hiIncl = v, true
		}
	default:
		n.text = p.readTerm()
		if n.text == "" {
			return nil, qsError("Failed to parse query [%s]", string(p.s))
		}
	}
	return p.suffixes(n)
}

// suffixes reads ~fuzziness and ^boost after a clause.
func (p *qsParser) suffixes(n *qsNode) (*qsNode, *esError) {
	for !p.eof() && (p.s[p.pos] == '~' || p.s[p.pos] == '^') {
		c := p.s[p.pos]
		p.pos++
		start := p.pos
		for !p.eof() && (unicode.IsDigit(p.s[p.pos]) || p.s[p.pos] == '.') {
			p.pos++
		}
		num := string(p.s[start:p.pos])
		if c == '^' {
			b, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return nil, qsError("Failed to parse query [%s]", string(p.s))
			}
			n.boost = b
			continue
		}
		if n.quoted {
			return nil, unsupportedQS("\"phrase\"~slop")
		}
		if n.clauses != nil || n.isRange || n.exists {
			return nil, qsError("Failed to parse query [%s]", string(p.s))
		}
		if num == "" {
			num = "AUTO"
		}
		n.fuzzy = num
	}
	return n, nil
}

// compileQueryString is the query_string query.
func compileQueryString(c *qctx, name string, p map[string]json.RawMessage) (query.Query, *esError) {
	opts := qsOptions{allowLeadingWc: true}
	var text string
	b := 1.0
	for k, v := range p {
		var err *esError
		switch k {
		case "query":
			var x any
			if decodeJSON(v, &x) != nil {
				return nil, parsingError("[query_string] failed to parse field [query]")
			}
			s, ok := scalarString(x)
			if !ok {
				return nil, parsingError("[query_string] unknown token [%s] after [query]", tokenKind(v))
			}
			text = s
		case "default_field":
			var f string
			if json.Unmarshal(v, &f) != nil {
				return nil, parsingError("[query_string] failed to parse field [default_field]")
			}
			opts.defaultFields = []string{f}
		case "fields":
			if json.Unmarshal(v, &opts.defaultFields) != nil {
				return nil, parsingError("[query_string] query does not support [fields] of that type")
			}
		case "default_operator":
			var op string
			if json.Unmarshal(v, &op) != nil {
				return nil, parsingError("[query_string] failed to parse field [default_operator]")
			}
			and, oerr := parseOperator(op)
			if oerr != nil {
				return nil, oerr
			}
			opts.and = and
		case "analyzer":
			opts.analyzer = v
		case "lenient":
			opts.lenient, err = boolOption(name, k, p)
		case "analyze_wildcard":
			opts.analyzeWildcard, err = boolOption(name, k, p)
		case "allow_leading_wildcard":
			opts.allowLeadingWc, err = boolOption(name, k, p)
		case "boost":
			b, err = boostOf(name, p)
		case "_name":
			// like every query's _name: accepted, matched_queries are not reported
		default:
			if qsUnsupportedParams[k] {
				return nil, parsingError("[eventpipe] [query_string] parameter [%s] is not supported by this server", k)
			}
			return nil, parsingError("[query_string] query does not support [%s]", k)
		}
		if err != nil {
			return nil, err
		}
	}
	if _, ok := p["query"]; !ok {
		return nil, parsingError("[query_string] must be provided with a [query]")
	}
	q, err := c.queryString(text, opts)
	if err != nil {
		return nil, err
	}
	return withBoost(q, b), nil
}

// qsUnsupportedParams are real query_string parameters not implemented.
var qsUnsupportedParams = map[string]bool{
	"quote_analyzer": true, "quote_field_suffix": true, "phrase_slop": true, "fuzziness": true,
	"fuzzy_prefix_length": true, "fuzzy_max_expansions": true, "fuzzy_transpositions": true,
	"fuzzy_rewrite": true, "rewrite": true, "minimum_should_match": true, "tie_breaker": true,
	"type": true, "time_zone": true, "enable_position_increments": true, "max_determinized_states": true,
	"auto_generate_synonyms_phrase_query": true, "escape": true, "auto_generate_phrase_queries": true,
}

// parseOperator reads default_operator as Operator.fromString does
// (valueOf of the upper-cased name).
func parseOperator(op string) (bool, *esError) {
	switch strings.ToUpper(op) {
	case "OR":
		return false, nil
	case "AND":
		return true, nil
	}
	return false, illegalArgument("No enum constant org.elasticsearch.index.query.Operator.%s", strings.ToUpper(op))
}

// queryString parses and compiles a query_string expression.
func (c *qctx) queryString(text string, opts qsOptions) (query.Query, *esError) {
	if a := opts.analyzer; a != nil {
		var name string
		if json.Unmarshal(a, &name) != nil {
			return nil, parsingError("[query_string] failed to parse field [analyzer]")
		}
		if analyzerFor(name) == nil {
			return nil, queryShardErr("[query_string] analyzer [%s] not found", name)
		}
	}
	if len(opts.defaultFields) == 0 {
		opts.defaultFields = c.defaultFields
	}
	if len(opts.defaultFields) == 0 {
		opts.defaultFields = []string{"*"}
	}
	p := &qsParser{s: []rune(text), and: opts.and}
	g, err := p.parseGroup("", 0)
	if err != nil {
		return nil, err
	}
	if len(g.clauses) == 0 {
		return query.NewMatchNoneQuery(), nil
	}
	return c.qsCompile(g, opts)
}

func (c *qctx) qsCompile(n *qsNode, opts qsOptions) (query.Query, *esError) {
	if n.clauses == nil {
		q, err := c.qsLeaf(n, opts)
		if err != nil {
			return nil, err
		}
		if n.boost != 0 {
			q = withBoost(q, n.boost)
		}
		return q, nil
	}
	if len(n.clauses) == 1 && n.clauses[0].occur != qsMustNot {
		q, err := c.qsCompile(n.clauses[0].node, opts)
		if err != nil {
			return nil, err
		}
		if n.boost != 0 {
			q = withBoost(q, n.boost)
		}
		return q, nil
	}
	var must, should, mustNot []query.Query
	for _, cl := range n.clauses {
		q, err := c.qsCompile(cl.node, opts)
		if err != nil {
			return nil, err
		}
		switch cl.occur {
		case qsMust:
			must = append(must, q)
		case qsMustNot:
			mustNot = append(mustNot, q)
		default:
			should = append(should, q)
		}
	}
	minShould := -1
	if len(must) > 0 {
		minShould = 0
	}
	b := 1.0
	if n.boost != 0 {
		b = n.boost
	}
	return boolQuery(must, nil, should, mustNot, minShould, b), nil
}

// qsField is one field a leaf searches, with its ^boost.
type qsField struct {
	name  string
	boost float64
}

// qsFields resolves the fields of a leaf: its own field (possibly a
// pattern) or the default fields, with their ^boosts. expanded reports an
// expansion of a pattern, where Elasticsearch is lenient.
func (c *qctx) qsFields(n *qsNode, opts qsOptions) (fields []qsField, expanded bool, err *esError) {
	pats := opts.defaultFields
	if n.field != "" {
		pats = []string{n.field}
	}
	for _, f := range pats {
		boost := 1.0
		if i := strings.LastIndexByte(f, '^'); i > 0 {
			b, perr := strconv.ParseFloat(f[i+1:], 64)
			if perr != nil {
				return nil, false, parsingError("[query_string] malformed boost in field [%s]", f)
			}
			f, boost = f[:i], b
		}
		if !strings.Contains(f, "*") {
			fields = append(fields, qsField{f, boost})
			continue
		}
		expanded = true
		for _, lp := range c.m.leafPaths() {
			if wildMatch(f, lp) {
				fields = append(fields, qsField{lp, boost})
			}
		}
	}
	return fields, expanded, nil
}

func (c *qctx) qsLeaf(n *qsNode, opts qsOptions) (query.Query, *esError) {
	allFields := n.field == "*" || n.field == "" && len(opts.defaultFields) == 1 && opts.defaultFields[0] == "*"
	if allFields && n.text == "*" && !n.quoted && !n.exists && !n.isRange {
		// *:* and * over all fields match every document.
		return query.NewMatchAllQuery(), nil
	}
	fields, expanded, ferr := c.qsFields(n, opts)
	if ferr != nil {
		return nil, ferr
	}
	lenient := opts.lenient || expanded
	var alts []query.Query
	for _, f := range fields {
		q, err := c.qsFieldQuery(f.name, n, opts)
		if err != nil {
			if lenient && err.typ == "query_shard_exception" {
				continue
			}
			return nil, err
		}
		if _, none := q.(*query.MatchNoneQuery); none && len(fields) > 1 {
			continue
		}
		alts = append(alts, withBoost(q, f.boost))
	}
	return newDisMax(alts, 0), nil
}

// qsFieldQuery is a leaf's query on one field.
func (c *qctx) qsFieldQuery(field string, n *qsNode, opts qsOptions) (query.Query, *esError) {
	if n.exists {
		raw, _ := json.Marshal(map[string]any{"field": field})
		return compileExists(c, "exists", map[string]json.RawMessage{"field": raw})
	}
	fm := c.m.lookup(field)
	if n.isRange {
		if field == "_id" || field == "_index" {
			return nil, parsingError("[eventpipe] range queries on [%s] are not supported by this server", field)
		}
		rp := map[string]any{}
		if n.lo != "" && n.lo != "*" {
			rp[map[bool]string{true: "gte", false: "gt"}[n.loIncl]] = n.lo
		}
		if n.hi != "" && n.hi != "*" {
			rp[map[bool]string{true: "lte", false: "lt"}[n.hiIncl]] = n.hi
		}
		raw, _ := json.Marshal(rp)
		q, err := compileRange(c, "range", map[string]json.RawMessage{field: raw})
		if err != nil && err.typ == "parse_exception" {
			err = queryShardErr("%s", err.reason)
		}
		return q, err
	}
	if !n.quoted && strings.ContainsAny(n.text, "*?") {
		if n.text == "*" {
			raw, _ := json.Marshal(field)
			return compileExists(c, "exists", map[string]json.RawMessage{"field": raw})
		}
		if !opts.allowLeadingWc && (n.text[0] == '*' || n.text[0] == '?') {
			return nil, qsError("Failed to parse query [%s]", n.text)
		}
		if fm == nil || (fm.Kind != kindText && fm.Kind != kindKeyword) {
			if field == "_id" || field == "_index" || fm != nil {
				return nil, queryShardErr("Can only use wildcard queries on keyword and text fields - not on [%s] which is of type [%s]", field, fieldType(fm, field))
			}
			return query.NewMatchNoneQuery(), nil
		}
		pat := n.text
		if fm.Kind == kindText {
			// The normalised form of the term, as the field's search
			// analyzer would produce it (lower-casing).
			if a := analyzerFor(fm.Analyzer); a != nil && fm.Analyzer != "keyword" && fm.Analyzer != "whitespace" {
				pat = strings.ToLower(pat)
			}
		}
		var q query.FieldableQuery
		if i := strings.IndexAny(pat, "*?"); i == len(pat)-1 && pat[i] == '*' {
			q = query.NewPrefixQuery(pat[:i])
		} else {
			q = query.NewWildcardQuery(pat)
		}
		q.SetField(field)
		return q, nil
	}
	if n.quoted && fm != nil && fm.Kind == kindText {
		a := fm.Analyzer
		if opts.analyzer != nil {
			_ = json.Unmarshal(opts.analyzer, &a)
		}
		if len((&fieldMapping{Kind: kindText, Analyzer: a}).analyze(n.text)) > 1 {
			return nil, unsupportedQS("\"phrase\"")
		}
	}
	mp := map[string]any{"query": n.text}
	if opts.and {
		mp["operator"] = "and"
	}
	if n.fuzzy != "" {
		mp["fuzziness"] = n.fuzzy
	}
	if opts.analyzer != nil {
		mp["analyzer"] = opts.analyzer
	}
	raw, _ := json.Marshal(map[string]any{field: mp})
	var p map[string]json.RawMessage
	_ = decodeJSON(raw, &p)
	return compileMatch(c, "match", p)
}

func fieldType(fm *fieldMapping, field string) string {
	if fm == nil {
		return field
	}
	return fm.Type
}
