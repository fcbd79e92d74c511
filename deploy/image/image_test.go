// Package image_test checks eventpipe's container image
// (deploy/image/Containerfile, built by `make image`): it builds the image
// with podman on scratch (nothing can be pulled here) and runs eventpipe
// from it as the image runs in production, non-root with a read-only root
// filesystem and no /tmp, against the local stack: `version`, `migrate`,
// `status`, and the whole pipeline (serve, two relays, consume --all) as
// containers with `demo --once` passing through it. Like every integration
// test it fails, never skips, when podman or a service is missing; under
// -short (`make test-unit`) it skips, saying so.
package image_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/dev/demo"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// runtimeArgs are podman's global flags here: Debian's podman runs
// containers only with runc (its default crun fails on setrlimit).
var runtimeArgs = []string{"--runtime", "runc"}

// image is the image the tests built.
type image struct {
	podman string // podman's path
	ref    string // localhost/eventpipe-test:<tag>
	commit string // `git rev-parse HEAD` of the build
	label  string // label=value on every container the tests start, to remove them all
}

var (
	buildOnce sync.Once
	built     image
	buildErr  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if built.ref != "" {
		// Both tags make image gives it: its version and latest.
		latest, _, _ := strings.Cut(built.ref, ":")
		latest += ":latest"
		if out, err := exec.Command(built.podman, "rmi", "-f", built.ref, latest).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "podman rmi %s %s: %v\n%s", built.ref, latest, err, out)
		}
	}
	os.Exit(code)
}

// buildImage runs `make image IMAGE_BASE=scratch` once per test binary
// and returns the image; it fails t when podman is missing.
func buildImage(t *testing.T) image {
	t.Helper()
	testenv.Integration(t)
	podman, err := exec.LookPath("podman")
	if err != nil {
		t.Fatalf("podman is not installed (%v): the image tests build and run the image with Debian's podman and runc; "+
			"run `apt-get install -y podman runc` (.ci/run installs them)", err)
	}
	if _, err := exec.LookPath("runc"); err != nil {
		t.Fatalf("runc is not installed (%v): podman runs the image's containers with runc here; run `apt-get install -y runc`", err)
	}
	buildOnce.Do(func() {
		root, err := filepath.Abs("../..")
		if err != nil {
			buildErr = err.Error()
			return
		}
		head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
		if err != nil {
			buildErr = "git rev-parse HEAD: " + err.Error()
			return
		}
		tag := strconv.FormatInt(time.Now().UnixNano(), 36)
		im := image{podman: podman, ref: "localhost/eventpipe-test:" + tag, commit: strings.TrimSpace(string(head)), label: "eventpipe.test=" + tag}
		start := time.Now()
		cmd := exec.Command("make", "-C", root, "image", "IMAGE_BASE=scratch", "IMAGE=localhost/eventpipe-test", "IMAGE_TAG="+tag,
			"IMAGE_CTX="+filepath.Join(os.TempDir(), "eventpipe-image-"+tag))
		out, err := cmd.CombinedOutput()
		_ = os.RemoveAll(filepath.Join(os.TempDir(), "eventpipe-image-"+tag))
		if err != nil {
			buildErr = "make image: " + err.Error() + "\n" + string(out)
			return
		}
		built = im
		t.Logf("make image: %s in %s", im.ref, time.Since(start).Round(time.Millisecond))
	})
	if buildErr != "" {
		t.Fatal(buildErr)
	}
	return built
}

// environ is what a container gets: the security settings of the test's
// environment (as a child process inherits them) and ep's addresses and
// names, without the stack's folder (the image has none).
func environ(ep endpoints.Endpoints) []string {
	vars := map[string]string{}
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		if (strings.HasPrefix(name, "EVENTPIPE_") || strings.HasPrefix(name, "ELASTICSEARCH_") || strings.HasPrefix(name, "AWS_") ||
			name == "PGPASSFILE") && !strings.HasPrefix(name, "EVENTPIPE_TEST_") {
			vars[name] = value
		}
	}
	for _, kv := range integration.Environ(ep) {
		name, value, _ := strings.Cut(kv, "=")
		vars[name] = value
	}
	delete(vars, endpoints.EnvStackDir)
	env := make([]string, 0, len(vars))
	for name, value := range vars {
		env = append(env, name+"="+value)
	}
	slices.Sort(env)
	return env
}

