package esserver

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
)

// checkName applies Elasticsearch's index/alias name rules and returns why
// the name is invalid ("" when valid).
func checkName(name string) string {
	if name == "" {
		return "must not be empty"
	}
	if strings.ContainsAny(name, "\\/*?\"<>| ,") {
		return `must not contain the following characters [ , ", *, \, <, |, ,, >, /, ?]`
	}
	if strings.Contains(name, "#") {
		return "must not contain '#'"
	}
	if strings.Contains(name, ":") {
		return "must not contain ':'"
	}
	if strings.HasPrefix(name, "_") || strings.HasPrefix(name, "-") || strings.HasPrefix(name, "+") {
		return "must not start with '_', '-', or '+'"
	}
	if name == "." || name == ".." {
		return "must not be '.' or '..'"
	}
	if len(name) > 255 {
		return "index name is too long, (" + itoa(int64(len(name))) + " > 255)"
	}
	if strings.ToLower(name) != name {
		return "must be lowercase"
	}
	return ""
}

func validateIndexName(name string) *esError {
	if why := checkName(name); why != "" {
		return invalidIndexName(name, why)
	}
	return nil
}

// refuseUnsupportedMapping refuses mapping features a request may not
// introduce: the nested type (this server has no nested documents: it
// would index nested objects as plain objects, so nested queries,
// aggregations and index.nested_objects.limit could not behave as in
// Elasticsearch) and a required _routing (custom routing is refused).
// Mappings recovered from disk are not checked, so that data written by an
// earlier version still opens.
func refuseUnsupportedMapping(m *mappings) *esError {
	if r, ok := m.Extra["_routing"].(map[string]any); ok && r["required"] == true {
		return failedToParseMapping(mapperParsing("[eventpipe] [_routing] required is not supported by this server: custom routing is not supported"))
	}
	var walk func(props map[string]*fieldMapping, prefix string) *esError
	walk = func(props map[string]*fieldMapping, prefix string) *esError {
		for name, fm := range props {
			if fm.Type == "nested" {
				return failedToParseMapping(mapperParsing("[eventpipe] field type [nested] declared on field [%s] is not supported by this server", prefix+name))
			}
			if err := refuseUnmodelledParams(prefix+name, fm); err != nil {
				return err
			}
			for sn, sub := range fm.Fields {
				if err := refuseUnmodelledParams(prefix+name+"."+sn, sub); err != nil {
					return err
				}
			}
			if err := walk(fm.Properties, prefix+name+"."); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(m.Properties, "")
}

// refuseUnmodelledParams refuses mapping parameters whose effect on
// indexing or search is observable and not modelled: ignore_malformed
// true (malformed values would fail the document instead of being
// skipped), coerce false (strings would still be coerced to numbers), a
// similarity other than BM25, and subobjects false.
func refuseUnmodelledParams(path string, fm *fieldMapping) *esError {
	for k, v := range fm.Extra {
		refuse := false
		switch k {
		case "ignore_malformed":
			refuse = v == true
		case "coerce":
			refuse = v == false
		case "similarity":
			refuse = v != "BM25"
		case "subobjects":
			refuse = v == false || v == "false"
		}
		if refuse {
			return failedToParseMapping(mapperParsing("[eventpipe] mapping parameter [%s: %v] on field [%s] is not supported by this server", k, v, path))
		}
	}
	return nil
}

func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)[:22]
}

// createIndexReq is a parsed create-index body.
type createIndexReq struct {
	settings map[string]string
	mappings *mappings
	aliases  map[string]aliasMeta
}

