package esserver

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	versionNumber  = "8.15.0"
	versionCreated = "8150099"
	luceneVersion  = "9.11.1"
	nodeID         = "eventpipe-local"
	productName    = "eventpipe Elasticsearch-API server"
)

// checkpointBytes is the write-ahead log size after which a snapshot is
// written and older log generations are dropped.
var checkpointBytes atomic.Int64

func init() { checkpointBytes.Store(64 << 20) }

// Server is a local server implementing a subset of the Elasticsearch 8
// REST API, with durable storage in Config.DataDir.
type Server struct {
	cfg     Config
	log     *slog.Logger
	lock    *os.File
	wal     *wal
	handler http.Handler
	tls     *tls.Config    // nil: plain HTTP
	auth    *authenticator // nil: no authentication

	// cpMu orders state changes against checkpoints: every operation that
	// appends to the log holds it for reading while it appends and applies;
	// a checkpoint holds it for writing while it rotates the log and
	// captures the state.
	cpMu sync.RWMutex

	mu          sync.RWMutex // guards indices, aliases and the cluster settings
	indices     map[string]*index
	aliases     map[string]map[string]aliasMeta
	clusterUUID string
	nodeName    string

	// persistentSettings and transientSettings are the cluster settings
	// (flat keys) set through PUT /_cluster/settings, guarded by mu; only
	// the persistent ones are logged and survive a restart.
	persistentSettings map[string]string
	transientSettings  map[string]string

	stopping      chan struct{}
	bgDone        chan struct{}
	checkpointing atomic.Bool
	cpWG          sync.WaitGroup
	closeOnce     sync.Once
	closeErr      error

	addrMu sync.Mutex
	addr   string
}

type nodeInfo struct {
	ClusterUUID string `json:"cluster_uuid"`
	NodeName    string `json:"node_name"`
}

func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// New opens (or creates) the data directory, recovers every acknowledged
// write from the snapshot and write-ahead log, and brings the search
// indices up to date. The returned Server is ready to serve through
// Handler or ListenAndServe.
func New(cfg Config) (*Server, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	s := &Server{
		cfg: cfg, log: cfg.Logger.With("component", "esserver"),
		indices: map[string]*index{}, aliases: map[string]map[string]aliasMeta{},
		stopping: make(chan struct{}), bgDone: make(chan struct{}),
	}
	if cfg.TLSCertFile != "" {
		tc, err := loadServerTLS(cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSCAFile)
		if err != nil {
			return nil, err
		}
		s.tls = tc
	}
	if cfg.CredentialsFile != "" {
		creds, err := LoadCredentials(cfg.CredentialsFile)
		if err != nil {
			return nil, err
		}
		s.auth = newAuthenticator(creds)
	}
	for _, d := range []string{cfg.DataDir, s.stateDir(), filepath.Join(cfg.DataDir, "indices")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("esserver: create data dir: %w", err)
		}
	}
	lf, err := os.OpenFile(filepath.Join(cfg.DataDir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("esserver: open lock file: %w", err)
	}
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lf.Close()
		return nil, fmt.Errorf("esserver: data dir %s is in use by another server: %w", cfg.DataDir, err)
	}
	s.lock = lf
	ok := false
	defer func() {
		if !ok {
			s.closeEngines()
			if s.wal != nil {
				_ = s.wal.close()
			}
			_ = s.lock.Close()
		}
	}()
	if err := s.loadNodeInfo(); err != nil {
		return nil, err
	}
	gen, err := s.recoverState()
	if err != nil {
		return nil, fmt.Errorf("esserver: recover %s: %w", cfg.DataDir, err)
	}
	if s.wal, err = openWAL(s.stateDir(), gen); err != nil {
		return nil, fmt.Errorf("esserver: open write-ahead log: %w", err)
	}
	known := map[string]bool{}
	for _, ix := range s.indices {
		fresh, err := s.openEngine(ix)
		if err != nil {
			return nil, fmt.Errorf("esserver: %w", err)
		}
		if err := s.reconcile(ix, fresh); err != nil {
			return nil, fmt.Errorf("esserver: %w", err)
		}
		known[ix.uuid] = true
	}
	s.removeOrphanEngines(known)
	s.handler = http.HandlerFunc(s.serveHTTP)
	go s.background()
	ok = true
	s.log.Info(productName+" ready (a local stand-in implementing a subset of the Elasticsearch 8 REST API, not Elasticsearch)",
		"data_dir", cfg.DataDir, "indices", len(s.indices), "startup", time.Since(start).String(),
		"tls", s.tls != nil, "authentication", s.auth != nil)
	return s, nil
}

func (s *Server) stateDir() string { return filepath.Join(s.cfg.DataDir, "state") }

func (s *Server) loadNodeInfo() error {
	p := filepath.Join(s.cfg.DataDir, "node.json")
	b, err := os.ReadFile(p)
	if err == nil {
		var ni nodeInfo
		if json.Unmarshal(b, &ni) == nil && ni.ClusterUUID != "" {
			s.clusterUUID, s.nodeName = ni.ClusterUUID, ni.NodeName
			return nil
		}
	}
	ni := nodeInfo{ClusterUUID: randomID(11), NodeName: "eventpipe-" + randomID(3)}
	b, _ = json.Marshal(ni)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("esserver: write node info: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("esserver: write node info: %w", err)
	}
	s.clusterUUID, s.nodeName = ni.ClusterUUID, ni.NodeName
	return syncDir(s.cfg.DataDir)
}