// runArgs are podman's arguments to run args in the image as production
// runs it: user 65532, a read-only root filesystem without even a /tmp,
// the host's network (the stack listens on loopback), env in its
// environment and each file an *_FILE variable names mounted read-only at
// its path.
func (im image) runArgs(env []string, args ...string) []string {
	run := append(slices.Clone(runtimeArgs), "run", "--rm", "--read-only", "--read-only-tmpfs=false", "--user", "65532:65532",
		"--network", "host", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", "--label", im.label)
	for _, kv := range env {
		run = append(run, "-e", kv)
		if name, value, _ := strings.Cut(kv, "="); strings.HasSuffix(name, "_FILE") && value != "" {
			run = append(run, "-v", value+":"+value+":ro")
		}
	}
	return append(append(run, im.ref), args...)
}

// run runs args in a container to its end and returns its output.
func (im image) run(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, im.podman, im.runArgs(env, args...)...).CombinedOutput()
	return string(out), err
}

// removeContainers removes every container the tests started that is
// still there (one a test killed).
func (im image) removeContainers(t *testing.T) {
	out, err := exec.Command(im.podman, "ps", "-aq", "--filter", "label="+im.label).Output()
	if err != nil {
		t.Logf("podman ps: %v", err)
		return
	}
	if ids := strings.Fields(string(out)); len(ids) > 0 {
		if out, err := exec.Command(im.podman, append([]string{"rm", "-f"}, ids...)...).CombinedOutput(); err != nil {
			t.Logf("podman rm: %v\n%s", err, out)
		}
	}
}

// TestImageRunsVersionMigrateAndStatusReadOnlyAsNonRoot: the image says
// what it is in its labels (the commit of the build, its version) and runs
// as user 65532; `version` from it prints the same commit; `migrate` and
// `status` run from it against the stack with a read-only root
// filesystem, status naming the build.
func TestImageRunsVersionMigrateAndStatusReadOnlyAsNonRoot(t *testing.T) {
	im := buildImage(t)
	t.Cleanup(func() { im.removeContainers(t) })

	out, err := exec.Command(im.podman, "image", "inspect", "--format", "{{json .Config}}", im.ref).Output()
	if err != nil {
		t.Fatalf("podman image inspect %s: %v", im.ref, err)
	}
	var config struct {
		User       string
		Entrypoint []string
		Labels     map[string]string
	}
	if err := json.Unmarshal(out, &config); err != nil {
		t.Fatalf("image config %s: %v", out, err)
	}
	if config.User != "65532:65532" || !slices.Equal(config.Entrypoint, []string{"/usr/local/bin/eventpipe"}) {
		t.Fatalf("image runs %v as %q, want /usr/local/bin/eventpipe as 65532:65532", config.Entrypoint, config.User)
	}
	labels := config.Labels
	if labels["org.opencontainers.image.revision"] != im.commit || labels["org.opencontainers.image.title"] != "eventpipe" ||
		labels["org.opencontainers.image.version"] == "" || labels["org.opencontainers.image.source"] == "" || labels["org.opencontainers.image.base.name"] != "scratch" {
		t.Fatalf("image labels %v, want revision %s, title eventpipe, a version, a source and base scratch", labels, im.commit)
	}

	version, err := im.run(t, nil, "version")
	if err != nil {
		t.Fatalf("version: %v\n%s", err, version)
	}
	for _, want := range []string{"commit    " + im.commit + "\n", "version   " + labels["org.opencontainers.image.version"] + "\n", "go        go1."} {
		if !strings.Contains(version, want) {
			t.Fatalf("version prints no %q:\n%s", want, version)
		}
	}

	env := environ(integration.Isolate(t))
	if out, err := im.run(t, env, "migrate"); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	status, err := im.run(t, env, "status")
	if err != nil {
		t.Fatalf("status: %v\n%s", err, status)
	}
	for _, want := range []string{"BUILD eventpipe " + labels["org.opencontainers.image.version"] + " (commit " + im.commit[:12], "CONSUMER GROUPS", "RELAY events"} {
		if !strings.Contains(status, want) {
			t.Fatalf("status prints no %q:\n%s", want, status)
		}
	}
}

