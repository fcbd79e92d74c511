package esserver

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

const destructiveKey = "action.destructive_requires_name"

// resetClusterSettings clears the setting this file changes, when the
// test ends, so that it leaves the cluster as it found it.
func resetClusterSettings(t *testing.T, tg *target) {
	t.Cleanup(func() {
		tg.do(t, "PUT", "/_cluster/settings", map[string]any{
			"persistent": map[string]any{destructiveKey: nil},
			"transient":  map[string]any{destructiveKey: nil},
		})
	})
}

// putDestructive sets action.destructive_requires_name in one scope.
func putDestructive(t *testing.T, tg *target, scope string, v any) resp {
	t.Helper()
	return tg.do(t, "PUT", "/_cluster/settings", map[string]any{scope: map[string]any{destructiveKey: v}}).must(t, 200)
}

func wantJSON(t *testing.T, what string, got any, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s = %#v, want %#v", what, got, want)
	}
}

func TestClusterSettingsGet(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		resetClusterSettings(t, tg)
		r := tg.do(t, "GET", "/_cluster/settings", nil).must(t, 200)
		if _, ok := r.get("persistent").(map[string]any); !ok {
			t.Fatalf("no persistent object: %s", r.raw)
		}
		if _, ok := r.get("transient").(map[string]any); !ok {
			t.Fatalf("no transient object: %s", r.raw)
		}
		if r.get("defaults") != nil {
			t.Fatalf("defaults without include_defaults: %s", r.raw)
		}
		if tg.local != nil {
			wantJSON(t, "GET /_cluster/settings", r.body, map[string]any{"persistent": map[string]any{}, "transient": map[string]any{}})
		}
		d := tg.do(t, "GET", "/_cluster/settings?include_defaults=true&master_timeout=30s&timeout=30s", nil).must(t, 200)
		if v := d.str("defaults.action.destructive_requires_name"); v != "true" && v != "false" {
			t.Fatalf("defaults lack action.destructive_requires_name: %s", d.raw)
		}
		f := tg.do(t, "GET", "/_cluster/settings?include_defaults&flat_settings=true", nil).must(t, 200)
		defs, _ := f.get("defaults").(map[string]any)
		if v, _ := defs[destructiveKey].(string); v != "true" && v != "false" {
			t.Fatalf("flat defaults lack %s: %s", destructiveKey, f.raw)
		}
		if tg.local != nil && defs[destructiveKey] != "true" {
			t.Fatalf("node default of %s = %v, want true", destructiveKey, defs[destructiveKey])
		}
		tg.do(t, "GET", "/_cluster/settings?nope=1", nil).expectError(t, 400, "illegal_argument_exception")
		tg.do(t, "GET", "/_cluster/settings?flat_settings=maybe", nil).expectError(t, 400, "illegal_argument_exception")

		// A setting in persistent is no longer a default.
		putDestructive(t, tg, "persistent", false)
		d = tg.do(t, "GET", "/_cluster/settings?include_defaults=true&flat_settings=true", nil).must(t, 200)
		defs, _ = d.get("defaults").(map[string]any)
		if _, ok := defs[destructiveKey]; ok {
			t.Fatalf("a set setting is listed among the defaults: %s", d.raw)
		}
	})
}

