// Package stack fetches, starts, checks and stops the local services
// eventpipe runs against: DynamoDB Local (Amazon's jar from the npm package
// amplify-dynamodb-simulator, run with Java 17), a Kafka-protocol broker
// (franz-go's kfake inside the eventpipe binary), PostgreSQL 15 from
// Debian, eventpipe's own Elasticsearch-API server (dev/esserver, also
// inside the binary; Elasticsearch itself is not installable here), and an
// AWS KMS (dev/kmsserver: Local KMS's key store and operations inside the
// binary) holding the key that wraps per-subject data keys.
// Everything lives under one git-ignored folder: downloads and unpacked
// tools, data, logs and PID files.
//
// Each component listens on the loopback address its endpoint names
// (package endpoints), so the same environment variables that point the
// code and the tests at a service also choose the port the stack uses. An
// endpoint that is not a loopback address is treated as external: the stack
// reports on it but never starts or stops it.
//
// Up is idempotent, Down stops only processes this stack started (by PID,
// checked against the process's command line), and data survives a Down/Up.
package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/eventstore"
)

// Config configures a Stack.
type Config struct {
	// Dir is the stack folder (default: the endpoints' StackDir, ".stack",
	// resolved against the repository root when relative).
	Dir string
	// ToolsDir caches downloaded and unpacked tools (default Dir/tools).
	// Tests point a throwaway stack at the main stack's tools to avoid a
	// second download.
	ToolsDir string
	// Endpoints are the addresses the components listen on (each empty
	// field from the environment: Endpoints.Fill).
	Endpoints endpoints.Endpoints
	// KafkaBrokerCommand runs the Kafka broker; the stack appends its
	// flags (default: this executable with "stack kafka-broker").
	KafkaBrokerCommand []string
	// KafkaBrokerEnv is added to the broker's environment.
	KafkaBrokerEnv []string
	// ESServerCommand runs the Elasticsearch-API server; the stack appends
	// its flags (default: this executable with "stack es-server").
	ESServerCommand []string
	// ESServerEnv is added to the Elasticsearch-API server's environment.
	ESServerEnv []string
	// KMSServerCommand runs the KMS; the stack appends its flags
	// (default: this executable with "stack kms-server").
	KMSServerCommand []string
	// KMSServerEnv is added to the KMS's environment.
	KMSServerEnv []string
	// StartTimeout bounds the wait for one component to become healthy
	// (default 120s; a cold JVM on a busy machine is slow).
	StartTimeout time.Duration
	// AutoInstall lets the stack run apt-get for a missing Java or
	// PostgreSQL when it runs as root (default true; set
	// EVENTPIPE_STACK_NO_INSTALL=1 to forbid).
	AutoInstall *bool
	// Out receives one human-readable line per step (default os.Stdout).
	Out io.Writer
	// Logger receives structured diagnostics (default slog.Default()).
	Logger *slog.Logger
	// Secure makes Up start the services with TLS and credentials, in
	// the shapes production uses: Kafka with TLS and SCRAM-SHA-512,
	// Postgres with hostssl and scram-sha-256 only, the
	// Elasticsearch-API server with HTTPS and an API key; the material
	// is generated once under <Dir>/secure/ (SecureMaterial). The mode
	// Up starts in is recorded in Dir: Status, Down and EnvLines follow
	// the recorded mode whatever this field says, and Up refuses to
	// switch modes while services of the stack run.
	Secure bool
	// KeepMode makes Up start in the mode recorded in Dir, whatever
	// Secure says (Secure only when none is recorded): for commands
	// such as `eventpipe demo` that use the stack in the mode it is in.
	KeepMode bool
}