func (s *Server) removeOrphanEngines(known map[string]bool) {
	dir := filepath.Join(s.cfg.DataDir, "indices")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !known[e.Name()] {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				s.log.Warn("cannot remove leftover search index", "dir", e.Name(), "error", err)
			}
		}
	}
}

// Handler returns the HTTP handler serving the Elasticsearch API.
func (s *Server) Handler() http.Handler { return s.handler }

// Addr returns the address the server listens on once ListenAndServe has
// bound it (useful with port 0), or Config.Addr before that.
func (s *Server) Addr() string {
	s.addrMu.Lock()
	defer s.addrMu.Unlock()
	if s.addr != "" {
		return s.addr
	}
	return s.cfg.Addr
}

// URL returns the server's base URL: "https://" + Addr() when it serves
// TLS, "http://" + Addr() otherwise.
func (s *Server) URL() string {
	if s.tls != nil {
		return "https://" + s.Addr()
	}
	return "http://" + s.Addr()
}

// ListenAndServe listens on Config.Addr and serves (over TLS when
// Config.TLSCertFile is set) until ctx is done, then
// shuts the HTTP server down gracefully and closes the Server.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		_ = s.Close()
		return fmt.Errorf("esserver: listen on %s: %w", s.cfg.Addr, err)
	}
	s.addrMu.Lock()
	s.addr = ln.Addr().String()
	s.addrMu.Unlock()
	// Limits of a local server: a large _bulk body has minutes, an idle
	// connection two.
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 30 * time.Second,
		ReadTimeout: 5 * time.Minute, WriteTimeout: 5 * time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 1 << 20,
		// TLS handshake failures (a client not trusting the CA) are the
		// client's to report; keep them out of the server's error output.
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}
	if s.tls != nil {
		srv.TLSConfig = s.tls.Clone()
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	// Shutdown waits 5s before it counts a connection that never sent a
	// byte of a request (StateNew: e.g. a client that gave up after the
	// TLS handshake, as go-elasticsearch does on a fingerprint mismatch)
	// as idle. No request is lost by closing those at once.
	var fresh sync.Map // net.Conn -> struct{}, in StateNew
	srv.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateNew {
			fresh.Store(c, struct{}{})
		} else {
			fresh.Delete(c)
		}
	}
	srv.RegisterOnShutdown(func() {
		fresh.Range(func(k, _ any) bool {
			_ = k.(net.Conn).Close()
			return true
		})
	})
	errCh := make(chan error, 1)
	go func() { errCh <- srv.Serve(ln) }()
	s.log.Info(productName+" listening", "addr", s.Addr(), "url", s.URL())
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		serr := srv.Shutdown(sctx)
		<-errCh
		if serr != nil {
			serr = fmt.Errorf("esserver: shutdown http: %w", serr)
		}
		return errors.Join(serr, s.Close())
	case err := <-errCh:
		return errors.Join(fmt.Errorf("esserver: serve: %w", err), s.Close())
	}
}

// Close stops background work, writes a final snapshot and closes every
// file. It is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.stopping)
		<-s.bgDone
		s.cpWG.Wait()
		var errs []error
		if s.wal.size() > 0 {
			if err := s.checkpoint(); err != nil {
				errs = append(errs, err)
			}
		}
		s.closeEngines()
		if err := s.wal.close(); err != nil {
			errs = append(errs, err)
		}
		if err := s.lock.Close(); err != nil {
			errs = append(errs, fmt.Errorf("esserver: release lock: %w", err))
		}
		s.closeErr = errors.Join(errs...)
		s.log.Info(productName+" closed", "data_dir", s.cfg.DataDir)
	})
	return s.closeErr
}

func (s *Server) closeEngines() {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, ix := range s.indices {
		if err := ix.closeEngine(); err != nil {
			s.log.Warn("close search index", "index", ix.name, "error", err)
		}
	}
}

// background refreshes indices on their refresh interval, expires delete
// tombstones and checkpoints the log when it grows.
func (s *Server) background() {
	defer close(s.bgDone)
	tick := s.cfg.RefreshInterval / 10
	tick = min(max(tick, 5*time.Millisecond), 100*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	lastGC := time.Now()
	for {
		select {
		case <-s.stopping:
			return
		case now := <-t.C:
			s.mu.RLock()
			list := make([]*index, 0, len(s.indices))
			for _, ix := range s.indices {
				list = append(list, ix)
			}
			s.mu.RUnlock()
			for _, ix := range list {
				ix.mu.Lock()
				interval := ix.settings.RefreshInterval
				dirty := len(ix.pending) > 0
				ix.mu.Unlock()
				if interval == 0 {
					interval = s.cfg.RefreshInterval
				}
				if !dirty || interval < 0 {
					continue
				}
				if now.Sub(time.Unix(0, ix.lastRefresh.Load())) >= interval-tick {
					if err := s.refresh(ix); err != nil {
						s.log.Error("periodic refresh failed", "index", ix.name, "error", err)
					}
				}
			}
			if now.Sub(lastGC) >= time.Second {
				lastGC = now
				for _, ix := range list {
					ix.gcTombstones(now)
				}
			}
			if s.wal.size() > checkpointBytes.Load() && s.checkpointing.CompareAndSwap(false, true) {
				s.cpWG.Add(1)
				go func() {
					defer s.cpWG.Done()
					defer s.checkpointing.Store(false)
					if err := s.checkpoint(); err != nil {
						s.log.Error("checkpoint failed", "error", err)
					}
				}()
			}
		}
	}
}
