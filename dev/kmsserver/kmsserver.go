// Package kmsserver is the local stack's AWS KMS: the key store, key
// types and operation handlers of github.com/nsmithuk/local-kms (a
// KMS-compatible service in Go, persisted in LevelDB), served by an
// http.Server of ours on a loopback address. Local KMS's own main listens on
// every interface; this package never does: Validate refuses an address
// whose host is not loopback.
//
// It speaks KMS's JSON protocol (application/x-amz-json-1.1) as Local KMS
// does: a POST to "/" whose X-Amz-Target header names the operation
// ("TrentService.GenerateDataKey"). Anything else is refused the way Local
// KMS refuses it: another path 404, another method 405, a body that is not
// JSON 415, an operation it does not have 501. Requests are not
// authenticated (clients sign with any static credentials), so it holds
// only local test keys.
//
// The data (keys with their key material, aliases, tags) survives a stop
// and a kill of the process: every write reaches LevelDB's journal before
// it is answered (not fsynced: a machine crash may lose the last writes).
//
// Local KMS keeps its region and account in package variables, so one
// process serves one Config: Run and Open set them.
package kmsserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	lkconfig "github.com/nsmithuk/local-kms/src/config"
	"github.com/nsmithuk/local-kms/src/data"
	"github.com/nsmithuk/local-kms/src/handler"
	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"

	"github.com/eventpipe/eventpipe/eventstore"
)

// Defaults of Config.
const (
	DefaultAddr      = "127.0.0.1:8100"
	DefaultRegion    = "us-east-1"    // the region the local AWS clients use (dynamoclient)
	DefaultAccountID = "111122223333" // Local KMS's own default, AWS's example account
)

// ServiceTarget is the prefix of every X-Amz-Target KMS's JSON protocol
// sends ("TrentService.ListKeys").
const ServiceTarget = "TrentService"

// maxBody bounds a request body; KMS's largest inputs (imported key
// material, a 4 KiB plaintext in base64) are far below it.
const maxBody = 1 << 20

// Config configures Run.
type Config struct {
	// Addr is the TCP address to listen on, on a loopback host; default
	// DefaultAddr. "127.0.0.1:0" picks a free port.
	Addr string
	// DataDir is the LevelDB folder keys and aliases persist in.
	// Required; created when missing. One process at a time may open it.
	DataDir string
	// Region and AccountID make the ARNs of keys and aliases
	// (arn:aws:kms:<region>:<account>:key/<id>); keys are stored under
	// their ARNs, so changing either hides the keys made before. Defaults
	// DefaultRegion and DefaultAccountID.
	Region, AccountID string
	// Logger receives the server's logs; default slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.Region == "" {
		c.Region = DefaultRegion
	}
	if c.AccountID == "" {
		c.AccountID = DefaultAccountID
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first invalid field of c, naming it.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("kmsserver: Config: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if c.DataDir == "" {
		return bad("DataDir", "is empty: it is required")
	}
	if c.Addr != "" {
		host, _, err := net.SplitHostPort(c.Addr)
		if err != nil {
			return bad("Addr", "%q: %v", c.Addr, err)
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return bad("Addr", "%q: the host must be a loopback address (127.0.0.1, ::1 or localhost); the local KMS has no authentication", c.Addr)
		}
	}
	if c.AccountID != "" && (len(c.AccountID) != 12 || strings.Trim(c.AccountID, "0123456789") != "") {
		return bad("AccountID", "%q is not 12 digits", c.AccountID)
	}
	return nil
}

// BindFlags registers the server's command-line flags on fs, writing into
// c. `eventpipe stack kms-server` and test harnesses share it.
func (c *Config) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Addr, "addr", DefaultAddr, "listen address (a loopback host:port)")
	fs.StringVar(&c.DataDir, "data-dir", "", "folder persisting keys and aliases (required)")
	fs.StringVar(&c.Region, "region", DefaultRegion, "region in the ARNs of keys and aliases")
	fs.StringVar(&c.AccountID, "account-id", DefaultAccountID, "account id in the ARNs of keys and aliases")
}

// DB is an open key store.
type DB struct {
	db *data.Database
}

