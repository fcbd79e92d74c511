package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func TestInfoFromTheToolchainsStamp(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "github.com/eventpipe/eventpipe", Version: "v0.0.0-20261207133000-0123456789ab+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-12-07T13:30:00Z"},
			{Key: "vcs.modified", Value: "true"},
		}}
	got := fromBuildInfo(bi, "", "", "")
	want := Info{Version: "v0.0.0-20261207133000-0123456789ab+dirty", Commit: "0123456789abcdef0123456789abcdef01234567", Modified: true,
		Time: time.Date(2026, 12, 7, 13, 30, 0, 0, time.UTC), GoVersion: "go1.99.1", Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if s := got.String(); s != "eventpipe v0.0.0-20261207133000-0123456789ab+dirty (commit 0123456789ab, modified, 2026-12-07T13:30:00Z) go1.99.1 "+want.Platform {
		t.Fatalf("String() = %q", s)
	}
}

func TestLdflagsOverrideTheStamp(t *testing.T) {
	bi := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "aaaa"}}}
	got := fromBuildInfo(bi, "v1.2.3", "bbbb", "true")
	if got.Version != "v1.2.3" || got.Commit != "bbbb" || !got.Modified || !got.Time.IsZero() {
		t.Fatalf("got %+v, want version v1.2.3 and commit bbbb, modified, no time", got)
	}
	bi.Settings = append(bi.Settings, debug.BuildSetting{Key: "vcs.modified", Value: "true"})
	if got := fromBuildInfo(bi, "", "", "false"); got.Modified {
		t.Fatalf("got %+v, want not modified: -X …modified=false overrides vcs.modified", got)
	}
}

func TestNothingRecordedIsUnknown(t *testing.T) {
	got := fromBuildInfo(nil, "", "", "")
	if got.Version != Unknown || got.Commit != Unknown || got.GoVersion != runtime.Version() {
		t.Fatalf("got %+v, want unknown version and commit, the runtime's Go version", got)
	}
	if s := got.String(); !strings.HasPrefix(s, "eventpipe unknown (commit unknown) go") {
		t.Fatalf("String() = %q", s)
	}
}

func TestReadInATestBinary(t *testing.T) {
	got := Read() // a test binary has no VCS stamp, but a Go version and a platform
	if got.GoVersion == "" || got.Platform == "" || got.Version == "" || got.Commit == "" {
		t.Fatalf("Read() = %+v: a field is empty", got)
	}
}
