package esserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
)

// The cluster settings API (GET and PUT /_cluster/settings). The one
// cluster setting this server implements is action.destructive_requires_name
// (DestructiveOperations.REQUIRES_NAME_SETTING, dynamic, node scope). Its
// value is the transient cluster setting, else the persistent one, else
// the node setting (Config.DestructiveRequiresName), else true.
// Persistent settings are written to the write-ahead log and snapshots;
// transient ones live in memory until the server stops.

const settingDestructiveRequiresName = "action.destructive_requires_name"

// staticClusterSettings are real Elasticsearch node settings that are not
// dynamic: Elasticsearch refuses them with "not dynamically updateable".
var staticClusterSettings = map[string]bool{
	"cluster.name": true, "node.name": true, "node.roles": true, "path.data": true, "path.logs": true,
	"path.home": true, "path.repo": true, "network.host": true, "http.port": true, "transport.port": true,
	"discovery.type": true, "discovery.seed_hosts": true, "cluster.initial_master_nodes": true,
}

// unsupportedClusterSettings are real dynamic Elasticsearch cluster
// settings this server does not implement; they are refused naming them.
var unsupportedClusterSettings = map[string]bool{
	"action.auto_create_index": true, "action.search.shard_count.limit": true,
	"cluster.routing.allocation.enable": true, "cluster.routing.rebalance.enable": true,
	"cluster.routing.allocation.allow_rebalance": true, "cluster.routing.allocation.cluster_concurrent_rebalance": true,
	"cluster.routing.allocation.node_concurrent_recoveries": true, "cluster.routing.allocation.node_initial_primaries_recoveries": true,
	"cluster.routing.allocation.node_concurrent_incoming_recoveries": true, "cluster.routing.allocation.node_concurrent_outgoing_recoveries": true,
	"cluster.routing.allocation.same_shard.host": true, "cluster.routing.allocation.total_shards_per_node": true,
	"cluster.routing.allocation.awareness.attributes": true, "cluster.routing.allocation.disk.threshold_enabled": true,
	"cluster.routing.allocation.disk.watermark.low": true, "cluster.routing.allocation.disk.watermark.high": true,
	"cluster.routing.allocation.disk.watermark.flood_stage": true, "cluster.routing.use_adaptive_replica_selection": true,
	"cluster.max_shards_per_node": true, "cluster.max_shards_per_node.frozen": true,
	"cluster.blocks.read_only": true, "cluster.blocks.read_only_allow_delete": true,
	"cluster.indices.close.enable": true, "cluster.info.update.interval": true,
	"cluster.persistent_tasks.allocation.enable": true, "indices.recovery.max_bytes_per_sec": true,
	"indices.breaker.total.limit": true, "indices.breaker.request.limit": true, "indices.breaker.fielddata.limit": true,
	"indices.lifecycle.poll_interval": true, "indices.id_field_data.enabled": true,
	"search.default_search_timeout": true, "search.max_buckets": true, "search.allow_expensive_queries": true,
	"search.default_allow_partial_results": true, "search.low_level_cancellation": true,
	"search.max_keep_alive": true, "search.default_keep_alive": true, "script.max_compilations_rate": true,
	"ingest.geoip.downloader.enabled": true, "xpack.monitoring.collection.enabled": true, "stack.templates.enabled": true,
}

// unsupportedClusterSettingPrefixes are Elasticsearch's affix settings
// (any name under them is a real setting) this server does not implement.
var unsupportedClusterSettingPrefixes = []string{
	"logger.", "cluster.remote.", "cluster.routing.allocation.include.",
	"cluster.routing.allocation.exclude.", "cluster.routing.allocation.require.",
}

// clusterSettingError checks one key (value v, nil for a reset) of the
// persistent or transient section of PUT /_cluster/settings, with
// Elasticsearch's messages (AbstractScopedSettings.updateSettings).
func clusterSettingError(scope, key string, v *string) *esError {
	if key == settingDestructiveRequiresName {
		if v != nil {
			if _, err := parseBoolSetting(*v); err != nil {
				return err
			}
		}
		return nil
	}
	if v == nil && strings.HasSuffix(key, "*") {
		return nil // a wildcard reset; Elasticsearch accepts any
	}
	if unsupportedClusterSettings[key] || slices.ContainsFunc(unsupportedClusterSettingPrefixes, func(p string) bool { return strings.HasPrefix(key, p) }) {
		return illegalArgument("[eventpipe] %s cluster setting [%s] is not supported by this server (the one it implements is [%s])", scope, key, settingDestructiveRequiresName)
	}
	if staticClusterSettings[key] {
		return illegalArgument("%s setting [%s], not dynamically updateable", scope, key)
	}
	return illegalArgument("%s setting [%s], not recognized", scope, key)
}

