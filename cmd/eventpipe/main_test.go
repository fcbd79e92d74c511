package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/eventpipe/eventpipe/dev/testservers"
)

// binDir holds the binary the tests run, built once for all of them.
var binDir string

func TestMain(m *testing.M) {
	testservers.RunChildIfRequested()
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  string
)

// eventpipeBinary builds this command once per test run (a link of the
// whole binary costs several CPU seconds) and returns its path.
func eventpipeBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "eventpipe-bin-")
		if err != nil {
			buildErr = err.Error()
			return
		}
		binDir = dir
		bin := filepath.Join(dir, "eventpipe")
		// Static, as make build and the image build it (CGO_ENABLED=0),
		// so that the three share one build cache.
		build := exec.Command("go", "build", "-o", bin, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			buildErr = "go build: " + err.Error() + "\n" + string(out)
			return
		}
		builtBin = bin
	})
	if buildErr != "" {
		t.Fatal(buildErr)
	}
	return builtBin
}