func (c *Config) setDefaults() error {
	c.Endpoints = c.Endpoints.Fill()
	if c.Dir == "" {
		c.Dir = c.Endpoints.StackDir
	}
	if !filepath.IsAbs(c.Dir) {
		c.Dir = filepath.Join(RepoRoot(), c.Dir)
	}
	if c.ToolsDir == "" {
		c.ToolsDir = filepath.Join(c.Dir, "tools")
	}
	if len(c.KafkaBrokerCommand) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("stack: locate own executable for the kafka broker: %w", err)
		}
		c.KafkaBrokerCommand = []string{exe, "stack", "kafka-broker"}
	}
	if len(c.ESServerCommand) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("stack: locate own executable for the Elasticsearch-API server: %w", err)
		}
		c.ESServerCommand = []string{exe, "stack", "es-server"}
	}
	if len(c.KMSServerCommand) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("stack: locate own executable for the KMS: %w", err)
		}
		c.KMSServerCommand = []string{exe, "stack", "kms-server"}
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 120 * time.Second
	}
	if c.AutoInstall == nil {
		auto := os.Getenv("EVENTPIPE_STACK_NO_INSTALL") == ""
		c.AutoInstall = &auto
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("stack: Config: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if c.Dir == "" {
		return bad("Dir", "is empty")
	}
	if len(c.Endpoints.KafkaBrokers) == 0 {
		return bad("Endpoints.KafkaBrokers", "is empty")
	}
	if c.StartTimeout < 0 {
		return bad("StartTimeout", "%v is negative", c.StartTimeout)
	}
	return nil
}

// RepoRoot returns the nearest ancestor of the working directory holding
// eventpipe's go.mod, or the working directory when there is none (an
// installed binary run elsewhere).
func RepoRoot() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			containsLine(string(b), "module github.com/eventpipe/eventpipe") {
			return dir
		}
		if filepath.Dir(dir) == dir {
			return wd
		}
	}
}

// Stack manages the local services. Its methods are not safe for
// concurrent use within one process; across processes Up and Down take a
// lock file in Dir.
type Stack struct {
	cfg Config
	// wantSecure is the mode Up starts in (Config.Secure); cfg.Secure
	// is the mode in effect: the recorded one until Up changes it.
	wantSecure bool
	components []*component
	outMu      sync.Mutex // components start in parallel and share Out
}

// New validates cfg and returns a Stack.
func New(cfg Config) (*Stack, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Stack{cfg: cfg, wantSecure: cfg.Secure}
	secure, recorded, err := recordedMode(cfg.Dir)
	if err != nil {
		return nil, err
	}
	if recorded {
		s.cfg.Secure = secure
		if cfg.KeepMode {
			s.wantSecure = secure
		}
	}
	s.buildComponents()
	return s, nil
}

// buildComponents (re)builds the components for the mode in effect.
func (s *Stack) buildComponents() {
	s.components = []*component{s.dynamoDB(), s.kafka(), s.postgres(), s.elasticsearch(), s.kms()}
}

// Dir returns the resolved stack folder.
func (s *Stack) Dir() string { return s.cfg.Dir }

// Secure reports whether the stack is in secure mode: the mode recorded
// by the last Up (Config.Secure when none is recorded), or after Up the
// mode Up started in.
func (s *Stack) Secure() bool { return s.cfg.Secure }

// Mode is "secure" or "plain", as Secure says.
func (s *Stack) Mode() string { return modeName(s.cfg.Secure) }

// Endpoints returns the addresses the stack serves.
func (s *Stack) Endpoints() endpoints.Endpoints { return s.cfg.Endpoints }

func (s *Stack) printf(format string, args ...any) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	fmt.Fprintf(s.cfg.Out, format+"\n", args...)
}

// Up starts every managed component that is not already running, in
// parallel, and waits until each answers its health check. A component
// already running (ours, or an external service answering on its address)
// is left as it is. The error names every component that failed, with its
// log file and last log lines.
func (s *Stack) Up(ctx context.Context) error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if err := s.switchMode(); err != nil {
		return err
	}
	start := time.Now()
	errs := make([]error, len(s.components))
	var wg sync.WaitGroup
	for i, c := range s.components {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.up(ctx, c)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s.printf("stack up in %s (folder %s, %s mode)", time.Since(start).Round(10*time.Millisecond), s.cfg.Dir, s.Mode())
	return nil
}