// clusterSettingsUpdate is a parsed PUT /_cluster/settings body: flat keys
// to values, nil for the null that resets a setting.
type clusterSettingsUpdate struct {
	persistent, transient map[string]*string
}

// parseClusterSettingsUpdate reads {"persistent":{...},"transient":{...}}
// (ClusterUpdateSettingsRequest.fromXContent; sections nested or flat).
func parseClusterSettingsUpdate(body []byte) (*clusterSettingsUpdate, *esError) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, newErr(http.StatusBadRequest, "parse_exception", "request body or source parameter is required")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, newErr(http.StatusBadRequest, "x_content_parse_exception", "%s", jsonErrText(err))
	}
	u := &clusterSettingsUpdate{persistent: map[string]*string{}, transient: map[string]*string{}}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		var dst map[string]*string
		switch k {
		case "persistent":
			dst = u.persistent
		case "transient":
			dst = u.transient
		default:
			return nil, newErr(http.StatusBadRequest, "x_content_parse_exception", "[cluster_update_settings_request] unknown field [%s]", k)
		}
		if tok := xcontentToken(top[k]); tok != "START_OBJECT" {
			return nil, newErr(http.StatusBadRequest, "x_content_parse_exception", "[cluster_update_settings_request] %s doesn't support values of type: %s", k, tok)
		}
		if err := flattenClusterSettings(top[k], dst); err != nil {
			return nil, newErr(http.StatusBadRequest, "x_content_parse_exception", "[cluster_update_settings_request] failed to parse field [%s]", k)
		}
	}
	if len(u.persistent) == 0 && len(u.transient) == 0 {
		return nil, newErr(http.StatusBadRequest, "action_request_validation_exception", "Validation Failed: 1: no settings to update;")
	}
	return u, nil
}

// flattenClusterSettings flattens a settings object as Settings.fromXContent
// does: nested keys join with dots, scalars become strings, null stays nil.
func flattenClusterSettings(raw json.RawMessage, dst map[string]*string) error {
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil {
		return err
	}
	if obj == nil {
		return fmt.Errorf("not an object")
	}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, vv := range x {
				walk(prefix+k+".", vv)
			}
		case nil:
			dst[strings.TrimSuffix(prefix, ".")] = nil
		case []any:
			parts := make([]string, 0, len(x))
			for _, e := range x {
				s, _ := scalarString(e)
				parts = append(parts, s)
			}
			s := "[" + strings.Join(parts, ", ") + "]"
			dst[strings.TrimSuffix(prefix, ".")] = &s
		default:
			s, _ := scalarString(x)
			dst[strings.TrimSuffix(prefix, ".")] = &s
		}
	}
	walk("", obj)
	return nil
}

