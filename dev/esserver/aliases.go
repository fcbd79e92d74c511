package esserver

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"
	"time"
)

// aliasMeta is the per-index configuration of an alias.
type aliasMeta struct {
	IsWriteIndex *bool `json:"is_write_index,omitempty"`
	IsHidden     *bool `json:"is_hidden,omitempty"`
}

func (a aliasMeta) render() map[string]any {
	out := map[string]any{}
	if a.IsWriteIndex != nil {
		out["is_write_index"] = *a.IsWriteIndex
	}
	if a.IsHidden != nil {
		out["is_hidden"] = *a.IsHidden
	}
	return out
}

func cloneAliases(in map[string]map[string]aliasMeta) map[string]map[string]aliasMeta {
	out := make(map[string]map[string]aliasMeta, len(in))
	for a, m := range in {
		c := make(map[string]aliasMeta, len(m))
		for k, v := range m {
			c[k] = v
		}
		out[a] = c
	}
	return out
}

// dropAliasesOf removes an index from every alias. s.mu is held.
func (s *Server) dropAliasesOf(name string) {
	for a, m := range s.aliases {
		delete(m, name)
		if len(m) == 0 {
			delete(s.aliases, a)
		}
	}
}

func isWildcard(s string) bool { return strings.ContainsAny(s, "*?") }

func wildMatch(pattern, name string) bool {
	ok, _ := path.Match(pattern, name)
	return ok
}