func parseCreateIndex(body []byte) (*createIndexReq, *esError) {
	req := &createIndexReq{settings: map[string]string{}, mappings: newMappings()}
	if !jsonBody(body) {
		return req, nil
	}
	var obj map[string]json.RawMessage
	if err := decodeJSON(body, &obj); err != nil {
		return nil, xContentParseError(err)
	}
	for k, v := range obj {
		switch k {
		case "settings":
			flat, err := flattenSettings(v)
			if err != nil {
				return nil, err
			}
			req.settings = flat
		case "mappings":
			m, err := parseMappings(v)
			if err != nil {
				return nil, err
			}
			if err := refuseUnsupportedMapping(m); err != nil {
				return nil, err
			}
			req.mappings = m
		case "aliases":
			var al map[string]map[string]json.RawMessage
			if err := json.Unmarshal(v, &al); err != nil {
				return nil, xContentParseError(err)
			}
			req.aliases = map[string]aliasMeta{}
			for name, p := range al {
				meta, err := parseAliasProps(p, "Unsupported field [%s]")
				if err != nil {
					return nil, err
				}
				name, err = resolveDateMathName(name, time.Now())
				if err != nil {
					return nil, err
				}
				req.aliases[name] = meta
			}
		default:
			return nil, parsingError("unknown key [%s] for create index", k)
		}
	}
	return req, nil
}

// createIndex creates an index durably-ordered in the log and returns the
// log position of its creation.
func (s *Server) createIndex(name string, req *createIndexReq) (*index, int64, *esError) {
	if err := validateIndexName(name); err != nil {
		return nil, 0, err
	}
	if err := refuseUnmodelledBlocks(req.settings); err != nil {
		return nil, 0, err
	}
	st, serr := parseSettings(req.settings, 1)
	if serr != nil {
		return nil, 0, serr
	}
	s.cpMu.RLock()
	defer s.cpMu.RUnlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if ix := s.indices[name]; ix != nil {
		return ix, 0, newErr(http.StatusBadRequest, "resource_already_exists_exception", "index [%s/%s] already exists", name, ix.uuid).
			with("index_uuid", ix.uuid).with("index", name)
	}
	if _, ok := s.aliases[name]; ok {
		return nil, 0, invalidIndexName(name, "already exists as alias")
	}
	for al := range req.aliases {
		if err := validateAliasName(al); err != nil {
			return nil, 0, err
		}
		if al == name || s.indices[al] != nil {
			return nil, 0, newErr(http.StatusBadRequest, "invalid_alias_name_exception",
				"Invalid alias name [%s]: an index or data stream exists with the same name as the alias", al)
		}
	}
	ix := newIndex(name, newUUID(), time.Now().UnixMilli(), st, req.mappings)
	if _, err := s.openEngine(ix); err != nil {
		return nil, 0, internalError(err)
	}
	ix.lastRefresh.Store(time.Now().UnixNano())
	pos, werr := s.wal.append(encodeMeta(recCreateIndex, metaRecord{
		Name: name, UUID: ix.uuid, Created: ix.created, Settings: st.raw, Mappings: req.mappings.marshal(),
	}))
	if werr == nil && len(req.aliases) > 0 {
		aliases := cloneAliases(s.aliases)
		for al, meta := range req.aliases {
			if aliases[al] == nil {
				aliases[al] = map[string]aliasMeta{}
			}
			aliases[al][name] = meta
		}
		pos, werr = s.wal.append(encodeMeta(recAliases, metaRecord{Aliases: aliases}))
		if werr == nil {
			s.aliases = aliases
		}
	}
	if werr != nil {
		_ = ix.closeEngine()
		_ = os.RemoveAll(ix.dir)
		return nil, 0, internalError(werr)
	}
	s.indices[name] = ix
	s.log.Info("index created", "index", name, "uuid", ix.uuid)
	return ix, pos, nil
}

func (s *Server) handleCreateIndex(rc *reqCtx, p []string) (int, any) {
	name := p[0]
	if err := validateIndexName(name); err != nil {
		return errResp(err)
	}
	req, err := parseCreateIndex(rc.body)
	if err != nil {
		return errResp(err)
	}
	_, pos, err := s.createIndex(name, req)
	if err != nil {
		return errResp(err)
	}
	if werr := s.wal.waitDurable(pos); werr != nil {
		return errResp(internalError(werr))
	}
	return http.StatusOK, map[string]any{"acknowledged": true, "shards_acknowledged": true, "index": name}
}