// validate checks every key, transient first as Elasticsearch does, so
// that a refused request changes nothing.
func (u *clusterSettingsUpdate) validate() *esError {
	for _, sec := range []struct {
		scope string
		m     map[string]*string
	}{{"transient", u.transient}, {"persistent", u.persistent}} {
		for _, k := range slices.Sorted(maps.Keys(sec.m)) {
			if err := clusterSettingError(sec.scope, k, sec.m[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

// applyClusterSettings applies one section's update to cur and returns the
// new settings and the updates Elasticsearch answers with (resets are left
// out of the answer).
func applyClusterSettings(cur map[string]string, upd map[string]*string) (next, answered map[string]string) {
	next, answered = maps.Clone(cur), map[string]string{}
	if next == nil {
		next = map[string]string{}
	}
	for k, v := range upd {
		if v != nil {
			next[k], answered[k] = *v, *v
			continue
		}
		for name := range next {
			if name == k || strings.HasSuffix(k, "*") && wildMatch(k, name) {
				delete(next, name)
			}
		}
	}
	return next, answered
}

// destructiveRequiresNameLocked is the effective
// action.destructive_requires_name. s.mu is held.
func (s *Server) destructiveRequiresNameLocked() bool {
	for _, m := range []map[string]string{s.transientSettings, s.persistentSettings} {
		if v, ok := m[settingDestructiveRequiresName]; ok {
			return v == "true"
		}
	}
	return s.nodeDestructiveRequiresName()
}

// nodeDestructiveRequiresName is the node setting (Config), true unset.
func (s *Server) nodeDestructiveRequiresName() bool {
	return s.cfg.DestructiveRequiresName == nil || *s.cfg.DestructiveRequiresName
}

// failDestructiveLocked refuses wildcard and _all targets of a destructive
// operation while action.destructive_requires_name is true
// (DestructiveOperations.failDestructive). s.mu is held.
func (s *Server) failDestructiveLocked(expr string) *esError {
	if !s.destructiveRequiresNameLocked() || expr == "*,-*" {
		return nil // "*,-*" matches nothing, so it is never destructive
	}
	for _, part := range strings.Split(expr, ",") {
		if part == "_all" || strings.Contains(part, "*") {
			return illegalArgument("Wildcard expressions or all indices are not allowed")
		}
	}
	return nil
}

// clusterSettingsDefaults are the defaults GET /_cluster/settings?include_defaults
// lists: the settings this server can answer truthfully.
func (s *Server) clusterSettingsDefaults() map[string]string {
	return map[string]string{
		settingDestructiveRequiresName: fmt.Sprint(s.nodeDestructiveRequiresName()),
		"action.auto_create_index":     "true", // writes to a missing index create it
		"cluster.name":                 "eventpipe",
		"node.name":                    s.nodeName,
	}
}

// handleGetClusterSettings serves GET /_cluster/settings
// (rest-api-spec/api/cluster.get_settings.json).
func (s *Server) handleGetClusterSettings(rc *reqCtx, _ []string) (int, any) {
	flat := boolParam(rc, "flat_settings")
	s.mu.RLock()
	pers, trans := maps.Clone(s.persistentSettings), maps.Clone(s.transientSettings)
	s.mu.RUnlock()
	out := ordered{
		{"persistent", settingsView(pers, nil, flat)},
		{"transient", settingsView(trans, nil, flat)},
	}
	if boolParam(rc, "include_defaults") {
		defs := s.clusterSettingsDefaults()
		for k := range defs {
			if _, ok := pers[k]; ok {
				delete(defs, k)
			} else if _, ok := trans[k]; ok {
				delete(defs, k)
			}
		}
		out = append(out, jsonKV{"defaults", settingsView(defs, nil, flat)})
	}
	return http.StatusOK, out
}

// transientDeprecation is Elasticsearch 8's deprecation warning for
// transient cluster settings.
const transientDeprecation = "[transient settings removal] Updating cluster settings through transientSettings is deprecated. Use persistent settings instead."

// handlePutClusterSettings serves PUT /_cluster/settings
// (rest-api-spec/api/cluster.put_settings.json).
func (s *Server) handlePutClusterSettings(rc *reqCtx, _ []string) (int, any) {
	u, err := parseClusterSettingsUpdate(rc.body)
	if err != nil {
		return errResp(err)
	}
	if err := u.validate(); err != nil {
		return errResp(err)
	}
	if len(u.transient) > 0 {
		rc.w.Header().Add("Warning", deprecationWarning(transientDeprecation))
	}
	s.cpMu.RLock()
	s.mu.Lock()
	trans, transAns := applyClusterSettings(s.transientSettings, u.transient)
	pers, persAns := applyClusterSettings(s.persistentSettings, u.persistent)
	pos := int64(-1)
	if len(u.persistent) > 0 {
		var werr error
		pos, werr = s.wal.append(encodeMeta(recClusterSettings, metaRecord{Settings: pers}))
		if werr != nil {
			s.mu.Unlock()
			s.cpMu.RUnlock()
			return errResp(internalError(werr))
		}
	}
	s.transientSettings, s.persistentSettings = trans, pers
	s.mu.Unlock()
	s.cpMu.RUnlock()
	if pos >= 0 {
		if werr := s.wal.waitDurable(pos); werr != nil {
			return errResp(internalError(werr))
		}
	}
	flat := boolParam(rc, "flat_settings")
	return http.StatusOK, ordered{
		{"acknowledged", true},
		{"persistent", settingsView(persAns, nil, flat)},
		{"transient", settingsView(transAns, nil, flat)},
	}
}

// deprecationWarning renders a Warning header value as Elasticsearch does.
func deprecationWarning(msg string) string {
	return `299 Elasticsearch-` + versionNumber + `-eventpipe "` + msg + `"`
}
