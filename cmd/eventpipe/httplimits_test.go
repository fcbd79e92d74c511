package main

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/httpapi"
)

// TestServeRefusesBadHTTPLimitsFromFlagsAndEnvironment: serve stops at
// start, naming the setting, on a negative --http-* flag or an
// EVENTPIPE_HTTP_* variable that does not parse, and a flag overrides
// its variable.
func TestServeRefusesBadHTTPLimitsFromFlagsAndEnvironment(t *testing.T) {
	bin := eventpipeBinary(t)
	serve := func(env []string, args ...string) string {
		// A serve that takes the limits stops at once; the bound is
		// reached only by one that starts serving.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"serve", "--no-auth"}, args...)...)
		cmd.Env = append(os.Environ(), append(env, "EVENTPIPE_HTTP_ADDR=127.0.0.1:"+strconv.Itoa(testenv.FreePort(t)))...)
		out, err := cmd.CombinedOutput()
		if err == nil || ctx.Err() != nil {
			t.Fatalf("serve %v with %v started: %v\n%s", args, env, err, out)
		}
		return string(out)
	}
	if out := serve(nil, "--http-read-timeout=-1s"); !strings.Contains(out, "Limits.ReadTimeout") {
		t.Errorf("a negative --http-read-timeout: %s", out)
	}
	if out := serve([]string{httpapi.EnvIdleTimeout + "=soon"}); !strings.Contains(out, httpapi.EnvIdleTimeout) {
		t.Errorf("%s=soon: %s", httpapi.EnvIdleTimeout, out)
	}
	// The flag wins over the variable, and the two together are checked.
	if out := serve([]string{httpapi.EnvReadTimeout + "=10s"}, "--http-read-header-timeout=20s"); !strings.Contains(out, "Limits.ReadHeaderTimeout") {
		t.Errorf("a header timeout of 20s over a read timeout of 10s: %s", out)
	}
}