func (s *Server) handleDeleteIndex(rc *reqCtx, p []string) (int, any) {
	s.cpMu.RLock()
	s.mu.Lock()
	targets, rerr := s.deleteTargetsLocked(p[0], rc.q)
	if rerr != nil {
		s.mu.Unlock()
		s.cpMu.RUnlock()
		return errResp(rerr)
	}
	if len(targets) == 0 {
		s.mu.Unlock()
		s.cpMu.RUnlock()
		return http.StatusOK, map[string]any{"acknowledged": true}
	}
	var pos int64
	for _, ix := range targets {
		var werr error
		pos, werr = s.wal.append(encodeMeta(recDeleteIndex, metaRecord{Name: ix.name}))
		if werr != nil {
			s.mu.Unlock()
			s.cpMu.RUnlock()
			return errResp(internalError(werr))
		}
		ix.mu.Lock()
		ix.removed = true
		ix.mu.Unlock()
		delete(s.indices, ix.name)
		s.dropAliasesOf(ix.name)
	}
	s.mu.Unlock()
	s.cpMu.RUnlock()
	if werr := s.wal.waitDurable(pos); werr != nil {
		return errResp(internalError(werr))
	}
	for _, ix := range targets {
		if err := ix.closeEngine(); err != nil {
			s.log.Warn("close search index", "index", ix.name, "error", err)
		}
		if err := removeAllRetry(ix.dir); err != nil {
			s.log.Warn("remove search index files", "index", ix.name, "error", err)
		}
		s.log.Info("index deleted", "index", ix.name)
	}
	return http.StatusOK, map[string]any{"acknowledged": true}
}

func removeAllRetry(dir string) error {
	var err error
	for range 3 {
		if err = os.RemoveAll(dir); err == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return err
}

func (s *Server) handleIndexExists(rc *reqCtx, p []string) (int, any) {
	if _, err := s.resolveSearch(p[0], rc.q); err != nil {
		return http.StatusNotFound, nil
	}
	if !isWildcard(p[0]) {
		return http.StatusOK, nil
	}
	idx, _ := s.resolveSearch(p[0], rc.q)
	if len(idx) == 0 {
		return http.StatusNotFound, nil
	}
	return http.StatusOK, nil
}

func (s *Server) aliasesOf(name string) map[string]any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string]any{}
	for a, m := range s.aliases {
		if meta, ok := m[name]; ok {
			out[a] = meta.render()
		}
	}
	return out
}

func (s *Server) handleGetIndex(rc *reqCtx, p []string) (int, any) {
	expr := p[0]
	if strings.HasPrefix(expr, "_") && expr != "_all" {
		return errResp(invalidIndexName(expr, "must not start with '_', '-', or '+'"))
	}
	indices, err := s.resolveSearch(expr, rc.q)
	if err != nil {
		return errResp(err)
	}
	// features: which sections to return (rest-api-spec/api/indices.get.json).
	feats := map[string]bool{"aliases": true, "mappings": true, "settings": true}
	if v := rc.q.Get("features"); v != "" {
		feats = map[string]bool{}
		for _, f := range strings.Split(v, ",") {
			switch f {
			case "aliases", "mappings", "settings":
				feats[f] = true
			default:
				return errResp(illegalArgument("Invalid features specified [%s]", f))
			}
		}
	}
	out := map[string]any{}
	for _, ix := range indices {
		entry := map[string]any{}
		if feats["aliases"] {
			entry["aliases"] = s.aliasesOf(ix.name)
		}
		if feats["mappings"] {
			entry["mappings"] = ix.currentMapping().render()
		}
		if feats["settings"] {
			s.settingsEntry(rc, ix, nil, entry)
		}
		out[ix.name] = entry
	}
	return http.StatusOK, out
}