// resolveSearch expands a multi-target expression (comma list, wildcards,
// aliases, _all) into concrete indices.
//
// expand_wildcards (open, closed, hidden, none, all; default open) says
// what wildcards and _all expand to: this server has no closed indices, so
// without open they expand to nothing; hidden (or all) adds the indices
// with index.hidden: true, which are otherwise left out.
func (s *Server) resolveSearch(expr string, q url.Values) ([]*index, *esError) {
	ignoreUnavailable := q.Get("ignore_unavailable") == "true"
	allowNoIndices := q.Get("allow_no_indices") != "false"
	expandOpen, expandHidden := expandWildcards(q)
	s.mu.RLock()
	defer s.mu.RUnlock()
	// wildOK says whether a wildcard may expand to ix.
	wildOK := func(ix *index) bool {
		if !expandOpen {
			return false
		}
		return expandHidden || ix.currentSettings().raw["index.hidden"] != "true"
	}
	set := map[string]*index{}
	addAll := func() {
		for name, ix := range s.indices {
			if !strings.HasPrefix(name, ".") && wildOK(ix) {
				set[name] = ix
			}
		}
	}
	if expr == "" || expr == "_all" {
		addAll()
	} else {
		sawWildcard := false
		for _, part := range strings.Split(expr, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			if strings.HasPrefix(part, "-") && sawWildcard {
				pat := part[1:]
				for name := range set {
					if wildMatch(pat, name) {
						delete(set, name)
					}
				}
				for a, m := range s.aliases {
					if wildMatch(pat, a) {
						for name := range m {
							delete(set, name)
						}
					}
				}
				continue
			}
			if part == "_all" || part == "*" {
				sawWildcard = true
				addAll()
				continue
			}
			if isWildcard(part) {
				sawWildcard = true
				matched := false
				for name, ix := range s.indices {
					if wildMatch(part, name) && (!strings.HasPrefix(name, ".") || strings.HasPrefix(part, ".")) && wildOK(ix) {
						set[name] = ix
						matched = true
					}
				}
				for a, m := range s.aliases {
					if wildMatch(part, a) && (expandHidden || !aliasHidden(m)) {
						for name := range m {
							if ix := s.indices[name]; ix != nil && expandOpen {
								set[name] = ix
								matched = true
							}
						}
					}
				}
				if !matched && !allowNoIndices {
					return nil, indexNotFound(part)
				}
				continue
			}
			if ix := s.indices[part]; ix != nil {
				set[part] = ix
				continue
			}
			if m, ok := s.aliases[part]; ok {
				for name := range m {
					if ix := s.indices[name]; ix != nil {
						set[name] = ix
					}
				}
				continue
			}
			if !ignoreUnavailable {
				return nil, indexNotFound(part)
			}
		}
	}
	out := make([]*index, 0, len(set))
	for _, ix := range set {
		out = append(out, ix)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// expandWildcards reads expand_wildcards (open, closed, hidden, none,
// all; default open): whether wildcards expand to the open indices, and
// to the hidden ones too. This server has no closed indices.
func expandWildcards(q url.Values) (open, hidden bool) {
	if !q.Has("expand_wildcards") {
		return true, false
	}
	for _, w := range strings.Split(q.Get("expand_wildcards"), ",") {
		switch w {
		case "open":
			open = true
		case "hidden":
			hidden = true
		case "all":
			open, hidden = true, true
		}
	}
	return open, hidden
}

// aliasHidden says whether an alias is hidden (is_hidden must agree on
// all its indices): wildcards only expand to it with expand_wildcards
// hidden or all.
func aliasHidden(m map[string]aliasMeta) bool {
	for _, meta := range m {
		if meta.IsHidden != nil && *meta.IsHidden {
			return true
		}
	}
	return false
}

// writeIndexOf resolves an alias to its write index. s.mu is held.
func (s *Server) writeIndexOf(alias string, m map[string]aliasMeta) (*index, *esError) {
	var write, only string
	for name, meta := range m {
		if meta.IsWriteIndex != nil && *meta.IsWriteIndex {
			write = name
		}
		only = name
	}
	if write == "" && len(m) == 1 {
		if meta := m[only]; meta.IsWriteIndex == nil {
			write = only
		}
	}
	if write == "" {
		return nil, illegalArgument("no write index is defined for alias [%s]. The write index may be explicitly disabled using is_write_index=false or the alias points to multiple indices without one being designated as a write index", alias)
	}
	return s.indices[write], nil
}

// lookupWrite finds the index a write to name goes to; nil without error
// means the name is free (candidate for auto-creation).
func (s *Server) lookupWrite(name string) (*index, *esError) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if ix := s.indices[name]; ix != nil {
		return ix, nil
	}
	if m, ok := s.aliases[name]; ok {
		return s.writeIndexOf(name, m)
	}
	return nil, nil
}

// resolveSingle resolves a name for single-document reads.
func (s *Server) resolveSingle(name string) (*index, *esError) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if ix := s.indices[name]; ix != nil {
		return ix, nil
	}
	if m, ok := s.aliases[name]; ok {
		if len(m) == 1 {
			for n := range m {
				if ix := s.indices[n]; ix != nil {
					return ix, nil
				}
			}
		}
		names := slices.Sorted(maps.Keys(m))
		return nil, illegalArgument("alias [%s] has more than one index associated with it [%s], can't execute a single index op", name, strings.Join(names, ", "))
	}
	return nil, indexNotFound(name)
}

type aliasAction struct {
	kind       string // add, remove, remove_index
	indices    []string
	aliases    []string
	isWrite    *bool
	isHidden   *bool
	mustExist  *bool
	hasIndices bool
	resolved   []string // the concrete indices of indices, once applied
}

func stringsOf(raw json.RawMessage) ([]string, bool) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, true
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		return many, true
	}
	return nil, false
}