// TestDemoPassesThroughThePipelineInContainers runs `serve`, two relays
// sharing the leases and `consume --all` as containers of the image
// (read-only, non-root) and `demo --once` through them: the demo starts
// its children through a script that runs each in a container, and checks
// its read models as it always does.
func TestDemoPassesThroughThePipelineInContainers(t *testing.T) {
	im := buildImage(t)
	t.Cleanup(func() { im.removeContainers(t) })
	ep := integration.Isolate(t)
	free := func() string { return "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)) }
	ep.HTTPAddr = free()
	env := environ(ep)
	if out, err := im.run(t, env, "migrate"); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}

	// The second relay, before the demo starts the first.
	relayAddr := free()
	relay := exec.Command(im.podman, im.runArgs(env, "relay", "--metrics-addr", relayAddr)...)
	var relayLog bytes.Buffer
	relay.Stdout, relay.Stderr = &relayLog, &relayLog
	if err := relay.Start(); err != nil {
		t.Fatalf("start the second relay: %v", err)
	}
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Wait() }()
	t.Cleanup(func() {
		_ = relay.Process.Signal(syscall.SIGTERM)
		select {
		case <-relayDone:
		case <-time.After(15 * time.Second):
			_ = relay.Process.Kill()
			<-relayDone
		}
	})
	integration.Await(t, "the second relay's /healthz", func() error {
		select {
		case err := <-relayDone:
			relayDone <- err
			t.Fatalf("the second relay exited at start (%v):\n%s", err, relayLog.String())
		default:
		}
		resp, err := http.Get("http://" + relayAddr + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})

	// The demo's children in containers: its Binary is a script running
	// the image with the same arguments.
	var script strings.Builder
	script.WriteString("#!/bin/sh\nexec")
	for _, a := range append([]string{im.podman}, im.runArgs(env)...) {
		script.WriteString(" '" + strings.ReplaceAll(a, "'", `'\''`) + "'")
	}
	script.WriteString(` "$@"` + "\n")
	bin := filepath.Join(t.TempDir(), "eventpipe-in-a-container")
	if err := os.WriteFile(bin, []byte(script.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var story bytes.Buffer
	logDir := t.TempDir()
	err := demo.Run(ctx, demo.Config{Binary: bin, Endpoints: ep, Once: true, Out: &story, LogDir: logDir,
		RelayMetricsAddr: free(), ConsumeMetricsAddr: free()})
	if err != nil {
		t.Fatalf("demo --once through containers: %v\n%s\n%s", err, story.String(), childLogs(logDir))
	}
	if !strings.Contains(story.String(), "every read model shows what the commands imply") {
		t.Fatalf("the story did not end as it should:\n%s\n%s", story.String(), childLogs(logDir))
	}
	select {
	case err := <-relayDone:
		t.Fatalf("the second relay exited during the demo (%v):\n%s", err, relayLog.String())
	default:
	}
	// The relays ran in containers: their leases' owners are
	// <hostname>-1-<random>, pid 1 being the container's first process.
	status, err := im.run(t, env, "status")
	if err != nil {
		t.Fatalf("status: %v\n%s", err, status)
	}
	owners := map[string]bool{}
	for _, m := range leaseOwner.FindAllStringSubmatch(status, -1) {
		owners[m[1]] = true
	}
	if len(owners) == 0 {
		t.Fatalf("no lease held by a relay in a container (<hostname>-1-<random>):\n%s", status)
	}
	t.Logf("leases held by %d relay workers in containers: %v", len(owners), slices.Sorted(maps.Keys(owners)))
}

// leaseOwner matches a lease row of `eventpipe status` whose owner is a
// relay in a container: <hostname>-<pid>-<random> with pid 1.
var leaseOwner = regexp.MustCompile(`(?m)^shardId-\S+\s+(\S+-1-[0-9a-f]{8})\s`)

// childLogs returns the demo's children's logs, for a failure.
func childLogs(dir string) string {
	var b strings.Builder
	names, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, name := range names {
		data, _ := os.ReadFile(name)
		fmt.Fprintf(&b, "--- %s\n%s\n", filepath.Base(name), data)
	}
	return b.String()
}