// Close closes the store.
func (d *DB) Close() { d.db.Close() }

// Open sets Local KMS's region and account from cfg and opens the key
// store in cfg.DataDir, creating it when missing. It fails when another
// process has it open.
func Open(cfg Config) (db *DB, err error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("kmsserver: create data dir: %w", err)
	}
	dir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("kmsserver: data dir: %w", err)
	}
	lkconfig.AWSRegion, lkconfig.AWSAccountId, lkconfig.DatabasePath = cfg.Region, cfg.AccountID, dir
	// data.NewDatabase panics when LevelDB cannot open the folder (held
	// by another process, corrupt).
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("kmsserver: open key store %s (another kms-server may hold it): %v", dir, r)
		}
	}()
	return &DB{db: data.NewDatabase(dir)}, nil
}

// operation is one KMS operation of Local KMS's request handler.
type operation func(*handler.RequestHandler) handler.Response

// operations are the KMS operations served, by the name X-Amz-Target
// gives after "TrentService.". Every exported method of
// handler.RequestHandler that answers a Response is one
// (TestEveryHandlerMethodIsAnOperation).
var operations = map[string]operation{
	"CancelKeyDeletion":                   (*handler.RequestHandler).CancelKeyDeletion,
	"CreateAlias":                         (*handler.RequestHandler).CreateAlias,
	"CreateKey":                           (*handler.RequestHandler).CreateKey,
	"Decrypt":                             (*handler.RequestHandler).Decrypt,
	"DeleteAlias":                         (*handler.RequestHandler).DeleteAlias,
	"DeleteImportedKeyMaterial":           (*handler.RequestHandler).DeleteImportedKeyMaterial,
	"DescribeKey":                         (*handler.RequestHandler).DescribeKey,
	"DisableKey":                          (*handler.RequestHandler).DisableKey,
	"DisableKeyRotation":                  (*handler.RequestHandler).DisableKeyRotation,
	"EnableKey":                           (*handler.RequestHandler).EnableKey,
	"EnableKeyRotation":                   (*handler.RequestHandler).EnableKeyRotation,
	"Encrypt":                             (*handler.RequestHandler).Encrypt,
	"GenerateDataKey":                     (*handler.RequestHandler).GenerateDataKey,
	"GenerateDataKeyPair":                 (*handler.RequestHandler).GenerateDataKeyPair,
	"GenerateDataKeyPairWithoutPlaintext": (*handler.RequestHandler).GenerateDataKeyPairWithoutPlaintext,
	"GenerateDataKeyWithoutPlaintext":     (*handler.RequestHandler).GenerateDataKeyWithoutPlaintext,
	"GenerateMac":                         (*handler.RequestHandler).GenerateMac,
	"GenerateRandom":                      (*handler.RequestHandler).GenerateRandom,
	"GetKeyPolicy":                        (*handler.RequestHandler).GetKeyPolicy,
	"GetKeyRotationStatus":                (*handler.RequestHandler).GetKeyRotationStatus,
	"GetParametersForImport":              (*handler.RequestHandler).GetParametersForImport,
	"GetPublicKey":                        (*handler.RequestHandler).GetPublicKey,
	"ImportKeyMaterial":                   (*handler.RequestHandler).ImportKeyMaterial,
	"ListAliases":                         (*handler.RequestHandler).ListAliases,
	"ListKeys":                            (*handler.RequestHandler).ListKeys,
	"ListResourceTags":                    (*handler.RequestHandler).ListResourceTags,
	"PutKeyPolicy":                        (*handler.RequestHandler).PutKeyPolicy,
	"ReEncrypt":                           (*handler.RequestHandler).ReEncrypt,
	"ScheduleKeyDeletion":                 (*handler.RequestHandler).ScheduleKeyDeletion,
	"Sign":                                (*handler.RequestHandler).Sign,
	"TagResource":                         (*handler.RequestHandler).TagResource,
	"UntagResource":                       (*handler.RequestHandler).UntagResource,
	"UpdateAlias":                         (*handler.RequestHandler).UpdateAlias,
	"UpdateKeyDescription":                (*handler.RequestHandler).UpdateKeyDescription,
	"Verify":                              (*handler.RequestHandler).Verify,
	"VerifyMac":                           (*handler.RequestHandler).VerifyMac,
}