func parseAliasActions(body []byte) ([]aliasAction, *esError) {
	var req map[string]json.RawMessage
	if err := decodeJSON(body, &req); err != nil {
		return nil, xContentParseError(err)
	}
	var items []map[string]json.RawMessage
	for k, v := range req {
		if k != "actions" {
			return nil, newErr(http.StatusBadRequest, "x_content_parse_exception", "[1:2] [aliases] unknown field [%s]", k)
		}
		if err := json.Unmarshal(v, &items); err != nil {
			return nil, newErr(http.StatusBadRequest, "x_content_parse_exception", "[aliases] failed to parse field [actions]")
		}
	}
	if len(items) == 0 {
		return nil, validationError("Must specify at least one alias action")
	}
	var out []aliasAction
	for _, it := range items {
		if len(it) != 1 {
			return nil, newErr(http.StatusBadRequest, "x_content_parse_exception", "[alias_action] expected exactly one action")
		}
		for kind, raw := range it {
			switch kind {
			case "add", "remove", "remove_index":
			default:
				return nil, illegalArgument("[alias_action] unknown field [%s]", kind)
			}
			var p map[string]json.RawMessage
			if err := json.Unmarshal(raw, &p); err != nil {
				return nil, newErr(http.StatusBadRequest, "x_content_parse_exception", "[alias_action] failed to parse [%s]", kind)
			}
			a := aliasAction{kind: kind}
			for k, v := range p {
				switch k {
				case "index", "indices":
					l, ok := stringsOf(v)
					if !ok {
						return nil, illegalArgument("[%s] failed to parse [%s]", kind, k)
					}
					for _, n := range l {
						r, derr := resolveDateMathName(n, time.Now())
						if derr != nil {
							return nil, derr
						}
						a.indices = append(a.indices, r)
					}
					a.hasIndices = true
				case "alias", "aliases":
					l, ok := stringsOf(v)
					if !ok {
						return nil, illegalArgument("[%s] failed to parse [%s]", kind, k)
					}
					for _, n := range l {
						r, derr := resolveDateMathName(n, time.Now())
						if derr != nil {
							return nil, derr
						}
						a.aliases = append(a.aliases, r)
					}
				case "is_write_index", "is_hidden", "must_exist":
					var b bool
					if json.Unmarshal(v, &b) != nil {
						return nil, illegalArgument("[%s] failed to parse [%s]", kind, k)
					}
					switch k {
					case "is_write_index":
						a.isWrite = &b
					case "is_hidden":
						a.isHidden = &b
					default:
						a.mustExist = &b
					}
				case "routing", "index_routing", "search_routing":
					if string(v) != "null" {
						return nil, illegalArgument("[eventpipe] alias routing ([%s]) is not supported by this server", k)
					}
				case "filter":
					return nil, illegalArgument("[eventpipe] alias filters are not supported by this server")
				default:
					return nil, illegalArgument("[%s] unknown field [%s]", kind, k)
				}
			}
			if a.mustExist != nil && kind != "remove" {
				return nil, illegalArgument("[must_exist] is unsupported for [%s]", kind)
			}
			if !a.hasIndices || len(a.indices) == 0 {
				return nil, validationError("One of [index] or [indices] is required")
			}
			if kind != "remove_index" && len(a.aliases) == 0 {
				return nil, validationError("One of [alias] or [aliases] is required")
			}
			out = append(out, a)
		}
	}
	return out, nil
}

// validateAliasName applies the index/alias name rules to an alias.
func validateAliasName(name string) *esError {
	if e := checkName(name); e != "" {
		return newErr(http.StatusBadRequest, "invalid_alias_name_exception", "Invalid alias name [%s]: %s", name, e)
	}
	return nil
}

// applyAliasActions applies actions atomically: either every action
// succeeds and one log record is written, or nothing changes. The one
// exception is Elasticsearch 8.14+'s partial success: a remove action
// without must_exist: true whose aliases do not exist fails alone, and is
// reported in results (indexed like actions); when no action succeeds the
// request fails with that error.
func (s *Server) applyAliasActions(actions []aliasAction) (int64, []*esError, *esError) {
	results := make([]*esError, len(actions))
	pos, err := s.applyAliasActionsInto(actions, results)
	return pos, results, err
}

