package stack_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/certs"
	"github.com/eventpipe/eventpipe/dev/stack"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/testkit/integration"
	"github.com/eventpipe/eventpipe/tlsconfig"
)

// pgURL is the stack's Postgres with user, password and query replaced
// (password "" leaves it out).
func pgURL(t *testing.T, s *stack.Stack, user, password, query string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(s.Endpoints().Postgres)
	if err != nil {
		t.Fatal(err)
	}
	u := url.URL{Scheme: "postgres", User: url.User(user), Host: cfg.Host + ":" + strconv.Itoa(int(cfg.Port)), Path: "/" + cfg.Database, RawQuery: query}
	if password != "" {
		u.User = url.UserPassword(user, password)
	}
	return u.String()
}

// pgTry connects to raw and runs SELECT 1, within 10 s.
// pgTry connects and runs one query, waiting at most as long as a
// hang takes (integration.HangAfter).
func pgTry(raw string) error {
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	conn, err := pgx.Connect(ctx, raw)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var one int
	return conn.QueryRow(ctx, "SELECT 1").Scan(&one)
}

// timedOut reports whether err is a deadline or a network timeout:
// nobody answered, as opposed to a refusal.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

func otherCAFile(t *testing.T) string {
	t.Helper()
	ca, err := certs.NewCA("unknown CA")
	if err != nil {
		t.Fatal(err)
	}
	f, _, err := ca.WriteCA(t.TempDir(), "other-ca")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// checkPostgresTLSRole: the TLS-only role logs in over verify-full with
// its password and may create schemas and tables in the app database;
// without TLS, with a wrong password or against another CA it is refused.
func checkPostgresTLSRole(t *testing.T, s *stack.Stack) {
	t.Helper()
	files, err := stack.SecureMaterial(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	pw := readTrim(t, files.PostgresPassword)
	verify := "sslmode=verify-full&sslrootcert=" + url.QueryEscape(files.CA)
	good := pgURL(t, s, stack.PostgresTLSRole, pw, verify)
	if err := pgTry(good); err != nil {
		t.Fatalf("%s over verify-full: %v", stack.PostgresTLSRole, err)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS tls_role_check; CREATE TABLE tls_role_check.t (v int); INSERT INTO tls_role_check.t VALUES (1); CREATE TABLE public.tls_role_check (v int); DROP SCHEMA tls_role_check CASCADE; DROP TABLE public.tls_role_check"); err != nil {
		t.Errorf("%s cannot create schemas and tables in %s: %v", stack.PostgresTLSRole, s.Endpoints().Postgres, err)
	}
	conn.Close(ctx)
	for name, raw := range map[string]string{
		"without TLS":        pgURL(t, s, stack.PostgresTLSRole, pw, "sslmode=disable"),
		"wrong password":     pgURL(t, s, stack.PostgresTLSRole, "wrong", verify),
		"unknown CA":         pgURL(t, s, stack.PostgresTLSRole, pw, "sslmode=verify-full&sslrootcert="+url.QueryEscape(otherCAFile(t))),
		"no password at all": pgURL(t, s, stack.PostgresTLSRole, "", verify),
	} {
		err := pgTry(raw)
		switch {
		case err == nil:
			t.Errorf("%s %s: connected", stack.PostgresTLSRole, name)
		case timedOut(err):
			// Refused means the server said no, not that nobody answered.
			t.Errorf("%s %s: no refusal, only the client's timeout: %v", stack.PostgresTLSRole, name, err)
		case strings.Contains(err.Error(), pw):
			t.Errorf("%s %s: error carries the password", stack.PostgresTLSRole, name)
		}
	}
}

// TestSecureStack brings a throwaway stack up in secure mode and checks
// the material, each service's secured door and its refusals, `stack env`
// and that switching modes while it runs is refused.
func TestSecureStack(t *testing.T) {
	testenv.Integration(t)
	ctx := context.Background()
	var out bytes.Buffer
	s, cfg := newThrowawayStackWith(t, &out, func(c *stack.Config) { c.Secure = true })
	if err := s.Up(ctx); err != nil {
		t.Fatalf("secure up: %v\n%s", err, out.String())
	}
	for name, pid := range pids(t, s) {
		if pid == 0 {
			t.Errorf("%s has no process after a secure up:\n%s", name, out.String())
		}
	}
	if !s.Secure() || s.Mode() != "secure" {
		t.Fatalf("mode after a secure up: %s", s.Mode())
	}

	// The material: folder 0700, every file 0600.
	files, err := stack.SecureMaterial(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(files.Dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("%s: %v, mode %v, want 0700", files.Dir, err, st.Mode().Perm())
	}
	_ = filepath.WalkDir(files.Dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
				t.Errorf("%s has mode %v, want 0600", path, st.Mode().Perm())
			}
		}
		return nil
	})

	// `stack env`: every variable, with absolute paths of existing files
	// and no secret.
	lines, err := s.EnvLines()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, l := range lines {
		kv := strings.SplitN(strings.TrimPrefix(l, "export "), "=", 2)
		if _, dup := env[kv[0]]; dup {
			t.Errorf("stack env prints %s twice", kv[0])
		}
		env[kv[0]] = strings.Trim(kv[1], "'")
	}
	for _, name := range []string{"EVENTPIPE_POSTGRES_URL", "PGPASSFILE", "EVENTPIPE_KAFKA_TLS_CA_FILE", "EVENTPIPE_KAFKA_SASL_MECHANISM",
		"EVENTPIPE_KAFKA_SASL_USERNAME", "EVENTPIPE_KAFKA_SASL_PASSWORD_FILE", "ELASTICSEARCH_URL", "ELASTICSEARCH_TLS_CA_FILE", "ELASTICSEARCH_API_KEY_FILE",
		"EVENTPIPE_KAFKA_BROKERS", "EVENTPIPE_DYNAMODB_ENDPOINT"} {
		v, ok := env[name]
		if !ok {
			t.Errorf("stack env lacks %s:\n%s", name, strings.Join(lines, "\n"))
			continue
		}
		if strings.HasSuffix(name, "_FILE") || name == "PGPASSFILE" {
			if !filepath.IsAbs(v) {
				t.Errorf("%s=%s is not absolute", name, v)
			} else if _, err := os.Stat(v); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
	for _, secret := range []string{files.KafkaPassword, files.PostgresPassword, files.ESAPIKey} {
		if v := readTrim(t, secret); strings.Contains(strings.Join(lines, "\n"), v) {
			t.Errorf("stack env prints the content of %s", secret)
		}
	}
	_, port, _ := strings.Cut(strings.TrimPrefix(s.Endpoints().Elasticsearch, "http://"), ":")
	if got, want := env["ELASTICSEARCH_URL"], "https://127.0.0.1:"+port; got != want {
		t.Errorf("ELASTICSEARCH_URL=%s, want %s", got, want)
	}
	if env["EVENTPIPE_KAFKA_SASL_MECHANISM"] != "SCRAM-SHA-512" || env["EVENTPIPE_KAFKA_SASL_USERNAME"] != "eventpipe" {
		t.Errorf("kafka SASL exports: %v", env)
	}
	pgEnv := env["EVENTPIPE_POSTGRES_URL"]
	if !strings.Contains(pgEnv, "sslmode=verify-full") || !strings.Contains(pgEnv, "sslrootcert="+files.CA) {
		t.Errorf("EVENTPIPE_POSTGRES_URL=%s, want verify-full against %s", pgEnv, files.CA)
	}

	// Postgres: verify-full with the password of PGPASSFILE; refused
	// without TLS, with a wrong password, against another CA.
	t.Setenv("PGPASSFILE", env["PGPASSFILE"])
	if err := pgTry(pgEnv); err != nil {
		t.Fatalf("postgres over %s with PGPASSFILE: %v", pgEnv, err)
	}
	conn, err := pgx.Connect(ctx, pgEnv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE secured (v text); INSERT INTO secured VALUES ('x')"); err != nil {
		t.Fatal(err)
	}
	var ssl bool
	if err := conn.QueryRow(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl); err != nil || !ssl {
		t.Errorf("the connection is not TLS: %v %v", ssl, err)
	}
	conn.Close(ctx)
	pw := readTrim(t, files.PostgresPassword)
	t.Setenv("PGPASSFILE", filepath.Join(t.TempDir(), "none"))
	for name, raw := range map[string]string{
		"sslmode=disable with the password":  pgURL(t, s, "eventpipe", pw, "sslmode=disable"),
		"sslmode=disable without a password": s.Endpoints().Postgres,
		"wrong password":                     pgURL(t, s, "eventpipe", "wrong", "sslmode=verify-full&sslrootcert="+url.QueryEscape(files.CA)),
		"no password":                        pgURL(t, s, "eventpipe", "", "sslmode=verify-full&sslrootcert="+url.QueryEscape(files.CA)),
		"unknown CA":                         pgURL(t, s, "eventpipe", pw, "sslmode=verify-full&sslrootcert="+url.QueryEscape(otherCAFile(t))),
	} {
		if err := pgTry(raw); err == nil {
			t.Errorf("secure postgres accepted a connection %s", name)
		}
	}
	checkPostgresTLSRole(t, s)

	// Kafka: TLS and SCRAM-SHA-512 as `stack env` says; plain text fails.
	sec, err := kafka.SecurityFromEnv(func(name string) (string, bool) { v, ok := env[name]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	kctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	brokers := s.Endpoints().KafkaBrokers
	if err := kafka.Ping(kctx, kafka.Cluster{Brokers: brokers, Security: sec}); err != nil {
		t.Fatalf("ping the secured broker: %v", err)
	}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Security: sec, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish("secured", message.NewMessage(watermill.NewUUID(), []byte("hello"))); err != nil {
		t.Fatalf("produce to the secured broker: %v", err)
	}
	_ = pub.Close()
	for name, wrong := range map[string]kafka.Security{
		"plain text":   {},
		"wrong CA":     {TLS: tlsconfig.Config{CAFile: otherCAFile(t)}, SASL: sec.SASL},
		"bad password": {TLS: sec.TLS, SASL: kafka.SASL{Mechanism: sec.SASL.Mechanism, Username: sec.SASL.Username, Password: "wrong"}},
	} {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		if err := kafka.Ping(pctx, kafka.Cluster{Brokers: brokers, Security: wrong}); err == nil {
			t.Errorf("the secured broker answered a client with %s", name)
		}
		pcancel()
	}

	// Switching to plain mode while it runs is refused, clearly.
	plainCfg := cfg
	plainCfg.Secure = false
	plain, err := stack.New(plainCfg)
	if err != nil {
		t.Fatal(err)
	}
	if !plain.Secure() {
		t.Error("a Stack on a running secure stack's folder does not report secure mode")
	}
	err = plain.Up(ctx)
	if err == nil || !strings.Contains(err.Error(), "secure mode") || !strings.Contains(err.Error(), "stack down") {
		t.Fatalf("plain up on a running secure stack: %v, want a refusal naming the mode and `stack down`", err)
	}
	for _, st := range plain.Status(ctx) {
		if !st.Healthy {
			t.Errorf("status through a second Stack: %s unhealthy: %s", st.Name, st.Detail)
		}
	}
}
