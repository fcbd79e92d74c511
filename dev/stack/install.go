package stack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
)

var aptMu sync.Mutex // apt-get holds a global lock; serialise our own calls

// aptInstall installs Debian packages when the stack may do so (root and
// AutoInstall); otherwise it returns an error telling the user what to run.
func (s *Stack) aptInstall(ctx context.Context, what string, pkgs ...string) error {
	cmdline := "apt-get install -y " + strings.Join(pkgs, " ")
	if !*s.cfg.AutoInstall {
		return fmt.Errorf("%s is missing and auto-install is off (EVENTPIPE_STACK_NO_INSTALL): run `%s`", what, cmdline)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s is missing: run `sudo apt-get update && sudo %s`", what, cmdline)
	}
	aptMu.Lock()
	defer aptMu.Unlock()
	s.printf("%-14s installing %s with apt-get (%s is missing)", "install", strings.Join(pkgs, " "), what)
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	for _, args := range [][]string{{"update"}, append([]string{"install", "-y", "--no-install-recommends"}, pkgs...)} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, tail(string(out), 15))
		}
	}
	return nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