func (s *Server) handleGetMapping(rc *reqCtx, p []string) (int, any) {
	indices, err := s.resolveSearch(p[0], rc.q)
	if err != nil {
		return errResp(err)
	}
	out := map[string]any{}
	for _, ix := range indices {
		out[ix.name] = map[string]any{"mappings": ix.currentMapping().render()}
	}
	return http.StatusOK, out
}

func (s *Server) handlePutMapping(rc *reqCtx, p []string) (int, any) {
	// RestPutMappingAction (Elasticsearch 8): a body that is a single
	// "_doc" object is a typed request, no longer accepted.
	var top map[string]json.RawMessage
	if json.Unmarshal(rc.body, &top) == nil && len(top) == 1 && top["_doc"] != nil {
		return errResp(illegalArgument("Types cannot be provided in put mapping requests"))
	}
	upd, err := parseMappings(rc.body)
	if err != nil {
		return errResp(err)
	}
	if err := refuseUnsupportedMapping(upd); err != nil {
		return errResp(err)
	}
	indices, err := s.resolveSearch(p[0], rc.q)
	if err != nil {
		return errResp(err)
	}
	// Validate against every target first, then apply: all or nothing.
	for _, ix := range indices {
		if _, merr := ix.currentMapping().merge(upd); merr != nil {
			return errResp(merr)
		}
	}
	err = s.updateEach(indices, func(ix *index) ([]byte, func(), *esError) {
		m, merr := ix.mapping.merge(upd)
		if merr != nil {
			return nil, nil, merr
		}
		return encodeMeta(recMapping, metaRecord{Name: ix.name, Mappings: m.marshal()}), func() { ix.mapping = m }, nil
	})
	if err != nil {
		return errResp(err)
	}
	return http.StatusOK, map[string]any{"acknowledged": true}
}

// updateEach changes the metadata of each index in turn. change runs with
// ix.mu held and returns the log record to append and the function that
// installs the change once the record is appended; the first error stops
// the loop (indices already changed stay changed). It returns once the
// last record is durable.
func (s *Server) updateEach(indices []*index, change func(ix *index) ([]byte, func(), *esError)) *esError {
	s.cpMu.RLock()
	var pos int64
	for _, ix := range indices {
		ix.mu.Lock()
		rec, install, err := change(ix)
		if err == nil {
			var werr error
			if pos, werr = s.wal.append(rec); werr != nil {
				err = internalError(werr)
			} else {
				install()
			}
		}
		ix.mu.Unlock()
		if err != nil {
			s.cpMu.RUnlock()
			return err
		}
	}
	s.cpMu.RUnlock()
	if werr := s.wal.waitDurable(pos); werr != nil {
		return internalError(werr)
	}
	return nil
}

// settingsEntry renders the settings of ix (and with include_defaults its
// "defaults") for GET _settings and GET {index}; names filters the keys.
func (s *Server) settingsEntry(rc *reqCtx, ix *index, names []string, entry map[string]any) {
	flatKeys := boolParam(rc, "flat_settings")
	flat := ix.currentSettings().flat(ix)
	if boolParam(rc, "human") {
		// IndexMetadata.addHumanReadableSettings
		flat["index.creation_date_string"] = javaInstantString(ix.created)
		flat["index.version.created_string"] = versionNumber
	}
	entry["settings"] = settingsView(flat, names, flatKeys)
	if boolParam(rc, "include_defaults") {
		defs := map[string]string{}
		for k, v := range s.defaultSettings() {
			if _, set := flat[k]; !set {
				defs[k] = v
			}
		}
		entry["defaults"] = settingsView(defs, names, flatKeys)
	}
}