func TestClusterSettingsPutShapesAndPrecedence(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		resetClusterSettings(t, tg)
		a := tg.idx(t, "prec-a")
		tg.do(t, "PUT", "/"+a, nil).must(t, 200)
		wild := tg.prefix + "prec-*"

		// nested form, boolean value: the answer holds the update as a string
		r := tg.do(t, "PUT", "/_cluster/settings", map[string]any{"persistent": map[string]any{"action": map[string]any{"destructive_requires_name": false}}}).must(t, 200)
		wantJSON(t, "PUT persistent response", r.body, map[string]any{
			"acknowledged": true,
			"persistent":   map[string]any{"action": map[string]any{"destructive_requires_name": "false"}},
			"transient":    map[string]any{},
		})
		g := tg.do(t, "GET", "/_cluster/settings", nil).must(t, 200)
		if g.str("persistent.action.destructive_requires_name") != "false" {
			t.Fatalf("GET after PUT: %s", g.raw)
		}
		g = tg.do(t, "GET", "/_cluster/settings?flat_settings=true", nil).must(t, 200)
		if g.get("persistent") == nil || g.get("persistent").(map[string]any)[destructiveKey] != "false" {
			t.Fatalf("flat GET after PUT: %s", g.raw)
		}

		// transient (flat form, string value) overrides persistent
		r = tg.do(t, "PUT", "/_cluster/settings?flat_settings=true", map[string]any{"transient": map[string]any{destructiveKey: "true"}}).must(t, 200)
		wantJSON(t, "PUT transient response", r.body, map[string]any{
			"acknowledged": true,
			"persistent":   map[string]any{},
			"transient":    map[string]any{destructiveKey: "true"},
		})
		tg.do(t, "DELETE", "/"+wild, nil).expectError(t, 400, "illegal_argument_exception")
		tg.do(t, "HEAD", "/"+a, nil).must(t, 200)

		// null resets; the answer leaves reset settings out
		r = putDestructive(t, tg, "transient", nil)
		wantJSON(t, "PUT reset response", r.body, map[string]any{"acknowledged": true, "persistent": map[string]any{}, "transient": map[string]any{}})
		tg.do(t, "DELETE", "/"+wild, nil).must(t, 200)
		tg.do(t, "HEAD", "/"+a, nil).must(t, 404)

		// wildcard reset of the persistent one: the node setting applies again
		tg.do(t, "PUT", "/_cluster/settings", map[string]any{"persistent": map[string]any{"action.*": nil}}).must(t, 200)
		g = tg.do(t, "GET", "/_cluster/settings", nil).must(t, 200)
		if g.get("persistent.action") != nil {
			t.Fatalf("persistent setting survived its reset: %s", g.raw)
		}
		if tg.local != nil {
			tg.do(t, "PUT", "/"+a, nil).must(t, 200)
			tg.do(t, "DELETE", "/"+wild, nil).expectError(t, 400, "illegal_argument_exception")
		}
	})
}

func TestClusterSettingsRefusals(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		resetClusterSettings(t, tg)
		put := func(body any) resp { return tg.do(t, "PUT", "/_cluster/settings", body) }
		reason := func(r resp, want string) {
			t.Helper()
			if !strings.Contains(r.str("error.reason"), want) {
				t.Fatalf("reason %q, want it to contain %q; body: %s", r.str("error.reason"), want, r.raw)
			}
		}
		r := put(map[string]any{"persistent": map[string]any{"no.such.setting": "1"}})
		r.expectError(t, 400, "illegal_argument_exception")
		reason(r, "persistent setting [no.such.setting], not recognized")
		r = put(map[string]any{"transient": map[string]any{"no": map[string]any{"such": 1}}})
		r.expectError(t, 400, "illegal_argument_exception")
		reason(r, "transient setting [no.such], not recognized")
		r = put(map[string]any{"persistent": map[string]any{"no.such.setting": nil}})
		r.expectError(t, 400, "illegal_argument_exception")
		reason(r, "persistent setting [no.such.setting], not recognized")
		r = put(map[string]any{"persistent": map[string]any{destructiveKey: "maybe"}})
		r.expectError(t, 400, "illegal_argument_exception")
		reason(r, "Failed to parse value [maybe] as only [true] or [false] are allowed.")
		r = put(map[string]any{"persistent": map[string]any{"cluster.name": "other"}})
		r.expectError(t, 400, "illegal_argument_exception")
		reason(r, "persistent setting [cluster.name], not dynamically updateable")
		put(map[string]any{}).expectError(t, 400, "action_request_validation_exception")
		put(map[string]any{"persistent": map[string]any{}, "transient": map[string]any{}}).expectError(t, 400, "action_request_validation_exception")
		put(map[string]any{"settings": map[string]any{destructiveKey: false}}).expectError(t, 400, "x_content_parse_exception")
		r = put(map[string]any{"persistent": "x"})
		r.expectError(t, 400, "x_content_parse_exception")
		reason(r, "[cluster_update_settings_request] persistent doesn't support values of type: VALUE_STRING")
		tg.do(t, "PUT", "/_cluster/settings?include_defaults=true", map[string]any{"persistent": map[string]any{destructiveKey: false}}).expectError(t, 400, "illegal_argument_exception")
		if tg.local != nil {
			// a real Elasticsearch setting this server does not implement
			r = put(map[string]any{"persistent": map[string]any{"cluster.routing.allocation.enable": "none"}})
			r.expectError(t, 400, "illegal_argument_exception")
			reason(r, "[eventpipe]")
			reason(r, "[cluster.routing.allocation.enable]")
			// a request with a refused setting changes nothing
			r = put(map[string]any{"persistent": map[string]any{destructiveKey: false, "logger.org.example": "debug"}})
			r.expectError(t, 400, "illegal_argument_exception")
			reason(r, "[eventpipe]")
			g := tg.do(t, "GET", "/_cluster/settings", nil).must(t, 200)
			wantJSON(t, "settings after refusals", g.body, map[string]any{"persistent": map[string]any{}, "transient": map[string]any{}})
		}
	})
}

