package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestParkedHelpNamesReapplyAndTheOldReplayStillWorks: `parked` lists
// reapply and not the hidden replay; `parked replay` is the same command
// under its old name and says so on stderr. Both are refused before any
// I/O here (no --projection), so the test needs no service.
func TestParkedHelpNamesReapplyAndTheOldReplayStillWorks(t *testing.T) {
	run := func(args ...string) (stdout, stderr string, err error) {
		t.Helper()
		var out, errOut bytes.Buffer
		cmd := parkedCommand()
		cmd.SetArgs(args)
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		err = cmd.Execute()
		return out.String(), errOut.String(), err
	}
	help, _, err := run("--help")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(help, "reapply") || strings.Contains(help, "\n  replay") {
		t.Errorf("parked --help lists:\n%s\nwant reapply and not the hidden replay", help)
	}
	for _, name := range []string{"reapply", "replay"} {
		_, stderr, err := run(name)
		if err == nil || err.Error() != "parked reapply: --projection is required" {
			t.Errorf("parked %s without --projection: %v", name, err)
		}
		deprecated := strings.Contains(stderr, "'parked replay' is deprecated, use 'parked reapply'")
		if deprecated != (name == "replay") {
			t.Errorf("parked %s wrote %q on stderr", name, stderr)
		}
	}
}