// handleGetSettings serves GET /_settings[/{name}] and
// /{index}/_settings[/{name}] (rest-api-spec/api/indices.get_settings.json);
// p = [indexExpr, names].
func (s *Server) handleGetSettings(rc *reqCtx, p []string) (int, any) {
	indices, err := s.resolveSearch(p[0], rc.q)
	if err != nil {
		return errResp(err)
	}
	var names []string
	if len(p) > 1 && p[1] != "" && p[1] != "_all" {
		names = strings.Split(p[1], ",")
	}
	out := map[string]any{}
	for _, ix := range indices {
		entry := map[string]any{}
		s.settingsEntry(rc, ix, names, entry)
		if len(names) > 0 && len(entry["settings"].(map[string]any)) == 0 && (entry["defaults"] == nil || len(entry["defaults"].(map[string]any)) == 0) {
			continue // Elasticsearch leaves out indices with nothing matching
		}
		out[ix.name] = entry
	}
	return http.StatusOK, out
}

func (s *Server) handlePutSettings(rc *reqCtx, p []string) (int, any) {
	flat, err := flattenSettings(rc.body)
	if err != nil {
		return errResp(err)
	}
	if _, ok := flat["index.settings"]; ok {
		return errResp(illegalArgument("unknown setting [index.settings]"))
	}
	// {"settings": {...}} wrappers are flattened to index.settings.*;
	// accept them as Elasticsearch does.
	for k, v := range flat {
		if strings.HasPrefix(k, "index.settings.") {
			delete(flat, k)
			nk := strings.TrimPrefix(k, "index.settings.")
			if !strings.HasPrefix(nk, "index.") {
				nk = "index." + nk
			}
			flat[nk] = v
		}
	}
	if err := refuseUnmodelledBlocks(flat); err != nil {
		return errResp(err)
	}
	indices, err := s.resolveSearch(p[0], rc.q)
	if err != nil {
		return errResp(err)
	}
	// Static settings: reopen=true (Elasticsearch 8.12+) closes, updates
	// and reopens the index; this server has nothing to close, so it just
	// updates them. The final ones cannot change at all.
	reopen := boolParam(rc, "reopen")
	for _, k := range slices.Sorted(maps.Keys(flat)) {
		if k == "index.number_of_shards" || k == "index.number_of_routing_shards" {
			return errResp(illegalArgument("final index setting [%s], not updateable", k))
		}
		if staticSettings[k] && !reopen {
			var names []string
			for _, ix := range indices {
				names = append(names, ix.name+"/"+ix.uuid)
			}
			return errResp(illegalArgument("Can't update non dynamic settings [[%s]] for open indices [[%s]]", k, strings.Join(names, "], [")))
		}
	}
	put := s.putSettings
	if boolParam(rc, "preserve_existing") {
		put = s.putSettingsPreserving
	}
	if err := put(indices, flat); err != nil {
		return errResp(err)
	}
	return http.StatusOK, map[string]any{"acknowledged": true}
}

// putSettingsPreserving applies preserve_existing=true: each index gets
// only the keys it has not set.
func (s *Server) putSettingsPreserving(indices []*index, flat map[string]string) *esError {
	for _, ix := range indices {
		have := ix.currentSettings().raw
		only := map[string]string{}
		for k, v := range flat {
			if _, set := have[k]; !set {
				only[k] = v
			}
		}
		if len(only) == 0 {
			continue
		}
		if err := s.putSettings([]*index{ix}, only); err != nil {
			return err
		}
	}
	return nil
}

// putSettings merges flat settings into those of each index ("" resets a
// key) and logs the result.
func (s *Server) putSettings(indices []*index, flat map[string]string) *esError {
	return s.updateEach(indices, func(ix *index) ([]byte, func(), *esError) {
		next := map[string]string{}
		for k, v := range ix.settings.raw {
			next[k] = v
		}
		for k, v := range flat {
			if v == "" {
				delete(next, k)
			} else {
				next[k] = v
			}
		}
		st, err := parseSettings(next, 1)
		if err != nil {
			return nil, nil, err
		}
		return encodeMeta(recSettings, metaRecord{Name: ix.name, Settings: st.raw}), func() { ix.settings = st }, nil
	})
}

