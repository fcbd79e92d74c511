package demo

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// children are the pipeline's processes the demo started.
type children struct {
	binary, logDir string
	procs          []*child
}

type child struct {
	name, logPath string
	cmd           *exec.Cmd
	log           *os.File
	exited        chan error
}

// start runs the binary with args, logging to <logDir>/<name>.log, and
// waits until health answers 200 (or the child exits).
func (c *children) start(ctx context.Context, name string, args []string, health string) (*child, error) {
	logPath := filepath.Join(c.logDir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("demo: %s log: %w", name, err)
	}
	cmd := exec.Command(c.binary, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("demo: start %s: %w", name, err)
	}
	p := &child{name: name, logPath: logPath, cmd: cmd, log: f, exited: make(chan error, 1)}
	go func() { p.exited <- cmd.Wait() }()
	c.procs = append(c.procs, p)
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-p.exited:
			p.exited <- err
			return nil, fmt.Errorf("demo: %s exited at start (%v); see %s", name, err, logPath)
		case <-ctx.Done():
			return nil, ctx.Err()
		default:
		}
		if resp, err := http.Get(health); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("demo: %s not healthy at %s after 60 s; see %s", name, health, logPath)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop ends every child with SIGTERM (SIGKILL after 10 s), last first.
func (c *children) stop(n *narrator) {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		p.log.Close()
	}
	if len(c.procs) > 0 {
		n.line("stopped %d processes", len(c.procs))
	}
}
