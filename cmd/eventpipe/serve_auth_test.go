package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/httpapi/auth"
	"github.com/eventpipe/eventpipe/httpapi/auth/authtest"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestServeRefusesEveryBadTokenAndWritesNothing runs the real binary:
// `migrate`, then `serve` with JWT auth from the environment (a JWKS
// file, a policy granting alice everything) and its operator listener
// off loopback. A token of alice's works on every command route; then
// forged, expired, not-yet-valid, wrong-issuer, wrong-audience,
// unknown-key, "alg":"none", HS256-with-the-public-key, over-long and
// wrong-typ tokens each get 401 on every command route (todo create,
// update, delete, analytics ingestion, each with an Idempotency-Key),
// and the events table, the analytics table and every Postgres table of
// the schema are exactly as they were. The operator listener answers
// 401 without a token and 200 to a metrics grant.
func TestServeRefusesEveryBadTokenAndWritesNothing(t *testing.T) {
	testenv.Integration(t)
	bin := eventpipeBinary(t)
	ddb := testenv.DynamoDB(t)
	testenv.KafkaBrokers(t)
	events, leases, analytics := testenv.UniqueName(t, "events"), testenv.UniqueName(t, "leases"), testenv.UniqueName(t, "analytics")
	t.Cleanup(func() {
		testenv.DeleteTable(t, ddb, events)
		testenv.DeleteTable(t, ddb, leases)
		testenv.DeleteTable(t, ddb, analytics)
	})
	schema, pgURL := testenv.PostgresSchema(t, "authbb")
	const iss, aud = "https://idp.blackbox.test/", "eventpipe-blackbox"
	idp := authtest.New(t, iss, aud)
	dir := t.TempDir()
	jwks, policy := filepath.Join(dir, "jwks.json"), filepath.Join(dir, "policy.json")
	idp.WriteFile(t, jwks)
	if err := os.WriteFile(policy, []byte(`{"rules":[{"subjects":["alice"],"commands":["*"],"read":["*"],"write":["*"]},{"subjects":["prometheus"],"read":["metrics"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	httpAddr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	opPort := strconv.Itoa(testenv.FreePort(t))
	env := append(os.Environ(), "EVENTPIPE_EVENTS_TABLE="+events, "EVENTPIPE_LEASES_TABLE="+leases, "EVENTPIPE_ANALYTICS_TABLE="+analytics,
		"EVENTPIPE_TOPIC_PREFIX="+testenv.UniqueName(t, "ns")+".", "EVENTPIPE_HTTP_ADDR="+httpAddr, "EVENTPIPE_POSTGRES_URL="+pgURL,
		auth.EnvIssuer+"="+iss, auth.EnvAudience+"="+aud, auth.EnvJWKSFile+"="+jwks, auth.EnvPolicyFile+"="+policy, auth.EnvJWKSURL+"=", auth.EnvLeeway+"=", auth.EnvMaxLifetime+"=", auth.EnvAuth+"=")
	migrate := exec.Command(bin, "migrate")
	migrate.Env = env
	if out, err := runWatched(t, migrate); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}

	serve := exec.Command(bin, "serve", "--group", testenv.UniqueName(t, "g"), "--operator-addr", "0.0.0.0:"+opPort)
	serve.Env = env
	out := &output{}
	serve.Stdout, serve.Stderr = out, out
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- serve.Wait() }()
	t.Cleanup(func() {
		_ = serve.Process.Signal(syscall.SIGTERM)
		if err := <-exited; err != nil {
			t.Logf("serve: %v\n%s", err, out)
		}
	})
	base, opBase := "http://"+httpAddr, "http://127.0.0.1:"+opPort
	do := func(method, url, token, idemKey, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if idemKey != "" {
			req.Header.Set("Idempotency-Key", idemKey)
		}
		if strings.HasPrefix(url, base+"/todo/") {
			req.Header.Set("If-Match", `"1"`)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return -1, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("WWW-Authenticate") + " " + string(b)
	}
	integration.Await(t, "serve answers /healthz on both listeners", func() error {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("serve exited: %v\n%s", err, out)
		default:
		}
		for _, u := range []string{base, opBase} {
			if code, _ := do("GET", u+"/healthz", "", "", ""); code != 200 {
				return fmt.Errorf("%s/healthz: %d", u, code)
			}
		}
		return nil
	})
	if !strings.Contains(out.String(), "operator listener behind JWT authentication") {
		t.Errorf("serve did not say its operator listener is behind authentication:\n%s", out)
	}

	alice := func(c authtest.Claims) string {
		c.Subject = "alice"
		return idp.Sign(t, authtest.ES256, c)
	}
	// The routes work with a good token (so a 401 below is the token's).
	if code, body := do("POST", base+"/todo", alice(authtest.Claims{}), "", `{"id":"t1","title":"kept"}`); code != 201 {
		t.Fatalf("create with a good token: %d %s", code, body)
	}
	if code, body := do("POST", base+"/sources/bb-site/events", alice(authtest.Claims{}), "", `{"events":[{"type":"page_view","sessionId":"s1","url":"/"}]}`); code >= 300 {
		t.Fatalf("ingest with a good token: %d %s", code, body)
	}

	count := func(table string) int32 {
		o, err := ddb.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table), Select: "COUNT", ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return o.Count
	}
	pg, err := pgx.Connect(context.Background(), pgURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Close(context.Background()) })
	tables := func() string {
		rows, err := pg.Query(context.Background(), `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 AND table_type = 'BASE TABLE' ORDER BY table_name`, schema)
		if err != nil {
			t.Fatal(err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "events %d, analytics %d", count(events), count(analytics))
		for _, n := range names {
			var rowCount int64
			if err := pg.QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{schema, n}.Sanitize()).Scan(&rowCount); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, ", %s %d", n, rowCount)
		}
		return b.String()
	}
	before := tables()
	if !strings.Contains(before, "eventpipe_schema_version") {
		t.Fatalf("the schema %s holds no tables: %s", schema, before)
	}

	now := time.Now()
	good := alice(authtest.Claims{})
	sig := good[strings.LastIndexByte(good, '.')+1:]
	flipped := "A"
	if sig[0] == 'A' {
		flipped = "B"
	}
	other := authtest.New(t, iss, aud) // the same kids, other keys
	stranger := authtest.New(t, iss, aud)
	stranger.Rotate(t, authtest.EdDSA) // a kid the JWKS does not hold
	bad := map[string]string{
		"forged (other key, same kid)": other.Sign(t, authtest.ES256, authtest.Claims{Subject: "alice"}),
		"tampered signature":           good[:len(good)-len(sig)] + flipped + sig[1:],
		"expired":                      alice(authtest.Claims{IssuedAt: now.Add(-2 * time.Hour), Expires: now.Add(-time.Hour)}),
		"not yet valid":                alice(authtest.Claims{NotBefore: now.Add(time.Hour), Expires: now.Add(2 * time.Hour)}),
		"wrong issuer":                 alice(authtest.Claims{Issuer: "https://evil.test/"}),
		"wrong audience":               alice(authtest.Claims{Audience: "another-api"}),
		"unknown key":                  stranger.Sign(t, authtest.EdDSA, authtest.Claims{Subject: "alice"}),
		"alg none":                     idp.ForgeNone(t, authtest.RS256, authtest.Claims{Subject: "alice"}),
		"HS256 with the public key":    idp.ForgeHS256(t, authtest.Claims{Subject: "alice"}),
		"over-long lifetime":           alice(authtest.Claims{Expires: now.Add(48 * time.Hour)}),
		"wrong typ":                    alice(authtest.Claims{Type: "secevent+jwt"}),
	}
	routes := []struct{ method, path, body string }{
		{"POST", "/todo", `{"id":"bad-1","title":"x"}`},
		{"POST", "/todo/t1", `{"title":"x"}`},
		{"PUT", "/todo/t1", `{"title":"x"}`},
		{"DELETE", "/todo/t1", ""},
		{"POST", "/sources/bb-site/events", `{"events":[{"type":"page_view","sessionId":"s9","url":"/x"}]}`},
	}
	n := 0
	for name, tok := range bad {
		for _, r := range routes {
			n++
			code, body := do(r.method, base+r.path, tok, "bb-key-"+strconv.Itoa(n), r.body)
			if code != 401 || !strings.Contains(body, `error="invalid_token"`) {
				t.Errorf("%s: %s %s → %d %s; want 401 invalid_token", name, r.method, r.path, code, body)
			}
		}
	}
	if after := tables(); after != before {
		t.Errorf("bad tokens changed the tables:\nbefore %s\nafter  %s", before, after)
	}

	// The operator listener, off loopback, is behind the same auth.
	if code, _ := do("GET", opBase+"/metrics", "", "", ""); code != 401 {
		t.Errorf("GET /metrics on the operator listener without a token: %d, want 401", code)
	}
	if code, _ := do("GET", opBase+"/metrics", idp.Sign(t, authtest.RS256, authtest.Claims{Subject: "prometheus"}), "", ""); code != 200 {
		t.Errorf("GET /metrics on the operator listener with a metrics grant: %d, want 200", code)
	}
}

// TestServeRefusesAnOpenOperatorListenerOffLoopback: `serve --no-auth`
// with --operator-addr off loopback does not start, and says why;
// --operator-insecure is the explicit way round.
func TestServeRefusesAnOpenOperatorListenerOffLoopback(t *testing.T) {
	bin := eventpipeBinary(t)
	cmd := exec.Command(bin, "serve", "--no-auth", "--operator-addr", "0.0.0.0:"+strconv.Itoa(testenv.FreePort(t)))
	cmd.Env = append(os.Environ(), "EVENTPIPE_HTTP_ADDR=127.0.0.1:"+strconv.Itoa(testenv.FreePort(t)),
		auth.EnvIssuer+"=", auth.EnvAudience+"=", auth.EnvJWKSFile+"=", auth.EnvJWKSURL+"=", auth.EnvPolicyFile+"=", auth.EnvLeeway+"=", auth.EnvMaxLifetime+"=")
	out, err := runWatched(t, cmd)
	if err == nil {
		t.Fatalf("serve started with an open operator listener off loopback:\n%s", out)
	}
	if !strings.Contains(out, "not a loopback address") || !strings.Contains(out, "--operator-insecure") {
		t.Fatalf("serve refused without saying why:\n%s", out)
	}
}
