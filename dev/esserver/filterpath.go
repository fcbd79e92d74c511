package esserver

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Response filtering: the filter_path parameter every Elasticsearch API
// accepts (rest-api-spec/api/_common.json; described in the REST API
// conventions, "Response filtering"). A comma-separated list of dotted
// paths; a path segment may hold * wildcards, ** matches any number of
// levels, arrays are transparent (the path applies to each element), and a
// path starting with - excludes instead of includes. Objects and arrays
// left empty by an inclusive filter are dropped; nothing left is {}.

type filterPaths struct {
	include, exclude [][]string
}

func parseFilterPath(v string) filterPaths {
	var fp filterPaths
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if strings.HasPrefix(p, "-") {
			fp.exclude = append(fp.exclude, strings.Split(p[1:], "."))
		} else {
			fp.include = append(fp.include, strings.Split(p, "."))
		}
	}
	return fp
}

// advance returns the remainders of paths after the object key k; an
// empty remainder means k is matched completely.
func advance(paths [][]string, k string) [][]string {
	var next [][]string
	var step func(p []string)
	step = func(p []string) {
		if len(p) == 0 {
			next = append(next, p)
			return
		}
		if p[0] == "**" {
			next = append(next, p) // ** takes k and may take more
			step(p[1:])            // ** takes nothing
			return
		}
		if p[0] == k || wildMatch(p[0], k) {
			next = append(next, p[1:])
		}
	}
	for _, p := range paths {
		step(p)
	}
	return next
}

func matchedFully(paths [][]string) bool {
	for _, p := range paths {
		if len(p) == 0 || (len(p) == 1 && p[0] == "**") {
			return true
		}
	}
	return false
}

// include keeps what paths select; ok is false when nothing is left.
func filterInclude(v any, paths [][]string) (any, bool) {
	if matchedFully(paths) {
		return v, true
	}
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, val := range x {
			if next := advance(paths, k); len(next) > 0 {
				if c, ok := filterInclude(val, next); ok {
					out[k] = c
				}
			}
		}
		return out, len(out) > 0
	case []any:
		var out []any
		for _, e := range x {
			if c, ok := filterInclude(e, paths); ok {
				out = append(out, c)
			}
		}
		return out, len(out) > 0
	}
	return nil, false
}

// filterExclude drops what paths select.
func filterExclude(v any, paths [][]string) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, val := range x {
			next := advance(paths, k)
			if matchedFully(next) {
				continue
			}
			if len(next) > 0 {
				val = filterExclude(val, next)
			}
			out[k] = val
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = filterExclude(e, paths)
		}
		return out
	}
	return v
}

// applyFilterPath filters a rendered JSON body.
func applyFilterPath(body []byte, spec string) ([]byte, error) {
	fp := parseFilterPath(spec)
	if len(fp.include) == 0 && len(fp.exclude) == 0 {
		return body, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return body, nil // not JSON (cannot happen): leave it
	}
	if len(fp.include) > 0 {
		var ok bool
		if v, ok = filterInclude(v, fp.include); !ok {
			v = map[string]any{}
		}
	}
	if len(fp.exclude) > 0 {
		v = filterExclude(v, fp.exclude)
	}
	return json.Marshal(v)
}
