package esserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/testkit/integration"
)

const (
	childDataDirEnv  = "ESSERVER_CHILD_DATADIR"
	childAddrFileEnv = "ESSERVER_CHILD_ADDRFILE"
)

// runChild serves until killed; it is the crash test's server process.
func runChild(dir, addrFile string) {
	srv, err := New(Config{Addr: "127.0.0.1:0", DataDir: dir, RefreshInterval: 200 * time.Millisecond, Logger: testLogger})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: New:", err)
		os.Exit(3)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe(ctx) }()
	for srv.Addr() == "127.0.0.1:0" {
		time.Sleep(time.Millisecond)
	}
	tmp := addrFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(srv.Addr()), 0o644); err != nil {
		os.Exit(4)
	}
	if err := os.Rename(tmp, addrFile); err != nil {
		os.Exit(4)
	}
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(5)
	}
}

type child struct {
	cmd    *exec.Cmd
	url    string
	exited chan struct{} // closed when the process has been reaped
	err    error
}

// kill sends SIGKILL and waits for the process to be reaped.
func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.exited
}

func startChild(t *testing.T, dir string) *child {
	t.Helper()
	addrFile := filepath.Join(t.TempDir(), "addr")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childDataDirEnv+"="+dir, childAddrFileEnv+"="+addrFile)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	c := &child{cmd: cmd, exited: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(c.kill)
	deadline := time.Now().Add(integration.HangAfter())
	for {
		if b, err := os.ReadFile(addrFile); err == nil {
			c.url = "http://" + string(b)
			return c
		}
		select {
		case <-c.exited:
			t.Fatalf("child exited before serving: %v", c.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("child did not start within %v (%s)", integration.HangAfter(), integration.EnvHangAfter)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// acked records what the server acknowledged for one document.
type ackedDoc struct {
	version int64
	n       int64 // value of the "n" field in the acknowledged source
}

type ackLog struct {
	mu   sync.Mutex
	docs map[string]ackedDoc
}

func (a *ackLog) put(id string, version, n int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if cur, ok := a.docs[id]; !ok || version > cur.version {
		a.docs[id] = ackedDoc{version: version, n: n}
	}
}

// TestCrashRecovery kills the server process with SIGKILL while bulk and
// single-document writes are in flight, restarts it on the same data dir
// and checks that every acknowledged write survived with its version.
func TestCrashRecovery(t *testing.T) {
	dir := t.TempDir()
	acks := &ackLog{docs: map[string]ackedDoc{}}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	const index = "crash"
	for round := 0; round < 2; round++ {
		c := startChild(t, dir)
		if round == 0 {
			req, _ := http.NewRequest("PUT", c.url+"/"+index, strings.NewReader(`{"mappings":{"properties":{"n":{"type":"long"},"w":{"type":"keyword"}}}}`))
			req.Header.Set("Content-Type", "application/json")
			res, err := client.Do(req)
			if err != nil || res.StatusCode != 200 {
				t.Fatalf("create index: %v %v", err, res)
			}
			res.Body.Close()
		}
		var inflight, sent, answered atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		post := func(method, path, ct, body string) (*http.Response, []byte, error) {
			req, _ := http.NewRequest(method, c.url+path, strings.NewReader(body))
			req.Header.Set("Content-Type", ct)
			inflight.Add(1)
			sent.Add(1)
			res, err := client.Do(req)
			inflight.Add(-1)
			if err != nil {
				return nil, nil, err
			}
			b, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err != nil {
				return nil, nil, err
			}
			answered.Add(1)
			return res, b, nil
		}
		// Bulk writers: batches of new documents.
		for w := 0; w < 3; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for b := 0; ; b++ {
					select {
					case <-stop:
						return
					default:
					}
					var sb strings.Builder
					ids := make([]string, 50)
					for i := range ids {
						ids[i] = fmt.Sprintf("r%d-b%d-w%d-%d", round, b, w, i)
						fmt.Fprintf(&sb, "{\"index\":{\"_index\":%q,\"_id\":%q}}\n{\"n\":1,\"w\":\"bulk\"}\n", index, ids[i])
					}
					res, body, err := post("POST", "/_bulk", "application/x-ndjson", sb.String())
					if err != nil {
						return
					}
					if res.StatusCode != 200 {
						t.Errorf("bulk status %d: %s", res.StatusCode, body)
						return
					}
					var br struct {
						Items []map[string]struct {
							ID      string `json:"_id"`
							Status  int    `json:"status"`
							Version int64  `json:"_version"`
						} `json:"items"`
					}
					if err := json.Unmarshal(body, &br); err != nil {
						t.Errorf("bulk body: %v", err)
						return
					}
					for _, it := range br.Items {
						r := it["index"]
						if r.Status == 201 || r.Status == 200 {
							acks.put(r.ID, r.Version, 1)
						}
					}
				}
			}(w)
		}
		// Document writers: each updates its own documents in sequence, so
		// every acknowledged version is known; one uses external versions.
		for w := 0; w < 3; w++ {
			wg.Add(1)
			id := fmt.Sprintf("chain-w%d", w)
			// The server may hold a write that was durable but not
			// acknowledged before the last kill: continue from its version.
			cur := currentVersion(t, client, c.url, index, id)
			go func(w int) {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					next := cur + 1
					path := "/" + index + "/_doc/" + id
					if w == 0 {
						path += fmt.Sprintf("?version=%d&version_type=external", next)
					}
					res, body, err := post("PUT", path, "application/json", fmt.Sprintf(`{"n":%d,"w":"doc"}`, next))
					if err != nil {
						return
					}
					if res.StatusCode != 200 && res.StatusCode != 201 {
						t.Errorf("doc write status %d: %s", res.StatusCode, body)
						return
					}
					var dr struct {
						Version int64 `json:"_version"`
					}
					_ = json.Unmarshal(body, &dr)
					if dr.Version != next {
						t.Errorf("doc %s: version %d, want %d", id, dr.Version, next)
						return
					}
					acks.put(id, dr.Version, next)
					cur = next
				}
			}(w)
		}
		// Let writes flow, then kill while requests are outstanding.
		time.Sleep(600 * time.Millisecond)
		deadline := time.Now().Add(integration.HangAfter())
		for inflight.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Microsecond)
		}
		outstanding := inflight.Load()
		c.kill()
		close(stop)
		wg.Wait()
		acks.mu.Lock()
		n := len(acks.docs)
		acks.mu.Unlock()
		t.Logf("round %d: killed with %d requests outstanding; %d sent, %d answered, %d documents acknowledged so far",
			round, outstanding, sent.Load(), answered.Load(), n)
		if outstanding == 0 {
			t.Fatal("the kill did not land while requests were in flight")
		}
		if sent.Load() == answered.Load() {
			t.Fatal("every request was answered: the kill did not interrupt writes")
		}

		// Restart on the same data dir and check every acknowledged write.
		c2 := startChild(t, dir)
		verifyAcked(t, client, c2.url, index, acks)
		c2.kill()
	}
}

