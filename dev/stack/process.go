package stack

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// processSpec is how a component's process is started.
type processSpec struct {
	path       string
	args       []string
	env        []string // added to the stack's own environment
	credential *syscall.Credential
}

// startProcess launches c's process in its own session (so it outlives the
// `stack up` command), appending its output to the component's log, and
// records its PID. The returned channel closes when the process exits.
func (s *Stack) startProcess(c *component) (<-chan struct{}, error) {
	spec, err := c.command()
	if err != nil {
		return nil, err
	}
	for _, dir := range []string{filepath.Dir(s.pidPath(c)), filepath.Dir(s.logPath(c))} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	logFile, err := os.OpenFile(s.logPath(c), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "\n==== %s starting %s %s\n", time.Now().UTC().Format(time.RFC3339), spec.path, strings.Join(spec.args, " "))

	cmd := exec.Command(spec.path, spec.args...)
	cmd.Env = append(os.Environ(), spec.env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Dir = s.cfg.Dir
	if spec.credential != nil {
		cmd.Dir = "/" // the other user may not be allowed into Dir
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: spec.credential}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.path, err)
	}
	if err := os.WriteFile(s.pidPath(c), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("write pid file: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // reap; the process normally outlives this call
		close(exited)
	}()
	return exited, nil
}

// runningPID returns the PID in c's PID file when that process is alive and
// its command line still carries c's marker.
func (s *Stack) runningPID(c *component) (int, bool) {
	b, err := os.ReadFile(s.pidPath(c))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, processMatches(pid, c.marker)
}

// processMatches reports whether pid is alive (not a zombie) and its
// command line contains marker.
func processMatches(pid int, marker string) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(cmdline) == 0 {
		return false
	}
	return strings.Contains(string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})), marker)
}

// stopProcess sends sig to pid and waits for it to exit, escalating to
// SIGKILL after grace.
func stopProcess(ctx context.Context, pid int, sig syscall.Signal, grace time.Duration) error {
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %v: %w", sig, err)
	}
	deadline := time.Now().Add(grace)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			deadline = time.Now().Add(grace)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}

// portInUse reports whether something accepts TCP connections at addr.
func portInUse(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// logTail returns the last n lines of the file at path, indented.
func logTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "  (no log: " + err.Error() + ")"
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	if len(lines) == 0 {
		return "  (log is empty)"
	}
	return "  " + strings.Join(lines, "\n  ")
}

// lock takes an exclusive lock on Dir/stack.lock so that two `stack up` or
// `stack down` commands do not race.
func (s *Stack) lock() (func(), error) {
	if err := os.MkdirAll(s.cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("stack: create %s: %w", s.cfg.Dir, err)
	}
	f, err := os.OpenFile(filepath.Join(s.cfg.Dir, "stack.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("stack: open lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("stack: lock %s: %w", f.Name(), err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

func containsLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

// hostPort splits addr and reports whether its host is a loopback address.
func loopbackHostPort(addr string) (host, port string, loopback bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", "", false
	}
	if host == "localhost" {
		return host, port, true
	}
	ip := net.ParseIP(host)
	return host, port, ip != nil && ip.IsLoopback()
}