// Handler answers KMS requests from db. Operations run one at a time:
// Local KMS's handlers read, check and write the store in separate steps
// (an alias's existence, then the alias), which concurrent requests
// could interleave; each takes microseconds to milliseconds (generating
// an RSA key pair, longer).
func Handler(db *DB, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.Default()
	}
	// Local KMS's handlers log through logrus: into ours.
	lr := logrus.New()
	lr.SetOutput(io.Discard)
	lr.SetLevel(logrus.InfoLevel)
	lr.AddHook(slogHook{logger})
	return &kmsHandler{db: db, log: logger, lr: lr}
}

type kmsHandler struct {
	db  *DB
	log *slog.Logger
	lr  *logrus.Logger
	mu  sync.Mutex
}

func (h *kmsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		refuse(w, http.StatusNotFound, "Page not found")
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		refuse(w, http.StatusMethodNotAllowed, "Method Not Allowed")
		return
	}
	// application/x-amz-json-1.1 (the SDKs) or application/json.
	if !strings.Contains(r.Header.Get("Content-Type"), "json") {
		refuse(w, http.StatusUnsupportedMediaType, "Only JSON based content types accepted")
		return
	}
	target := r.Header.Get("X-Amz-Target")
	service, name, _ := strings.Cut(target, ".")
	op, ok := operations[name]
	if service != ServiceTarget || !ok {
		refuse(w, http.StatusNotImplemented, fmt.Sprintf("Passed X-Amz-Target (%s) is not implemented", target))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	resp := h.run(op, r)
	if resp.Code >= 500 {
		h.log.Warn("kms operation failed", "operation", name, "status", resp.Code, "body", resp.Body)
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(resp.Code)
	_, _ = io.WriteString(w, resp.Body)
}

// run runs one operation at a time (a panic in it, which net/http
// recovers from, must not keep the lock).
func (h *kmsHandler) run(op operation, r *http.Request) handler.Response {
	h.mu.Lock()
	defer h.mu.Unlock()
	return op(handler.NewRequestHandler(r, h.lr, h.db.db))
}

// refuse answers a request that reaches no operation, in plain text as
// Local KMS does.
func refuse(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg)
}

// slogHook passes Local KMS's logrus entries to a slog.Logger, at their
// level.
type slogHook struct{ log *slog.Logger }

func (slogHook) Levels() []logrus.Level { return logrus.AllLevels }

func (h slogHook) Fire(e *logrus.Entry) error {
	level := slog.LevelInfo
	switch {
	case e.Level <= logrus.ErrorLevel:
		level = slog.LevelError
	case e.Level == logrus.WarnLevel:
		level = slog.LevelWarn
	case e.Level >= logrus.DebugLevel:
		level = slog.LevelDebug
	}
	h.log.Log(context.Background(), level, strings.TrimSpace(e.Message))
	return nil
}

// Run opens the key store and serves KMS on cfg.Addr until ctx ends,
// then closes the store.
func Run(ctx context.Context, cfg Config) error {
	cfg.setDefaults()
	db, err := Open(cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("kmsserver: listen on %s: %w", cfg.Addr, err)
	}
	log := cfg.Logger.With("component", "kmsserver")
	srv := &http.Server{Handler: Handler(db, log), ReadHeaderTimeout: 30 * time.Second,
		ReadTimeout: time.Minute, WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 1 << 20,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	errCh := make(chan error, 1)
	go func() { errCh <- srv.Serve(ln) }()
	log.Info("local KMS listening (github.com/nsmithuk/local-kms's key store and handlers)",
		"addr", ln.Addr().String(), "url", "http://"+ln.Addr().String(), "data_dir", cfg.DataDir,
		"region", cfg.Region, "account", cfg.AccountID)
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			return fmt.Errorf("kmsserver: shutdown: %w", err)
		}
		<-errCh
		log.Info("local KMS stopped")
		return nil
	case err := <-errCh:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("kmsserver: serve: %w", err)
	}
}