func currentVersion(t *testing.T, client *http.Client, url, index, id string) int64 {
	t.Helper()
	res, err := client.Get(url + "/" + index + "/_doc/" + id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	defer res.Body.Close()
	var g struct {
		Version int64 `json:"_version"`
	}
	_ = json.NewDecoder(res.Body).Decode(&g)
	return g.Version
}

func verifyAcked(t *testing.T, client *http.Client, url, index string, acks *ackLog) {
	t.Helper()
	acks.mu.Lock()
	docs := make(map[string]ackedDoc, len(acks.docs))
	for k, v := range acks.docs {
		docs[k] = v
	}
	acks.mu.Unlock()
	ids := make(chan string)
	var missing atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ids {
				res, err := client.Get(url + "/" + index + "/_doc/" + id)
				if err != nil {
					t.Errorf("get %s: %v", id, err)
					continue
				}
				var g struct {
					Found   bool  `json:"found"`
					Version int64 `json:"_version"`
					Source  struct {
						N int64 `json:"n"`
					} `json:"_source"`
				}
				_ = json.NewDecoder(res.Body).Decode(&g)
				res.Body.Close()
				want := docs[id]
				switch {
				case !g.Found:
					missing.Add(1)
					t.Errorf("acknowledged document %s is missing after the crash", id)
				case g.Version < want.version:
					t.Errorf("document %s: version %d after the crash, acknowledged %d", id, g.Version, want.version)
				case strings.HasPrefix(id, "chain-") && g.Source.N != g.Version:
					t.Errorf("document %s: source n=%d does not match version %d", id, g.Source.N, g.Version)
				case !strings.HasPrefix(id, "chain-") && (g.Version != 1 || g.Source.N != 1):
					t.Errorf("document %s: version %d n %d, want 1/1", id, g.Version, g.Source.N)
				}
			}
		}()
	}
	for id := range docs {
		ids <- id
	}
	close(ids)
	wg.Wait()
	// The search index was brought up to date too.
	res, err := client.Post(url+"/"+index+"/_count", "application/json", strings.NewReader(`{"query":{"match_all":{}}}`))
	if err != nil {
		t.Fatalf("count: %v", err)
	}
	var cnt struct {
		Count int `json:"count"`
	}
	_ = json.NewDecoder(res.Body).Decode(&cnt)
	res.Body.Close()
	if cnt.Count < len(docs) {
		t.Errorf("search sees %d documents after recovery, %d were acknowledged", cnt.Count, len(docs))
	}
	t.Logf("verified %d acknowledged documents (%d missing); search count %d", len(docs), missing.Load(), cnt.Count)
}