// TestDeleteIndexWildcards: with action.destructive_requires_name false,
// wildcards in DELETE /{index} expand to indices only (never through
// aliases), allow_no_indices decides whether matching nothing is a 404.
func TestDeleteIndexWildcards(t *testing.T) {
	each(t, func(t *testing.T, tg *target) {
		resetClusterSettings(t, tg)
		a, b := tg.idx(t, "wd-a"), tg.idx(t, "wd-b")
		alias := tg.prefix + "wdal"
		setup := func() {
			tg.do(t, "DELETE", "/"+a+","+b+"?ignore_unavailable=true", nil).must(t, 200)
			tg.do(t, "PUT", "/"+a, map[string]any{"aliases": map[string]any{alias: map[string]any{}}}).must(t, 200)
			tg.do(t, "PUT", "/"+b, nil).must(t, 200)
		}
		exists := func(name string, want bool) {
			t.Helper()
			st := tg.do(t, "HEAD", "/"+name, nil).status
			if (st == 200) != want {
				t.Fatalf("HEAD /%s = %d, want exists=%v", name, st, want)
			}
		}
		setup()
		putDestructive(t, tg, "persistent", true)
		for _, expr := range []string{tg.prefix + "wd-*", tg.prefix + "wdal*", a + "," + tg.prefix + "wd-b*"} {
			r := tg.do(t, "DELETE", "/"+expr, nil)
			r.expectError(t, 400, "illegal_argument_exception")
			if r.str("error.reason") != "Wildcard expressions or all indices are not allowed" {
				t.Fatalf("DELETE /%s: %s", expr, r.raw)
			}
			exists(a, true)
		}
		r := tg.do(t, "PUT", "/"+tg.prefix+"wd-*/_block/write", nil)
		r.expectError(t, 400, "illegal_argument_exception")
		// the match-none pattern is never destructive
		tg.do(t, "DELETE", "/*,-*", nil).must(t, 200)
		exists(a, true)

		putDestructive(t, tg, "persistent", false)
		// a wildcard matching only an alias matches nothing
		tg.do(t, "DELETE", "/"+tg.prefix+"wdal*", nil).must(t, 200)
		exists(a, true)
		exists(b, true)
		tg.do(t, "DELETE", "/"+tg.prefix+"wdal*?allow_no_indices=false", nil).expectError(t, 404, "index_not_found_exception")
		tg.do(t, "DELETE", "/"+b+","+tg.prefix+"wdal*?allow_no_indices=false", nil).expectError(t, 404, "index_not_found_exception")
		exists(b, true)
		tg.do(t, "DELETE", "/"+tg.prefix+"wdal*,"+b, nil).must(t, 200)
		exists(a, true)
		exists(b, false)
		// an explicit alias is still refused
		tg.do(t, "DELETE", "/"+alias, nil).expectError(t, 400, "illegal_argument_exception")

		setup()
		// exclusions after a wildcard
		tg.do(t, "DELETE", "/"+tg.prefix+"wd-*,-"+a, nil).must(t, 200)
		exists(a, true)
		exists(b, false)
		setup()
		r = tg.do(t, "PUT", "/"+tg.prefix+"wd-*/_block/write", nil).must(t, 200)
		if n := len(r.get("indices").([]any)); n != 2 {
			t.Fatalf("wildcard block: %s", r.raw)
		}
		tg.do(t, "PUT", "/"+tg.prefix+"wd-*/_settings", map[string]any{"index.blocks.write": nil}).must(t, 200)
		tg.do(t, "DELETE", "/"+tg.prefix+"wd-*", nil).must(t, 200)
		exists(a, false)
		exists(b, false)
		tg.do(t, "HEAD", "/_alias/"+alias, nil).must(t, 404)

		if tg.local != nil {
			// _all and * (only on the local server: they delete everything)
			setup()
			tg.do(t, "DELETE", "/_all", nil).must(t, 200)
			exists(a, false)
			exists(b, false)
			setup()
			tg.do(t, "DELETE", "/*", nil).must(t, 200)
			exists(a, false)
			tg.do(t, "DELETE", "/_all", nil).must(t, 200)
			tg.do(t, "DELETE", "/*?allow_no_indices=false", nil).expectError(t, 404, "index_not_found_exception")
		}
	})
}