func (s *Server) applyAliasActionsInto(actions []aliasAction, results []*esError) (int64, *esError) {
	s.cpMu.RLock()
	defer s.cpMu.RUnlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	aliases := cloneAliases(s.aliases)
	live := map[string]bool{}
	for n := range s.indices {
		live[n] = true
	}
	var removed []string
	expand := func(pats []string) ([]string, *esError) {
		var out []string
		for _, p := range pats {
			if isWildcard(p) {
				for n := range live {
					if wildMatch(p, n) {
						out = append(out, n)
					}
				}
				continue
			}
			if !live[p] {
				if _, isAlias := aliases[p]; isAlias {
					return nil, illegalArgument("The provided expression [%s] matches an alias, specify the corresponding concrete indices instead.", p)
				}
				return nil, indexNotFound(p)
			}
			out = append(out, p)
		}
		sort.Strings(out)
		if len(out) == 0 {
			return nil, indexNotFound(strings.Join(pats, ","))
		}
		return out, nil
	}
	failed := 0
	for ai, a := range actions {
		idxs, err := expand(a.indices)
		if err != nil {
			return 0, err
		}
		actions[ai].resolved = idxs
		switch a.kind {
		case "add":
			for _, al := range a.aliases {
				if err := validateAliasName(al); err != nil {
					return 0, err
				}
				if live[al] {
					return 0, newErr(http.StatusBadRequest, "invalid_alias_name_exception",
						"Invalid alias name [%s]: an index or data stream exists with the same name as the alias", al)
				}
				for _, n := range idxs {
					if aliases[al] == nil {
						aliases[al] = map[string]aliasMeta{}
					}
					aliases[al][n] = aliasMeta{IsWriteIndex: a.isWrite, IsHidden: a.isHidden}
				}
			}
		case "remove":
			var missing []string
			for _, al := range a.aliases {
				if strings.HasPrefix(al, "-") {
					continue // an exclusion: handled by matchNames
				}
				found := false
				for name, m := range aliases {
					if !matchNames(a.aliases, name) || !(name == al || isWildcard(al) && wildMatch(al, name) || al == "_all") {
						continue
					}
					for _, n := range idxs {
						if _, ok := m[n]; ok {
							delete(m, n)
							found = true
						}
					}
					if len(m) == 0 {
						delete(aliases, name)
					}
				}
				if !found {
					missing = append(missing, al)
				}
			}
			if len(missing) > 0 {
				e := aliasesNotFound(missing)
				if a.mustExist != nil && *a.mustExist {
					return 0, e
				}
				results[ai] = e
				failed++
			}
		case "remove_index":
			for _, n := range idxs {
				delete(live, n)
				removed = append(removed, n)
				for name, m := range aliases {
					delete(m, n)
					if len(m) == 0 {
						delete(aliases, name)
					}
				}
			}
		}
	}
	if failed == len(actions) {
		return 0, results[0]
	}
	// Each alias may have at most one write index.
	for name, m := range aliases {
		w := 0
		for _, meta := range m {
			if meta.IsWriteIndex != nil && *meta.IsWriteIndex {
				w++
			}
		}
		if w > 1 {
			return 0, illegalArgument("alias [%s] has more than one write index", name)
		}
		var hidden, shown []string
		for n, meta := range m {
			if meta.IsHidden != nil && *meta.IsHidden {
				hidden = append(hidden, n)
			} else {
				shown = append(shown, n)
			}
		}
		if len(hidden) > 0 && len(shown) > 0 {
			sort.Strings(hidden)
			sort.Strings(shown)
			return 0, illegalArgument("alias [%s] has is_hidden set to true on indices [%s] but does not have is_hidden set to true on indices [%s]; alias must have the same is_hidden setting on all indices",
				name, strings.Join(hidden, ", "), strings.Join(shown, ", "))
		}
	}
	pos, werr := s.wal.append(encodeMeta(recAliases, metaRecord{Aliases: aliases, RemoveIndices: removed}))
	if werr != nil {
		return 0, internalError(werr)
	}
	s.aliases = aliases
	var gone []*index
	for _, n := range removed {
		ix := s.indices[n]
		ix.mu.Lock()
		ix.removed = true
		ix.mu.Unlock()
		delete(s.indices, n)
		gone = append(gone, ix)
	}
	if len(gone) > 0 {
		go s.dropEngines(pos, gone)
	}
	return pos, nil
}

