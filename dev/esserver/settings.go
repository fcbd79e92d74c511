package esserver

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// indexSettings are the parsed index settings this server honours.
type indexSettings struct {
	raw             map[string]string // flat "index.*" keys, as echoed by GET
	Replicas        int
	RefreshInterval time.Duration // 0: server default; <0: disabled
	MaxResultWindow int
	GCDeletes       time.Duration
	WriteBlock      bool // index.blocks.write: document writes are refused
}

// settingPrefixes are accepted settings (echoed back) whose effect this
// server does not model; exact keys are listed in knownSettings.
var settingPrefixes = []string{
	"index.mapping.", "index.translog.", "index.routing.", "index.lifecycle.",
	"index.write.", "index.search.", "index.indexing.", "index.merge.",
}

var knownSettings = map[string]bool{
	"index.number_of_shards": true, "index.number_of_replicas": true, "index.refresh_interval": true,
	"index.max_result_window": true, "index.gc_deletes": true, "index.auto_expand_replicas": true,
	"index.hidden": true, "index.codec": true, "index.priority": true, "index.max_inner_result_window": true,
	"index.max_terms_count": true, "index.query.default_field": true, "index.max_ngram_diff": true,
	"index.max_shingle_diff": true, "index.max_script_fields": true, "index.max_regex_length": true,
	"index.max_docvalue_fields_search": true, "index.default_pipeline": true, "index.final_pipeline": true,
	"index.shard.check_on_startup": true, "index.number_of_routing_shards": true,
	"index.load_fixed_bitset_filters_eagerly": true, "index.max_rescore_window": true,
	"index.blocks.write": true, "index.blocks.read_only": true, "index.blocks.read_only_allow_delete": true,
	"index.blocks.read": true, "index.blocks.metadata": true,
}

// unmodelledBlocks are the index blocks this server does not enforce; they
// may be set to false (or reset) but not to true.
var unmodelledBlocks = map[string]bool{
	"index.blocks.read_only": true, "index.blocks.read_only_allow_delete": true,
	"index.blocks.read": true, "index.blocks.metadata": true,
}

// refuseUnmodelledBlocks rejects a request that would turn on a block this
// server does not enforce, rather than accept it and silently ignore it.
//
// It also refuses the index.mapping.* settings whose effect is observable
// and not modelled: limits on the mapping (total fields, depth, field name
// length, dimension fields), index-wide ignore_malformed and coerce, and
// the synthetic _source mode. The nested limits (nested_fields.limit,
// nested_objects.limit) are accepted: the nested type is refused, so they
// can never be reached, as in Elasticsearch without nested fields. Like the
// blocks, these are checked on requests only, not on recovered state.
func refuseUnmodelledBlocks(flat map[string]string) *esError {
	for k, v := range flat {
		if unmodelledBlocks[k] && v == "true" {
			return illegalArgument("[eventpipe] setting [%s] is not supported by this server (only index.blocks.write is)", k)
		}
		if strings.HasPrefix(k, "index.mapping.") && v != "" && !acceptedMappingSettings[k] {
			return illegalArgument("[eventpipe] setting [%s] is not supported by this server", k)
		}
	}
	return nil
}

// acceptedMappingSettings are the index.mapping.* settings accepted (see
// refuseUnmodelledBlocks).
var acceptedMappingSettings = map[string]bool{
	"index.mapping.nested_fields.limit": true, "index.mapping.nested_objects.limit": true,
}

// parseBoolSetting parses a boolean setting strictly, as Elasticsearch does.
func parseBoolSetting(v string) (bool, *esError) {
	switch v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, illegalArgument("Failed to parse value [%s] as only [true] or [false] are allowed.", v)
}

// staticSettings may only be set at index creation.
var staticSettings = map[string]bool{
	"index.number_of_shards": true, "index.codec": true, "index.number_of_routing_shards": true,
	"index.shard.check_on_startup": true,
}