// switchMode puts the stack in the mode Up was asked for: it refuses
// when the recorded mode differs while services of the stack run, and
// otherwise records the mode, generates missing secure material (in
// every mode: Postgres always serves TLS) and rebuilds the components.
func (s *Stack) switchMode() error {
	// Without a record the stack ran in plain mode (an older eventpipe).
	secure, _, err := recordedMode(s.cfg.Dir)
	if err != nil {
		return err
	}
	if secure != s.wantSecure {
		var running []string
		for _, c := range s.components {
			if pid, ok := s.runningPID(c); c.managed && ok {
				running = append(running, fmt.Sprintf("%s (pid %d)", c.name, pid))
			}
		}
		if len(running) > 0 {
			flag := ""
			if secure {
				flag = " --secure"
			}
			return fmt.Errorf("stack: the stack in %s runs in %s mode (%s); run `eventpipe stack down` before switching to %s mode, or `eventpipe stack up%s` to keep it",
				s.cfg.Dir, modeName(secure), strings.Join(running, ", "), modeName(s.wantSecure), flag)
		}
	}
	if err := s.ensureSecureMaterial(); err != nil {
		return err
	}
	if err := writeMode(s.cfg.Dir, s.wantSecure); err != nil {
		return fmt.Errorf("stack: record mode: %w", err)
	}
	if s.cfg.Secure != s.wantSecure {
		s.cfg.Secure = s.wantSecure
		s.buildComponents()
	}
	return nil
}

// ensureSecureMaterial generates the missing files of <Dir>/secure/.
func (s *Stack) ensureSecureMaterial() error {
	var (
		user string
		port uint16 = 5432
	)
	if pgcfg, err := pgx.ParseConfig(s.cfg.Endpoints.Postgres); err == nil {
		user, port = pgcfg.User, pgcfg.Port
	}
	_, err := ensureSecureMaterial(s.cfg.Dir, user, port)
	return err
}

func (s *Stack) up(ctx context.Context, c *component) error {
	began := time.Now()
	switch {
	case !c.managed:
		if err := c.health(ctx); err != nil {
			return fmt.Errorf("%s: external endpoint %s is not healthy (the stack only starts loopback services): %w", c.name, c.addr, err)
		}
		s.printf("%-14s external at %s, healthy", c.name, c.addr)
		return nil
	}
	if pid, ok := s.runningPID(c); ok {
		if err := s.waitHealthy(ctx, c, nil); err != nil {
			return err
		}
		if c.afterStart != nil {
			if err := c.afterStart(ctx); err != nil {
				return s.startError(c, err)
			}
		}
		s.printf("%-14s already running at %s (pid %d), left as it is", c.name, c.addr, pid)
		return nil
	}
	if err := c.health(ctx); err == nil {
		s.printf("%-14s a service not started by this stack already answers at %s; left alone", c.name, c.addr)
		return nil
	}
	if portInUse(c.addr) {
		return fmt.Errorf("%s: %s is in use by another process that does not answer as %s; stop it or choose another port with %s",
			c.name, c.addr, c.name, c.envVar)
	}
	if err := c.prepare(ctx); err != nil {
		return s.startError(c, err)
	}
	exited, err := s.startProcess(c)
	if err != nil {
		return s.startError(c, err)
	}
	if err := s.waitHealthy(ctx, c, exited); err != nil {
		return err
	}
	if c.afterStart != nil {
		if err := c.afterStart(ctx); err != nil {
			return s.startError(c, err)
		}
	}
	pid, _ := s.runningPID(c)
	s.printf("%-14s started at %s (pid %d) in %s, log %s", c.name, c.addr, pid,
		time.Since(began).Round(10*time.Millisecond), s.logPath(c))
	return nil
}