func TestDestructiveRequiresNameNodeSetting(t *testing.T) {
	off := false
	srv := serve(t, Config{DestructiveRequiresName: &off})
	tg := &target{name: "local", url: "http://" + srv.Addr(), local: srv, client: &http.Client{Timeout: 30 * time.Second}, prefix: "n-"}
	d := tg.do(t, "GET", "/_cluster/settings?include_defaults=true&flat_settings=true", nil).must(t, 200)
	if d.get("defaults").(map[string]any)[destructiveKey] != "false" {
		t.Fatalf("node setting not among the defaults: %s", d.raw)
	}
	tg.do(t, "PUT", "/n-1", nil).must(t, 200)
	tg.do(t, "DELETE", "/n-*", nil).must(t, 200)
	tg.do(t, "HEAD", "/n-1", nil).must(t, 404)
	// a cluster setting overrides the node setting
	putDestructive(t, tg, "persistent", true)
	tg.do(t, "PUT", "/n-1", nil).must(t, 200)
	tg.do(t, "DELETE", "/n-*", nil).expectError(t, 400, "illegal_argument_exception")
}

func TestDestructiveRequiresNameFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{{nil, true}, {[]string{"--destructive-requires-name=false"}, false}, {[]string{"--destructive-requires-name"}, true}} {
		var cfg Config
		fs := pflag.NewFlagSet("es-server", pflag.ContinueOnError)
		cfg.BindFlags(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if cfg.DestructiveRequiresName == nil || *cfg.DestructiveRequiresName != c.want {
			t.Fatalf("%v: DestructiveRequiresName = %v, want %v", c.args, cfg.DestructiveRequiresName, c.want)
		}
	}
}

func TestClusterSettingsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	srv, tg := openLocal(t, dir)
	putDestructive(t, tg, "persistent", false)
	putDestructive(t, tg, "transient", true)
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"persistent": map[string]any{destructiveKey: "false"}, "transient": map[string]any{}}
	// replayed from the write-ahead log; the transient setting is gone
	srv, tg = openLocal(t, dir)
	wantJSON(t, "after restart", tg.do(t, "GET", "/_cluster/settings?flat_settings=true", nil).must(t, 200).body, want)
	tg.do(t, "PUT", "/p-1", nil).must(t, 200)
	tg.do(t, "DELETE", "/p-*", nil).must(t, 200)
	// and from a snapshot
	if err := srv.checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	srv, tg = openLocal(t, dir)
	wantJSON(t, "after checkpoint and restart", tg.do(t, "GET", "/_cluster/settings?flat_settings=true", nil).must(t, 200).body, want)
	// a reset persists too
	putDestructive(t, tg, "persistent", nil)
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	_, tg = openLocal(t, dir)
	wantJSON(t, "after reset and restart", tg.do(t, "GET", "/_cluster/settings", nil).must(t, 200).body,
		map[string]any{"persistent": map[string]any{}, "transient": map[string]any{}})
}
