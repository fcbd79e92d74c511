package esserver

import (
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// URL parameters. Elasticsearch rejects a parameter an API does not
// declare with 400 illegal_argument_exception "request [path] contains
// unrecognized parameter: [x]" (BaseRestHandler). The parameters each API
// declares are listed in rest-api-spec/src/main/resources/rest-api-spec/
// api/{api}.json; every API of this file's table accepts exactly those it
// implements, refuses with a 400 naming the feature those it does not,
// and answers the others as unrecognized, so that nothing is accepted and
// ignored.

// globalParams are accepted by every API (rest-api-spec/api/_common.json).
// pretty is implemented by the router, human and error_trace change
// nothing this server renders (it has no human-readable variants and no
// stack traces).
// filter_path is implemented for every response by the router
// (filterpath.go).
var globalParams = map[string]bool{"pretty": true, "human": true, "error_trace": true, "filter_path": true}

// refusedParams are real Elasticsearch parameters this server does not
// implement; an API that declares one refuses it with this reason.
var refusedParams = map[string]string{
	"routing":                "[eventpipe] custom routing ([routing]) is not supported by this server: it has one shard per index and does not record routing values",
	"stored_fields":          "[eventpipe] [stored_fields] is not supported by this server: it stores no fields apart from _source",
	"force_synthetic_source": "[eventpipe] [force_synthetic_source] is not supported by this server: it has no synthetic _source",
	"source":                 "[eventpipe] request bodies in the [source] parameter are not supported by this server",
	"require_data_stream":    "[eventpipe] data streams ([require_data_stream]) are not supported by this server",
	"write_index_only":       "[eventpipe] [write_index_only] is not supported by this server",
	"wait_for_active_shards": "[eventpipe] wait_for_active_shards above 1 is not supported by this server: it has one node and its replicas are never assigned",
}

// paramCheck is the parameters one API accepts (ok) and refuses (refuse),
// space separated.
type paramCheck struct{ ok, refuse []string }

func params(ok, refuse string) paramCheck {
	return paramCheck{ok: strings.Fields(ok), refuse: strings.Fields(refuse)}
}

// Parameter sets of the APIs, from rest-api-spec/api/*.json (8.15).
var (
	pIndexDoc = params("wait_for_active_shards op_type refresh timeout version version_type if_seq_no if_primary_term pipeline require_alias require_data_stream", "routing")
	// _create is served by the index handler in Elasticsearch
	// (RestIndexAction.CreateHandler), which reads the same parameters.
	pCreateDoc = pIndexDoc
	pGetDoc    = params("preference realtime refresh _source _source_excludes _source_includes version version_type stored_fields force_synthetic_source", "routing")
	pGetSource = params("preference realtime refresh _source _source_excludes _source_includes version version_type", "routing")
	pDeleteDoc = params("wait_for_active_shards refresh timeout if_seq_no if_primary_term version version_type", "routing")
	pUpdate    = params("wait_for_active_shards _source _source_excludes _source_includes lang refresh retry_on_conflict timeout if_seq_no if_primary_term require_alias", "routing")
	pBulk      = params("wait_for_active_shards refresh timeout _source _source_excludes _source_includes pipeline require_alias require_data_stream list_executed_pipelines", "routing")
	pMget      = params("preference realtime refresh _source _source_excludes _source_includes stored_fields force_synthetic_source", "routing")
	pRefresh   = params("ignore_unavailable allow_no_indices expand_wildcards", "")
	pCreateIx  = params("wait_for_active_shards timeout master_timeout", "")
	pGetIx     = params("local ignore_unavailable allow_no_indices expand_wildcards flat_settings include_defaults features master_timeout", "")
	pExistsIx  = params("local ignore_unavailable allow_no_indices expand_wildcards flat_settings include_defaults", "")
	pDeleteIx  = params("timeout master_timeout ignore_unavailable allow_no_indices expand_wildcards", "")
	pGetMap    = params("ignore_unavailable allow_no_indices expand_wildcards master_timeout local", "")
	pPutMap    = params("timeout master_timeout ignore_unavailable allow_no_indices expand_wildcards write_index_only", "")
	pGetSet    = params("master_timeout ignore_unavailable allow_no_indices expand_wildcards flat_settings local include_defaults", "")
	pPutSet    = params("master_timeout timeout preserve_existing reopen ignore_unavailable allow_no_indices expand_wildcards flat_settings", "")
	pAliases   = params("timeout master_timeout", "")
	pGetAlias  = params("ignore_unavailable allow_no_indices expand_wildcards local master_timeout", "")
	pBlock     = params("timeout master_timeout ignore_unavailable allow_no_indices expand_wildcards", "")
	pHealth    = params("expand_wildcards level local master_timeout timeout wait_for_active_shards wait_for_nodes wait_for_events wait_for_no_relocating_shards wait_for_no_initializing_shards wait_for_status return_200_for_cluster_health_timeout", "")
)

// Parameter sets of the cluster settings API (cluster.get_settings,
// cluster.put_settings).
var (
	pGetClusterSet = params("flat_settings include_defaults master_timeout timeout", "")
	pPutClusterSet = params("flat_settings master_timeout timeout", "")
)

// with wraps fn so that the request's URL parameters are checked first.
func (pc paramCheck) with(fn handlerFn) handlerFn {
	return func(rc *reqCtx, p []string) (int, any) {
		if err := pc.check(rc); err != nil {
			if rc.r.Method == http.MethodHead {
				return err.status, nil
			}
			return errResp(err)
		}
		return fn(rc, p)
	}
}

func (pc paramCheck) check(rc *reqCtx) *esError {
	var unknown []string
	for k := range rc.q {
		switch {
		case globalParams[k]:
		case slices.Contains(pc.refuse, k):
			return illegalArgument("%s", refusedParams[k])
		case slices.Contains(pc.ok, k):
			if k == "wait_for_active_shards" && slices.Contains(pc.ok, "wait_for_status") {
				continue // cluster health waits for any count (handleHealth)
			}
			if err := checkParamValue(k, rc.q.Get(k)); err != nil {
				return err
			}
		case k == "source":
			return illegalArgument("%s", refusedParams[k])
		default:
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	s := ""
	if len(unknown) > 1 {
		s = "s"
	}
	// As BaseRestHandler.unrecognized: each with the declared parameters
	// similar to it (Lucene's LevenshteinDistance above 0.5).
	parts := make([]string, len(unknown))
	for i, u := range unknown {
		var similar []string
		for _, c := range slices.Concat(pc.ok, pc.refuse) {
			if similarity(u, c) > 0.5 {
				similar = append(similar, c)
			}
		}
		sort.Strings(similar)
		parts[i] = "[" + u + "]"
		switch len(similar) {
		case 0:
		case 1:
			parts[i] += " -> did you mean [" + similar[0] + "]?"
		default:
			parts[i] += " -> did you mean any of [" + strings.Join(similar, ", ") + "]?"
		}
	}
	return illegalArgument("request [%s] contains unrecognized parameter%s: %s", rc.r.URL.Path, s, strings.Join(parts, ", "))
}

// didYouMean is the suggestion ObjectParser adds to "unknown field [x]":
// " did you mean [y]?" or " did you mean any of [y, z]?", or "".
func didYouMean(k string, fields []string) string {
	var similar []string
	for _, f := range fields {
		if similarity(k, f) > 0.5 {
			similar = append(similar, f)
		}
	}
	sort.Strings(similar)
	switch len(similar) {
	case 0:
		return ""
	case 1:
		return " did you mean [" + similar[0] + "]?"
	}
	return " did you mean any of [" + strings.Join(similar, ", ") + "]?"
}

// similarity is 1 - edit distance / length of the longer string.
func similarity(a, b string) float64 {
	ra, rb := []rune(a), []rune(b)
	if len(ra) == 0 && len(rb) == 0 {
		return 1
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return 1 - float64(prev[len(rb)])/float64(max(len(ra), len(rb)))
}

// checkParamValue validates the parameters whose values this server only
// partly supports, and the common value formats.
func checkParamValue(k, v string) *esError {
	switch k {
	case "stored_fields", "force_synthetic_source", "require_data_stream", "write_index_only":
		if k == "stored_fields" && v == "" {
			return nil
		}
		if k != "stored_fields" && (v == "false") {
			return nil
		}
		return illegalArgument("%s", refusedParams[k])
	case "wait_for_active_shards":
		if v == "all" || v == "0" || v == "1" || v == "" {
			return nil
		}
		if n, err := strconv.Atoi(v); err == nil && n > 1 {
			return illegalArgument("%s", refusedParams[k])
		}
		return illegalArgument("failed to parse active shard count [%s]", v)
	case "wait_for_events":
		switch v {
		case "immediate", "urgent", "high", "normal", "low", "languid":
		default:
			return illegalArgument("No enum constant org.elasticsearch.common.Priority.%s", strings.ToUpper(v))
		}
	case "timeout", "master_timeout":
		if _, err := parseTimeValue(v); err != nil {
			return illegalArgument("failed to parse setting [%s] with value [%s] as a time value: unit is missing or unrecognized", k, v)
		}
	case "expand_wildcards":
		for _, w := range strings.Split(v, ",") {
			switch w {
			case "open", "closed", "hidden", "none", "all":
			default:
				return illegalArgument("No enum constant org.elasticsearch.action.support.IndicesOptions.WildcardStates.%s", strings.ToUpper(w))
			}
		}
	case "realtime", "refresh", "flat_settings", "include_defaults", "preserve_existing", "ignore_unavailable",
		"allow_no_indices", "local", "require_alias", "list_executed_pipelines", "reopen",
		"wait_for_no_relocating_shards", "wait_for_no_initializing_shards", "return_200_for_cluster_health_timeout":
		if k == "refresh" {
			return nil // validated per API (wait_for on writes)
		}
		switch v {
		case "", "true", "false":
		default:
			return illegalArgument("Failed to parse value [%s] as only [true] or [false] are allowed.", v)
		}
	}
	return nil
}

// boolParam reads a boolean URL parameter ("" counts as true, as in
// Elasticsearch's RestRequest.paramAsBoolean).
func boolParam(rc *reqCtx, k string) bool {
	if !rc.q.Has(k) {
		return false
	}
	v := rc.q.Get(k)
	return v == "" || v == "true"
}