// flattenSettings turns {"index":{"number_of_shards":1}} or
// {"number_of_shards":"1"} into {"index.number_of_shards":"1"}.
func flattenSettings(raw json.RawMessage) (map[string]string, *esError) {
	out := map[string]string{}
	if len(raw) == 0 || string(raw) == "null" {
		return out, nil
	}
	var obj map[string]any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil {
		return nil, newErr(400, "settings_exception", "Failed to load settings from [%s]", string(raw))
	}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, vv := range x {
				walk(prefix+k+".", vv)
			}
		case []any:
			parts := make([]string, 0, len(x))
			for _, e := range x {
				s, _ := scalarString(e)
				parts = append(parts, s)
			}
			out[strings.TrimSuffix(prefix, ".")] = strings.Join(parts, ",")
		case nil:
			out[strings.TrimSuffix(prefix, ".")] = ""
		default:
			s, _ := scalarString(x)
			out[strings.TrimSuffix(prefix, ".")] = s
		}
	}
	walk("", obj)
	norm := map[string]string{}
	for k, v := range out {
		if !strings.HasPrefix(k, "index.") {
			k = "index." + k
		}
		norm[k] = v
	}
	return norm, nil
}

// validateSettings checks flat settings and returns the parsed form.
func parseSettings(flat map[string]string, defaultReplicas int) (*indexSettings, *esError) {
	st := &indexSettings{raw: map[string]string{}, Replicas: defaultReplicas, MaxResultWindow: 10000, GCDeletes: 60 * time.Second}
	autoExpand := -1
	keys := slices.Sorted(maps.Keys(flat))
	for _, k := range keys {
		v := flat[k]
		if strings.HasPrefix(k, "index.analysis.") || strings.HasPrefix(k, "index.sort.") || strings.HasPrefix(k, "index.similarity.") {
			return nil, illegalArgument("[eventpipe] setting [%s] is not supported by this server", k)
		}
		known := knownSettings[k]
		for _, p := range settingPrefixes {
			if strings.HasPrefix(k, p) {
				known = true
			}
		}
		if !known {
			return nil, illegalArgument("unknown setting [%s] please check that any required plugins are installed, or check the breaking changes documentation for removed settings", k)
		}
		switch k {
		case "index.number_of_shards", "index.number_of_routing_shards":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 1024 {
				return nil, illegalArgument("Failed to parse value [%s] for setting [%s] must be >= 1", v, k)
			}
			if n > 1 {
				// Refused, not echoed: with one shard, a refresh makes
				// every pending change visible (Elasticsearch refreshes
				// only the shards written), and routing has no effect.
				return nil, illegalArgument("[eventpipe] setting [%s] = [%d] is not supported by this server: it keeps one shard per index "+
					"(refresh visibility and routing would differ from %d shards); use 1", k, n, n)
			}
		case "index.number_of_replicas":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return nil, illegalArgument("Failed to parse value [%s] for setting [index.number_of_replicas] must be >= 0", v)
			}
			st.Replicas = n
		case "index.refresh_interval":
			d, err := parseTimeValue(v)
			if err != nil {
				return nil, illegalArgument("failed to parse setting [index.refresh_interval] with value [%s] as a time value: unit is missing or unrecognized", v)
			}
			if d == 0 {
				d = time.Millisecond // "0s" would mean: refresh constantly
			}
			st.RefreshInterval = d
		case "index.auto_expand_replicas":
			// "min-max" (max may be "all") or false: on one node the
			// expanded count is the minimum, as Elasticsearch computes it
			// (AutoExpandReplicas: clamp(data nodes - 1, min, max)).
			if v == "false" || v == "" {
				break
			}
			lo, hi, ok := strings.Cut(v, "-")
			n, err := strconv.Atoi(lo)
			if !ok || err != nil || n < 0 {
				return nil, illegalArgument("failed to parse [index.auto_expand_replicas] from value: [%s] at index -1", v)
			}
			if hi != "all" {
				if m, err := strconv.Atoi(hi); err != nil || m < n {
					return nil, illegalArgument("failed to parse [index.auto_expand_replicas] from value: [%s] at index %d", v, len(lo))
				}
			}
			autoExpand = n
		case "index.max_result_window":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return nil, illegalArgument("Failed to parse value [%s] for setting [index.max_result_window] must be >= 1", v)
			}
			st.MaxResultWindow = n
		case "index.gc_deletes":
			d, err := parseTimeValue(v)
			if err != nil || d < 0 {
				return nil, illegalArgument("failed to parse setting [index.gc_deletes] with value [%s] as a time value", v)
			}
			st.GCDeletes = d
		case "index.blocks.write", "index.blocks.read_only", "index.blocks.read_only_allow_delete", "index.blocks.read", "index.blocks.metadata":
			b, err := parseBoolSetting(v)
			if err != nil {
				return nil, err
			}
			if k == "index.blocks.write" {
				st.WriteBlock = b
			}
		}
		st.raw[k] = v
	}
	if autoExpand >= 0 {
		st.Replicas = autoExpand
	}
	return st, nil
}