func (s *Server) handleRefresh(rc *reqCtx, p []string) (int, any) {
	indices, err := s.resolveSearch(p[0], rc.q)
	if err != nil {
		return errResp(err)
	}
	total, ok := 0, 0
	for _, ix := range indices {
		rep := ix.currentSettings().Replicas
		total += 1 + rep
		if rerr := s.refresh(ix); rerr != nil {
			return errResp(internalError(rerr))
		}
		ok++
	}
	return http.StatusOK, map[string]any{"_shards": map[string]any{"total": total, "successful": ok, "failed": 0}}
}

// javaInstantString renders epoch millis as java.time's
// ZonedDateTime.toString does in UTC: seconds and fraction only when not
// zero ("2024-03-05T10:00Z", "2024-03-05T10:00:07.250Z").
func javaInstantString(ms int64) string {
	t := time.UnixMilli(ms).UTC()
	out := t.Format("2006-01-02T15:04")
	if t.Second() != 0 || t.Nanosecond() != 0 {
		out += t.Format(":05")
	}
	if t.Nanosecond() != 0 {
		out += fmt.Sprintf(".%03d", t.Nanosecond()/1e6)
	}
	return out + "Z"
}

// deleteTargetsLocked resolves the expression of DELETE /{index} with the
// indices options of Elasticsearch's DeleteIndexRequest: a name must be an
// index (an alias is refused, or skipped with ignore_unavailable, like a
// missing name); wildcards and _all need action.destructive_requires_name
// false and expand to indices only, never through aliases, as
// expand_wildcards says (default open,closed: every index but the hidden
// ones); with allow_no_indices=false a wildcard matching nothing is a
// 404. s.mu is held.
func (s *Server) deleteTargetsLocked(expr string, q url.Values) ([]*index, *esError) {
	if err := s.failDestructiveLocked(expr); err != nil {
		return nil, err
	}
	ignoreUnavailable := q.Get("ignore_unavailable") == "true"
	allowNoIndices := q.Get("allow_no_indices") != "false"
	open, hidden := expandWildcards(q)
	var targets []*index
	sawWildcard := false
	for _, part := range strings.Split(expr, ",") {
		switch {
		case strings.HasPrefix(part, "-") && sawWildcard:
			targets = slices.DeleteFunc(targets, func(ix *index) bool { return wildMatch(part[1:], ix.name) })
		case part == "_all" || strings.Contains(part, "*"):
			sawWildcard = true
			matched := s.wildcardIndicesLocked(part, open, hidden)
			if len(matched) == 0 && !allowNoIndices {
				return nil, indexNotFound(part)
			}
			targets = appendNew(targets, matched...)
		default:
			ix := s.indices[part]
			if ix != nil {
				targets = appendNew(targets, ix)
				continue
			}
			if ignoreUnavailable {
				continue
			}
			if _, isAlias := s.aliases[part]; isAlias {
				return nil, illegalArgument("The provided expression [%s] matches an alias, specify the corresponding concrete indices instead.", part)
			}
			return nil, indexNotFound(part)
		}
	}
	return targets, nil
}

// wildcardIndicesLocked returns the indices (not aliases) a wildcard or
// _all matches, by name: dot-prefixed names only for a dot-prefixed
// pattern, hidden indices only with hidden. s.mu is held.
func (s *Server) wildcardIndicesLocked(pattern string, open, hidden bool) []*index {
	var out []*index
	if !open {
		return nil
	}
	all := pattern == "_all" || pattern == "*"
	for name, ix := range s.indices {
		if strings.HasPrefix(name, ".") && (all || !strings.HasPrefix(pattern, ".")) {
			continue
		}
		if !all && !wildMatch(pattern, name) {
			continue
		}
		if !hidden && ix.currentSettings().raw["index.hidden"] == "true" {
			continue
		}
		out = append(out, ix)
	}
	slices.SortFunc(out, func(a, b *index) int { return strings.Compare(a.name, b.name) })
	return out
}

// appendNew appends the indices not yet in list.
func appendNew(list []*index, add ...*index) []*index {
	for _, ix := range add {
		if !slices.Contains(list, ix) {
			list = append(list, ix)
		}
	}
	return list
}
