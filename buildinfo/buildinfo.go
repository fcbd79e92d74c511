// Package buildinfo says which build of eventpipe is running: its
// version, the VCS commit it was built from (and whether the tree had
// changes), the commit's time and the Go toolchain. It reads what the Go
// toolchain stamps into every binary (runtime/debug.ReadBuildInfo);
// a release build may override the version and the commit with
//
//	go build -ldflags "-X github.com/eventpipe/eventpipe/buildinfo.version=v1.2.3 -X github.com/eventpipe/eventpipe/buildinfo.commit=$(git rev-parse HEAD)"
//
// and buildinfo.modified=true or false (`make build` and `make image` set
// all three), for builds without VCS stamping (-buildvcs=false, or no
// .git where the binary is built).
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// Set with -ldflags "-X …" (see the package comment); empty: from the
// build information. modified is "true" or "false".
var (
	version  string
	commit   string
	modified string
)

// Unknown stands for a field the build did not record.
const Unknown = "unknown"

// Info describes a build.
type Info struct {
	// Version is the release version (-X …buildinfo.version), else the
	// main module's version as the toolchain recorded it (a pseudo-version
	// with "+dirty" for a local build, "(devel)" without VCS), else Unknown.
	Version string `json:"version"`
	// Commit is the full VCS revision (-X …buildinfo.commit, else
	// vcs.revision), else Unknown.
	Commit string `json:"commit"`
	// Modified says the working tree had uncommitted changes
	// (-X …buildinfo.modified, else vcs.modified).
	Modified bool `json:"modified"`
	// Time is the commit's time (vcs.time); zero when not recorded.
	Time time.Time `json:"time,omitzero"`
	// GoVersion is the toolchain that built the binary ("go1.26.1").
	GoVersion string `json:"go_version"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
}

// Read returns the running binary's build information.
func Read() Info {
	bi, _ := debug.ReadBuildInfo() // nil outside a module build: then only the ldflags and the runtime
	return fromBuildInfo(bi, version, commit, modified)
}

// fromBuildInfo combines bi (may be nil) with the -X overrides.
func fromBuildInfo(bi *debug.BuildInfo, version, commit, modified string) Info {
	info := Info{Version: version, Commit: commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		if bi.GoVersion != "" {
			info.GoVersion = bi.GoVersion
		}
		if info.Version == "" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if info.Commit == "" {
					info.Commit = s.Value
				}
			case "vcs.modified":
				info.Modified, _ = strconv.ParseBool(s.Value)
			case "vcs.time":
				info.Time, _ = time.Parse(time.RFC3339, s.Value)
			}
		}
	}
	if m, err := strconv.ParseBool(modified); err == nil {
		info.Modified = m
	}
	if info.Version == "" {
		info.Version = Unknown
	}
	if info.Commit == "" {
		info.Commit = Unknown
	}
	return info
}

// ShortCommit is Commit's first 12 characters.
func (i Info) ShortCommit() string {
	if len(i.Commit) > 12 {
		return i.Commit[:12]
	}
	return i.Commit
}

// String is the build on one line: "eventpipe v1.2.3 (commit
// 0123456789ab, modified, 2026-12-07T13:00:00Z) go1.26.1 linux/amd64".
func (i Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "eventpipe %s (commit %s", i.Version, i.ShortCommit())
	if i.Modified {
		b.WriteString(", modified")
	}
	if !i.Time.IsZero() {
		b.WriteString(", " + i.Time.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(&b, ") %s %s", i.GoVersion, i.Platform)
	return b.String()
}