// dropEngines deletes the search indices of removed indices once their
// removal is durable.
func (s *Server) dropEngines(pos int64, gone []*index) {
	if err := s.wal.waitDurable(pos); err != nil {
		s.log.Error("index removal not durable; keeping its files", "error", err)
		return
	}
	for _, ix := range gone {
		if err := ix.closeEngine(); err != nil {
			s.log.Warn("close search index", "index", ix.name, "error", err)
		}
		if err := removeAllRetry(ix.dir); err != nil {
			s.log.Warn("remove search index files", "index", ix.name, "error", err)
		}
	}
}

// aliasesNotFound is AliasesNotFoundException.
func aliasesNotFound(names []string) *esError {
	msg := "aliases [" + strings.Join(names, ",") + "] missing"
	if len(names) == 1 {
		msg = "aliases [" + names[0] + "] missing"
	}
	return newErr(http.StatusNotFound, "aliases_not_found_exception", "%s", msg).
		with("resource.type", "aliases").with("resource.id", strings.Join(names, ","))
}

// matchNames applies the exclusions of a name expression ("-name" or
// "-pattern" after other names) to name: false when an exclusion after the
// last inclusion matching name excludes it.
func matchNames(pats []string, name string) bool {
	in := false
	for _, p := range pats {
		if strings.HasPrefix(p, "-") && len(p) > 1 {
			if q := p[1:]; q == name || wildMatch(q, name) {
				in = false
			}
			continue
		}
		if p == name || p == "_all" || p == "*" || wildMatch(p, name) {
			in = true
		}
	}
	return in
}

// ackAliasActions applies alias actions and acknowledges them once they
// are durable. The body is Elasticsearch 8.14+'s IndicesAliasesResponse:
// "acknowledged" and "errors", plus "action_results" when an action
// failed.
func (s *Server) ackAliasActions(actions []aliasAction) (int, any) {
	pos, results, err := s.applyAliasActions(actions)
	if err != nil {
		return errResp(err)
	}
	if werr := s.wal.waitDurable(pos); werr != nil {
		return errResp(internalError(werr))
	}
	errorsSeen := false
	for _, r := range results {
		errorsSeen = errorsSeen || r != nil
	}
	if !errorsSeen {
		return http.StatusOK, ordered{{"acknowledged", true}, {"errors", false}}
	}
	out := make([]any, len(actions))
	for i, a := range actions {
		// AliasActionResult names the concrete indices the action
		// resolved to, not the expressions of the request
		indices := a.resolved
		if indices == nil {
			indices = a.indices
		}
		act := ordered{{"type", a.kind}, {"indices", indices}}
		if a.kind != "remove_index" {
			act = append(act, jsonKV{"aliases", a.aliases})
		}
		r := ordered{{"action", act}, {"status", http.StatusOK}}
		if e := results[i]; e != nil {
			r = ordered{{"action", act}, {"status", e.status}, {"error", e.object()}}
		}
		out[i] = r
	}
	return http.StatusOK, ordered{{"acknowledged", true}, {"errors", true}, {"action_results", out}}
}

func (s *Server) handleUpdateAliases(rc *reqCtx, _ []string) (int, any) {
	actions, err := parseAliasActions(rc.body)
	if err != nil {
		return errResp(err)
	}
	return s.ackAliasActions(actions)
}

// parseAliasProps reads the properties of one alias, as given in a
// create-index "aliases" entry or a PUT _alias body; unknownFmt formats the
// error for an unknown key.
func parseAliasProps(props map[string]json.RawMessage, unknownFmt string) (aliasMeta, *esError) {
	var meta aliasMeta
	for k, v := range props {
		switch k {
		case "is_write_index":
			var b bool
			_ = json.Unmarshal(v, &b)
			meta.IsWriteIndex = &b
		case "is_hidden":
			var b bool
			_ = json.Unmarshal(v, &b)
			meta.IsHidden = &b
		case "routing", "index_routing", "search_routing":
			if string(v) != "null" {
				return meta, illegalArgument("[eventpipe] alias routing ([%s]) is not supported by this server", k)
			}
		case "filter":
			return meta, illegalArgument("[eventpipe] alias filters are not supported by this server")
		default:
			return meta, illegalArgument(unknownFmt, k)
		}
	}
	return meta, nil
}