func (s *Stack) waitHealthy(ctx context.Context, c *component, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StartTimeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		probeCtx, probeCancel := context.WithTimeout(ctx, 3*time.Second)
		if c.ready != nil {
			last = c.ready(probeCtx)
		} else {
			last = c.health(probeCtx)
		}
		probeCancel()
		if last == nil {
			return nil
		}
		select {
		case <-exited:
			return s.startError(c, fmt.Errorf("process exited before it became healthy: %w", last))
		case <-ctx.Done():
			return s.startError(c, fmt.Errorf("not healthy after %s: %w", s.cfg.StartTimeout, last))
		case <-tick.C:
		}
	}
}

// startError names the component, its log file and the log's last lines.
func (s *Stack) startError(c *component, err error) error {
	return fmt.Errorf("%s failed to start at %s: %w\nlog %s, last lines:\n%s",
		c.name, c.addr, err, s.logPath(c), logTail(s.logPath(c), 20))
}

// Down stops the processes this stack started, newest first, and removes
// their PID files. Data stays in Dir.
func (s *Stack) Down(ctx context.Context) error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	var errs []error
	for i := len(s.components) - 1; i >= 0; i-- {
		c := s.components[i]
		if !c.managed {
			continue
		}
		pid, ok := s.runningPID(c)
		if !ok {
			s.printf("%-14s not running", c.name)
			_ = os.Remove(s.pidPath(c))
			continue
		}
		if err := stopProcess(ctx, pid, c.stopSignal, 30*time.Second); err != nil {
			errs = append(errs, fmt.Errorf("%s (pid %d): %w", c.name, pid, err))
			continue
		}
		_ = os.Remove(s.pidPath(c))
		s.printf("%-14s stopped (pid %d)", c.name, pid)
	}
	return errors.Join(errs...)
}

// ComponentStatus is one line of Status.
type ComponentStatus struct {
	Name    string
	Address string
	Managed bool   // started and stopped by this stack
	PID     int    // 0 when this stack runs no process for it
	Healthy bool   // the health check answered
	Detail  string // the health error
	LogFile string
}

// Status reports each component: address, PID and a live health check.
func (s *Stack) Status(ctx context.Context) []ComponentStatus {
	out := make([]ComponentStatus, len(s.components))
	var wg sync.WaitGroup
	for i, c := range s.components {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr, _ := endpoints.Redact(c.addr) // never a password
			st := ComponentStatus{Name: c.name, Address: addr, Managed: c.managed}
			if c.managed {
				st.LogFile = s.logPath(c)
				if pid, ok := s.runningPID(c); ok {
					st.PID = pid
				}
			}
			if err := c.health(ctx); err != nil {
				st.Detail = err.Error()
			} else {
				st.Healthy = true
			}
			out[i] = st
		}()
	}
	wg.Wait()
	return out
}

// component is one service of the stack.
type component struct {
	name    string
	addr    string // what the user connects to
	envVar  string // the variable that moves it
	managed bool   // loopback: this stack starts and stops it
	// marker is a substring of the process command line that identifies
	// our process (a data path), guarding against PID reuse.
	marker     string
	stopSignal syscall.Signal
	prepare    func(ctx context.Context) error // fetch, unpack, initdb
	command    func() (*processSpec, error)
	health     func(ctx context.Context) error
	// ready, when set, replaces health while Up waits for the process
	// (before afterStart has set up what health needs).
	ready      func(ctx context.Context) error
	afterStart func(ctx context.Context) error // optional, idempotent
}

func (s *Stack) pidPath(c *component) string { return filepath.Join(s.cfg.Dir, "run", c.name+".pid") }
func (s *Stack) logPath(c *component) string { return filepath.Join(s.cfg.Dir, "logs", c.name+".log") }
func (s *Stack) dataDir(name string) string  { return filepath.Join(s.cfg.Dir, "data", name) }
