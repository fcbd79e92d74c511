package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/endpoints"
)

// TestPrintedURLsCarryNoPassword: `stack env`, `stack status` and
// `migrate` with Postgres and Elasticsearch URLs that hold a password
// print them masked; `stack env` leaves the variable out (a comment
// shows it masked) so that evaluating its output keeps the environment's
// value.
func TestPrintedURLsCarryNoPassword(t *testing.T) {
	bin := eventpipeBinary(t)
	const secret = "s3cretPW"
	ep := testenv.Endpoints()
	pgURL := strings.Replace(ep.Postgres, "postgres://eventpipe@", "postgres://eventpipe:"+secret+"@", 1)
	esURL := strings.Replace(ep.Elasticsearch, "://", "://elastic:"+secret+"@", 1)
	if pgURL == ep.Postgres || esURL == ep.Elasticsearch {
		t.Fatalf("cannot put a password in %s / %s", ep.Postgres, ep.Elasticsearch)
	}
	env := append(os.Environ(), endpoints.EnvPostgres+"="+pgURL, endpoints.EnvElasticsearch+"="+esURL,
		endpoints.EnvStackDir+"="+t.TempDir())
	run := func(args ...string) string {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if args[0] == "migrate" && err != nil {
			t.Fatalf("eventpipe %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	for _, args := range [][]string{{"stack", "env"}, {"stack", "status"}, {"migrate"}} {
		out := run(args...)
		if strings.Contains(out, secret) {
			t.Errorf("eventpipe %s prints the password:\n%s", strings.Join(args, " "), out)
		}
		if args[1%len(args)] != "env" && !strings.Contains(out, "elastic:xxxxx@") {
			t.Errorf("eventpipe %s does not show the Elasticsearch URL masked:\n%s", strings.Join(args, " "), out)
		}
	}
	out := run("stack", "env")
	for _, name := range []string{endpoints.EnvPostgres, endpoints.EnvElasticsearch} {
		if strings.Contains(out, "export "+name+"=") || !strings.Contains(out, fmt.Sprintf("# %s=", name)) {
			t.Errorf("stack env: want %s left out, shown masked in a comment:\n%s", name, out)
		}
	}
	if !strings.Contains(out, "export "+endpoints.EnvDynamoDB+"=") {
		t.Errorf("stack env leaves out %s:\n%s", endpoints.EnvDynamoDB, out)
	}
}