// parseTimeValue parses Elasticsearch time values ("1s", "500ms", "-1").
func parseTimeValue(v string) (time.Duration, error) {
	v = strings.TrimSpace(strings.ToLower(v))
	if v == "-1" {
		return -1, nil
	}
	units := []struct {
		suffix string
		d      time.Duration
	}{{"nanos", time.Nanosecond}, {"micros", time.Microsecond}, {"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}, {"d", 24 * time.Hour}}
	for _, u := range units {
		if strings.HasSuffix(v, u.suffix) {
			n, err := strconv.ParseFloat(strings.TrimSuffix(v, u.suffix), 64)
			if err != nil {
				return 0, err
			}
			return time.Duration(n * float64(u.d)), nil
		}
	}
	if v == "0" {
		return 0, nil
	}
	return 0, fmt.Errorf("unit missing in [%s]", v)
}

// flat returns every setting of ix as GET /{index}/_settings?flat_settings
// lists it.
func (st *indexSettings) flat(ix *index) map[string]string {
	out := map[string]string{"index.number_of_shards": "1"}
	for k, v := range st.raw {
		out[k] = v
	}
	// The effective count (auto_expand_replicas sets it, as in
	// Elasticsearch).
	out["index.number_of_replicas"] = strconv.Itoa(st.Replicas)
	out["index.uuid"] = ix.uuid
	out["index.provided_name"] = ix.name
	out["index.creation_date"] = strconv.FormatInt(ix.created, 10)
	out["index.version.created"] = versionCreated
	return out
}

// defaultSettings are the defaults GET _settings?include_defaults=true
// reports for the settings this server models, when not set explicitly.
func (s *Server) defaultSettings() map[string]string {
	ri := "1s"
	if d := s.cfg.RefreshInterval; d > 0 {
		ri = d.String()
		if d%time.Second == 0 {
			ri = strconv.FormatInt(int64(d/time.Second), 10) + "s"
		} else if d%time.Millisecond == 0 {
			ri = strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
		}
	}
	return map[string]string{
		"index.refresh_interval": ri, "index.max_result_window": "10000", "index.gc_deletes": "60s",
		"index.blocks.write": "false", "index.blocks.read_only": "false", "index.blocks.read": "false",
		"index.blocks.metadata": "false", "index.blocks.read_only_allow_delete": "false",
		"index.hidden": "false", "index.auto_expand_replicas": "false",
	}
}

// settingsView renders flat settings for GET _settings / GET {index}: the
// names filter (comma-separated patterns on the flat keys, "" or _all for
// all) and flat_settings (keys as "index.x.y" rather than nested objects).
func settingsView(flat map[string]string, names []string, flatKeys bool) map[string]any {
	out := map[string]any{}
	for k, v := range flat {
		if len(names) > 0 && !matchNames(names, k) {
			continue
		}
		if flatKeys {
			out[k] = v
			continue
		}
		parts := strings.Split(k, ".")
		m := out
		for _, p := range parts[:len(parts)-1] {
			sub, ok := m[p].(map[string]any)
			if !ok {
				sub = map[string]any{}
				m[p] = sub
			}
			m = sub
		}
		m[parts[len(parts)-1]] = v
	}
	return out
}
