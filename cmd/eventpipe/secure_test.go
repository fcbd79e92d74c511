package main

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe/dev/certs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/dev/testservers"
)

// TestThePipelineRunsOnSecuredServicesAndRefusesBadCredentials runs the
// real binary against services secured as in production: Kafka only over
// TLS with SCRAM-SHA-512, the Elasticsearch API only over HTTPS with an
// API key, Postgres only over TLS with a password and
// sslmode=verify-full, every setting from the environment and every
// secret from a file. `demo --once` (migrate, serve, relay, consume
// --all with its read models, search models, analytics and sagas, the
// Sender) tells its whole story; `status`, `replay` and `send --wait`
// work too. Then each client is given a wrong password, a CA that did
// not issue the server's certificate, or no credentials, and the command
// fails, promptly, naming what was refused, rather than hang or fall back
// to plain text.
func TestThePipelineRunsOnSecuredServicesAndRefusesBadCredentials(t *testing.T) {
	testenv.Integration(t)
	bin := eventpipeBinary(t)
	sec := testservers.StartSecureServices(t)
	ddb := testenv.DynamoDB(t)
	events, leases, analytics := testenv.UniqueName(t, "events"), testenv.UniqueName(t, "leases"), testenv.UniqueName(t, "analytics")
	t.Cleanup(func() {
		testenv.DeleteTable(t, ddb, events)
		testenv.DeleteTable(t, ddb, leases)
		testenv.DeleteTable(t, ddb, analytics)
	})
	schema, _ := testenv.PostgresSchema(t, "secure")
	pgURL, pgPass := testservers.SecurePostgres(t, schema)
	free := func() string { return "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)) }
	env := append(os.Environ(), sec.Env...)
	env = append(env, "EVENTPIPE_EVENTS_TABLE="+events, "EVENTPIPE_LEASES_TABLE="+leases, "EVENTPIPE_ANALYTICS_TABLE="+analytics,
		"EVENTPIPE_TOPIC_PREFIX="+testenv.UniqueName(t, "ns")+".", "EVENTPIPE_HTTP_ADDR="+free(),
		"EVENTPIPE_POSTGRES_URL="+pgURL, "PGPASSFILE="+pgPass)
	// Verified actors on the bus: the command handlers refuse unsigned
	// commands; the demo's sender signs with the producer key "demo",
	// the sagas with the deployment's command key.
	keys := t.TempDir()
	writeKey := func(name, text string) string {
		path := filepath.Join(keys, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	demoKey := strings.Repeat("d3m0", 10)
	env = append(env, "EVENTPIPE_REQUIRE_SIGNED_COMMANDS=true",
		"EVENTPIPE_COMMAND_KEY_FILE="+writeKey("deployment.key", strings.Repeat("k3y!", 10)),
		"EVENTPIPE_COMMAND_PRODUCER_KEYS_FILE="+writeKey("producers", "demo "+demoKey+"\n"),
		"EVENTPIPE_COMMAND_SIGNING_KEY_ID=demo", "EVENTPIPE_COMMAND_SIGNING_KEY_FILE="+writeKey("demo.key", demoKey))
	run := func(env []string, args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		return runWatched(t, cmd)
	}

	story, err := run(env, "demo", "--once", "--log-dir", t.TempDir(), "--relay-metrics-addr", free(), "--consume-metrics-addr", free())
	if err != nil || !strings.Contains(story, "every read model shows what the commands imply") {
		t.Fatalf("demo --once on the secured services: %v\n%s", err, story)
	}
	if !strings.Contains(story, "in schema "+schema) {
		t.Fatalf("the demo did not use the schema %s of the TLS URL:\n%s", schema, story)
	}
	if out, err := run(env, "status"); err != nil || strings.Contains(out, "could not") {
		t.Errorf("status on the secured services: %v\n%s", err, out)
	}
	if out, err := run(env, "replay", "todos"); err != nil {
		t.Errorf("replay todos on the secured services: %v\n%s", err, out)
	}
	if out, err := run(env, "replay", "todos-search"); err != nil {
		t.Errorf("replay todos-search on the secured services: %v\n%s", err, out)
	}

	// Bad credentials, per client. A CA that did not issue the servers'
	// certificates:
	other, err := certs.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	otherCA, _, err := other.WriteCA(t.TempDir(), "other")
	if err != nil {
		t.Fatal(err)
	}
	wrong := filepath.Join(t.TempDir(), "wrong-secret")
	if err := os.WriteFile(wrong, []byte("not-the-password"), 0o600); err != nil {
		t.Fatal(err)
	}
	with := func(kv ...string) []string { return append(append([]string(nil), env...), kv...) }
	u, err := url.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("sslrootcert", otherCA)
	u.RawQuery = q.Encode()
	badPG := u.String()
	sendArgs := []string{"send", "CreateTodo", "--aggregate-id", "secure-bad", "--data", `{"title":"x"}`, "--wait", "--timeout", "20s"}
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want []string // any of
	}{
		{"kafka: wrong password", with("EVENTPIPE_KAFKA_SASL_PASSWORD_FILE=" + wrong), sendArgs, []string{"SASL", "authentication", "Authentication"}},
		{"kafka: unknown CA", with("EVENTPIPE_KAFKA_TLS_CA_FILE=" + otherCA), sendArgs, []string{"certificate signed by unknown authority"}},
		{"kafka: no credentials", with("EVENTPIPE_KAFKA_SASL_MECHANISM=", "EVENTPIPE_KAFKA_SASL_USERNAME=", "EVENTPIPE_KAFKA_SASL_PASSWORD_FILE="), sendArgs, []string{"SASL", "authentication", "EOF", "closed", "reset"}},
		{"kafka: plain text", with("EVENTPIPE_KAFKA_TLS_CA_FILE="), sendArgs, []string{"EOF", "closed", "reset", "tls", "TLS"}},
		{"elasticsearch: wrong API key", with("ELASTICSEARCH_API_KEY_FILE=" + wrong), []string{"migrate"}, []string{"401", "security_exception"}},
		{"elasticsearch: no credentials", with("ELASTICSEARCH_API_KEY_FILE="), []string{"migrate"}, []string{"401", "missing authentication credentials"}},
		{"elasticsearch: unknown CA", with("ELASTICSEARCH_TLS_CA_FILE=" + otherCA), []string{"migrate"}, []string{"certificate signed by unknown authority"}},
		{"postgres: wrong password", with("PGPASSFILE=" + wrong), []string{"migrate"}, []string{"password authentication failed", "SASL", "no password"}},
		{"postgres: unknown CA", with("EVENTPIPE_POSTGRES_URL=" + badPG), []string{"migrate"}, []string{"certificate signed by unknown authority"}},
	} {
		out, err := run(c.env, c.args...)
		if err == nil {
			t.Errorf("%s: eventpipe %s succeeded:\n%s", c.name, c.args[0], out)
			continue
		}
		found := false
		for _, w := range c.want {
			found = found || strings.Contains(out, w)
		}
		if !found {
			t.Errorf("%s: eventpipe %s failed without saying why (want one of %q):\n%s", c.name, c.args[0], c.want, out)
		}
		for _, secret := range []string{"not-the-password"} {
			if strings.Contains(out, secret) {
				t.Errorf("%s: the output shows a secret:\n%s", c.name, out)
			}
		}
	}
}
