package esserver

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
)

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		cfg  Config
		want string // the *eventstore.ValidationError's Field
	}{
		{Config{}, "DataDir"},
		{Config{DataDir: "x", Addr: "no-port"}, "Addr"},
		{Config{DataDir: "x", RefreshInterval: -time.Second}, "RefreshInterval"},
	}
	for _, c := range cases {
		var ve *eventstore.ValidationError
		err := c.cfg.Validate()
		if !errors.As(err, &ve) || ve.Field != c.want {
			t.Fatalf("Validate(%+v) = %v, want an *eventstore.ValidationError on %s", c.cfg, err, c.want)
		}
		if _, err := New(c.cfg); !errors.As(err, &ve) || ve.Field != c.want {
			t.Fatalf("New(%+v) = %v, want an *eventstore.ValidationError on %s", c.cfg, err, c.want)
		}
	}
	if err := (Config{DataDir: "x"}).Validate(); err != nil {
		t.Fatalf("minimal config: %v", err)
	}
	c := Config{DataDir: "x"}
	c.setDefaults()
	if c.Addr != "127.0.0.1:9200" || c.RefreshInterval != time.Second || c.Logger == nil {
		t.Fatalf("defaults: %+v", c)
	}
}

// openLocal runs a Server through httptest for in-process restart tests.
func openLocal(t *testing.T, dir string) (*Server, *target) {
	t.Helper()
	srv, err := New(Config{DataDir: dir, Logger: testLogger})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return srv, &target{name: "local", url: hs.URL, local: srv, client: hs.Client(), prefix: "p-"}
}