func (s *Server) handlePutAlias(rc *reqCtx, p []string) (int, any) {
	a := aliasAction{kind: "add", indices: strings.Split(p[0], ","), aliases: strings.Split(p[1], ","), hasIndices: true}
	if jsonBody(rc.body) {
		var body map[string]json.RawMessage
		if err := decodeJSON(rc.body, &body); err != nil {
			return errResp(xContentParseError(err))
		}
		meta, err := parseAliasProps(body, "[alias] unknown field [%s]")
		if err != nil {
			return errResp(err)
		}
		a.isWrite, a.isHidden = meta.IsWriteIndex, meta.IsHidden
	}
	return s.ackAliasActions([]aliasAction{a})
}

// handleDeleteAlias serves DELETE /{index}/_alias/{name}: the names may
// hold wildcards, _all and exclusions ("-name"); nothing matching is 404.
func (s *Server) handleDeleteAlias(rc *reqCtx, p []string) (int, any) {
	must := true
	return s.ackAliasActions([]aliasAction{{kind: "remove", indices: strings.Split(p[0], ","), aliases: strings.Split(p[1], ","), hasIndices: true, mustExist: &must}})
}

// handleGetAliases serves GET/HEAD /_alias, /_alias/{name},
// /{index}/_alias and /{index}/_alias/{name}; p = [indexExpr, aliasExpr].
func (s *Server) handleGetAliases(rc *reqCtx, p []string) (int, any) {
	indexExpr, aliasExpr := p[0], p[1]
	var indices []*index
	if indexExpr != "" {
		var err *esError
		indices, err = s.resolveSearch(indexExpr, rc.q)
		if err != nil {
			return errResp(err)
		}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	inScope := map[string]bool{}
	if indexExpr == "" {
		for n := range s.indices {
			inScope[n] = true
		}
	} else {
		for _, ix := range indices {
			inScope[ix.name] = true
		}
	}
	var pats []string
	if aliasExpr != "" && aliasExpr != "_all" && aliasExpr != "*" {
		pats = strings.Split(aliasExpr, ",")
	}
	out := map[string]any{}
	found := map[string]bool{}
	for alias, m := range s.aliases {
		if len(pats) > 0 && !matchNames(pats, alias) {
			continue
		}
		for n, meta := range m {
			if !inScope[n] {
				continue
			}
			entry, _ := out[n].(map[string]any)
			if entry == nil {
				entry = map[string]any{"aliases": map[string]any{}}
				out[n] = entry
			}
			entry["aliases"].(map[string]any)[alias] = meta.render()
			found[alias] = true
		}
	}
	if aliasExpr == "" {
		// GET /_alias and /{index}/_alias list every index in scope.
		for n := range inScope {
			if _, ok := out[n]; !ok {
				out[n] = map[string]any{"aliases": map[string]any{}}
			}
		}
		return http.StatusOK, out
	}
	var missing []string
	for _, pt := range pats {
		if !isWildcard(pt) && !strings.HasPrefix(pt, "-") && !found[pt] {
			missing = append(missing, pt)
		}
	}
	if len(missing) > 0 || (len(out) == 0 && len(pats) > 0) {
		if len(missing) == 0 {
			return http.StatusOK, out
		}
		sort.Strings(missing)
		msg := "alias [" + strings.Join(missing, ",") + "] missing"
		if len(missing) > 1 {
			msg = "aliases [" + strings.Join(missing, ",") + "] missing"
		}
		out["error"] = msg
		out["status"] = http.StatusNotFound
		return http.StatusNotFound, out
	}
	return http.StatusOK, out
}
