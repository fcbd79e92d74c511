package testenv

import (
	"os/exec"
	"syscall"
	"testing"

	"github.com/eventpipe/eventpipe/testkit/integration"
)

// KillRepeatedly kills the child that start starts with SIGKILL kills
// times, restarting it each time, while it works towards total
// (progress reports how far it is): each kill waits until the running
// child made progress, then a random moment up to 400 ms. It then waits
// for progress to reach total, fails tb unless most kills landed before
// that (work in flight), and returns the progress at each kill; its
// waits fail tb only when progress stops moving for
// integration.HangAfter (integration.KillRepeatedly). The last child is
// killed when tb ends.
func KillRepeatedly(tb testing.TB, start func() *exec.Cmd, progress func() int64, total int64, kills int) []int64 {
	tb.Helper()
	Integration(tb)
	p := &startedCmd{start: start}
	p.Start()
	tb.Cleanup(p.Kill)
	return integration.KillRepeatedly(tb, p, progress, total, kills)
}

// startedCmd is the integration.Process of a function that starts a
// command.
type startedCmd struct {
	start func() *exec.Cmd
	cmd   *exec.Cmd
}

func (p *startedCmd) Start() { p.cmd = p.start() }

func (p *startedCmd) Kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_, _ = p.cmd.Process.Wait()
	p.cmd = nil
}