func TestDataDirLocked(t *testing.T) {
	dir := t.TempDir()
	srv, _ := openLocal(t, dir)
	if _, err := New(Config{DataDir: dir, Logger: testLogger}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second server on the same data dir: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestRestartPreservesState(t *testing.T) {
	dir := t.TempDir()
	srv, tg := openLocal(t, dir)
	tg.do(t, "PUT", "/books", map[string]any{
		"settings": map[string]any{"number_of_replicas": 0, "refresh_interval": "5s"},
		"mappings": map[string]any{"properties": map[string]any{"title": map[string]any{"type": "text"}, "year": map[string]any{"type": "integer"}}},
	}).must(t, 200)
	tg.do(t, "PUT", "/books/_doc/1", map[string]any{"title": "Dune", "year": 1965}).must(t, 201)
	tg.do(t, "PUT", "/books/_doc/1", map[string]any{"title": "Dune", "year": 1966}).must(t, 200)
	tg.do(t, "PUT", "/books/_doc/2?version=7&version_type=external", map[string]any{"title": "Emma", "year": 1815}).must(t, 201)
	tg.do(t, "DELETE", "/books/_doc/2?version=9&version_type=external", nil).must(t, 200)
	tg.do(t, "PUT", "/books/_doc/3", map[string]any{"title": "Ulysses", "genre": "novel"}).must(t, 201)
	last := tg.do(t, "PUT", "/books/_doc/4", map[string]any{"title": "Beloved"}).must(t, 201).num(t, "_seq_no")
	tg.do(t, "POST", "/_aliases", map[string]any{"actions": []any{map[string]any{"add": map[string]any{"index": "books", "alias": "library"}}}}).must(t, 200)
	if err := srv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	_, tg2 := openLocal(t, dir)
	g := tg2.do(t, "GET", "/library/_doc/1", nil).must(t, 200)
	if g.num(t, "_version") != 2 || g.num(t, "_source.year") != 1966 {
		t.Fatalf("doc 1 after restart: %s", g.raw)
	}
	tg2.do(t, "GET", "/books/_doc/2", nil).must(t, 404)
	tg2.do(t, "PUT", "/books/_doc/2?version=8&version_type=external", map[string]any{"title": "stale"}).expectError(t, 409, "version_conflict_engine_exception")
	n := tg2.do(t, "PUT", "/books/_doc/5", map[string]any{"title": "New"}).must(t, 201)
	if n.num(t, "_seq_no") <= last {
		t.Fatalf("seq_no went backwards after restart: %v <= %v", n.num(t, "_seq_no"), last)
	}
	m := tg2.do(t, "GET", "/books", nil).must(t, 200)
	if m.str("books.mappings.properties.genre.type") != "text" || m.str("books.settings.index.refresh_interval") != "5s" || m.get("books.aliases.library") == nil {
		t.Fatalf("metadata after restart: %s", m.raw)
	}
	s := tg2.do(t, "POST", "/library/_search", map[string]any{"query": map[string]any{"match": map[string]any{"title": "dune"}}}).must(t, 200)
	if !eqStrings(hitIDs(s), []string{"1"}) {
		t.Fatalf("search after restart: %s", s.raw)
	}
}

func TestCheckpointTornTailAndRebuild(t *testing.T) {
	old := checkpointBytes.Load()
	checkpointBytes.Store(16 << 10)
	t.Cleanup(func() { checkpointBytes.Store(old) })
	dir := t.TempDir()
	srv, tg := openLocal(t, dir)
	for b := 0; b < 20; b++ {
		var lines []any
		for i := 0; i < 50; i++ {
			lines = append(lines, map[string]any{"index": map[string]any{"_index": "cp", "_id": fmt.Sprintf("%d-%d", b, i)}}, map[string]any{"b": b, "i": i, "pad": strings.Repeat("x", 40)})
		}
		tg.do(t, "POST", "/_bulk", ndjson(lines...)).must(t, 200)
	}
	tg.do(t, "DELETE", "/cp/_doc/0-0", nil).must(t, 200)
	waitFor(t, "a checkpoint", func() bool {
		snaps, _ := listGens(srv.stateDir(), "snapshot-", ".dat")
		return len(snaps) > 0
	})
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	wals, _ := listGens(state, "wal-", ".log")
	snaps, _ := listGens(state, "snapshot-", ".dat")
	if len(snaps) != 1 || len(wals) != 1 || wals[0] != snaps[0] {
		t.Fatalf("after checkpoints: snapshots %v, logs %v", snaps, wals)
	}
	// Simulate a write torn by a crash: half a frame at the end of the log.
	f, err := os.OpenFile(filepath.Join(state, walName(wals[0])), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write([]byte{200, 0, 0, 0, 1, 2, 3})
	f.Close()
	// And lose the search index entirely: it is rebuilt from the store.
	ents, _ := os.ReadDir(filepath.Join(dir, "indices"))
	for _, e := range ents {
		_ = os.RemoveAll(filepath.Join(dir, "indices", e.Name()))
	}
	srv2, tg2 := openLocal(t, dir)
	if c := tg2.do(t, "GET", "/cp/_count", nil).must(t, 200); c.num(t, "count") != 999 {
		t.Fatalf("count after rebuild: %s", c.raw)
	}
	tg2.do(t, "GET", "/cp/_doc/0-0", nil).must(t, 404)
	tg2.do(t, "GET", "/cp/_doc/19-49", nil).must(t, 200)
	tg2.do(t, "PUT", "/cp/_doc/after", map[string]any{"ok": true}).must(t, 201)
	if err := srv2.Close(); err != nil {
		t.Fatal(err)
	}
	_, tg3 := openLocal(t, dir)
	tg3.do(t, "GET", "/cp/_doc/after", nil).must(t, 200)
}

func TestTombstoneGC(t *testing.T) {
	_, tg := openLocal(t, t.TempDir())
	tg.do(t, "PUT", "/gc", map[string]any{"settings": map[string]any{"gc_deletes": "100ms"}}).must(t, 200)
	tg.do(t, "PUT", "/gc/_doc/1?version=10&version_type=external", map[string]any{"v": 1}).must(t, 201)
	tg.do(t, "DELETE", "/gc/_doc/1?version=20&version_type=external", nil).must(t, 200)
	tg.do(t, "PUT", "/gc/_doc/1?version=15&version_type=external", map[string]any{"v": 2}).expectError(t, 409, "version_conflict_engine_exception")
	// After index.gc_deletes the tombstone is gone, as in Elasticsearch.
	waitFor(t, "tombstone expiry", func() bool {
		return tg.do(t, "PUT", "/gc/_doc/1?version=15&version_type=external", map[string]any{"v": 3}).status == 201
	})
}
