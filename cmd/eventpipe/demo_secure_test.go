package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe/dev/stack"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/endpoints"
)

// TestDemoRunsOnASecuredStackWithAuthOn follows the README on a stack
// folder of its own, on free ports: `stack up` and a plain `demo --once`
// (a newcomer's first run), `stack down`, `stack up --secure`, `eval
// "$(eventpipe stack env)"`, `demo --once`. The secured run tells the
// whole story with the HTTP API's auth on, acting as the stack's demo
// subject; `auth token` mints what serve accepts.
func TestDemoRunsOnASecuredStackWithAuthOn(t *testing.T) {
	testenv.Integration(t)
	bin := eventpipeBinary(t)
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil { // the postgres user reaches its data folder
			t.Fatal(err)
		}
	}
	// The main stack's downloaded tools, not a second download.
	main := endpoints.FromEnv().StackDir
	if !filepath.IsAbs(main) {
		main = filepath.Join(stack.RepoRoot(), main)
	}
	if err := os.Symlink(filepath.Join(main, "tools"), filepath.Join(dir, "tools")); err != nil {
		t.Fatal(err)
	}
	free := func() string { return "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)) }
	var env []string
	for _, kv := range os.Environ() { // nothing of the shell's stack
		name, _, _ := strings.Cut(kv, "=")
		if (strings.HasPrefix(name, "EVENTPIPE_") || strings.HasPrefix(name, "ELASTICSEARCH_") || name == "PGPASSFILE") &&
			!strings.HasPrefix(name, "EVENTPIPE_TEST_") && name != "EVENTPIPE_STACK_NO_INSTALL" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "EVENTPIPE_STACK_DIR="+dir, "EVENTPIPE_DYNAMODB_ENDPOINT=http://"+free(), "EVENTPIPE_KAFKA_BROKERS="+free(),
		"EVENTPIPE_POSTGRES_URL=postgres://eventpipe@"+free()+"/eventpipe?sslmode=disable", "ELASTICSEARCH_URL=http://"+free(),
		"EVENTPIPE_HTTP_ADDR="+free(), "EVENTPIPE_KMS_ENDPOINT=http://"+free())
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := runWatched(t, cmd)
		if err != nil {
			t.Fatalf("eventpipe %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	t.Cleanup(func() {
		cmd := exec.Command(bin, "stack", "down")
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("stack down: %v\n%s", err, out)
		}
	})
	demo := func() string {
		t.Helper()
		story := run("demo", "--once", "--relay-metrics-addr", free(), "--consume-metrics-addr", free())
		if !strings.Contains(story, "every read model shows what the commands imply") {
			t.Fatalf("the story did not end as it should:\n%s", story)
		}
		return story
	}

	if story := demo(); !strings.Contains(story, "eventpipe serve --no-auth") || strings.Contains(story, "auth on") {
		t.Fatalf("the plain demo does not serve without auth:\n%s", story)
	}
	run("stack", "down")
	if out := run("stack", "up", "--secure"); !strings.Contains(out, "secure mode") {
		t.Fatalf("stack up --secure:\n%s", out)
	}
	for _, line := range strings.Split(strings.TrimSpace(run("stack", "env")), "\n") {
		kv, ok := strings.CutPrefix(line, "export ")
		if !ok {
			continue
		}
		name, value, _ := strings.Cut(kv, "=")
		env = append(env, name+"="+strings.Trim(value, "'"))
	}
	story := demo()
	for _, want := range []string{`auth on: the HTTP API verifies JWTs and its policy; the demo acts as "demo"`, "eventpipe serve   (log"} {
		if !strings.Contains(story, want) {
			t.Errorf("the secured demo's story lacks %q:\n%s", want, story)
		}
	}
	if strings.Contains(story, "--no-auth") {
		t.Errorf("the secured demo serves without auth:\n%s", story)
	}
	if tok := strings.TrimSpace(run("auth", "token", "dev", "--ttl", "10m")); strings.Count(tok, ".") != 2 {
		t.Errorf("auth token printed %q, not a JWT", tok)
	}
	cmd := exec.Command(bin, "auth", "token", "dev", "--ttl", "25h")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "24h") {
		t.Errorf("auth token --ttl 25h: %v\n%s; want a refusal naming the 24h maximum", err, out)
	}
}
