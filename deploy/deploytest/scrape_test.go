package deploytest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jackc/pgx/v5"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
)

// The running pipeline: eventpipe's binary, built from this checkout,
// runs serve, a relay and consume --all against the local stack (the
// services `eventpipe stack env` names, as for the main module's tests)
// in a namespace of their own, so that the alerts and the dashboard can
// be checked against what the processes really export. It starts at the
// first test that asks (scraped) and stops when the test binary ends.

// envHangAfter bounds every wait of this package, as the main module's
// integration.HangAfter does: only a real hang reaches it.
const envHangAfter = "EVENTPIPE_TEST_HANG_AFTER"

func hangAfter() time.Duration {
	if d, err := time.ParseDuration(os.Getenv(envHangAfter)); err == nil && d > 0 {
		return d
	}
	return 3 * time.Minute
}

func TestMain(m *testing.M) {
	code := m.Run()
	pipelineStop()
	os.Exit(code)
}

// process is one eventpipe child: its name, its probes' address and its
// output.
type process struct {
	name, probes string
	cmd          *exec.Cmd
	out          *syncBuffer
	done         chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// pipeline is the running pipeline (nil before the first scraped call).
var pipeline struct {
	once    sync.Once
	err     error
	bin     string
	procs   []*process
	env     []string
	apiAddr string
	cleanup []func()
}

// built is eventpipe's binary, built once from this checkout.
var built struct {
	once sync.Once
	bin  string
	err  error
}

// buildBinary builds eventpipe's binary once per test binary.
func buildBinary() (string, error) {
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "deploytest-")
		if err != nil {
			built.err = err
			return
		}
		root, err := filepath.Abs(moduleRoot)
		if err != nil {
			built.err = err
			return
		}
		bin := filepath.Join(dir, "eventpipe")
		build := exec.Command("go", "build", "-o", bin, "./cmd/eventpipe")
		build.Dir = root
		// Static, as make build, the image and the main module's tests
		// build it, so that all of them share one build cache.
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build ./cmd/eventpipe: %v\n%s", err, out)
			return
		}
		built.bin = bin
	})
	return built.bin, built.err
}

// binary is eventpipe's binary; a failed build fails t.
func binary(t *testing.T) string {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// scraped starts the pipeline once and returns its processes; a failure
// to start fails every test that needs it, saying why.
func scraped(t *testing.T) []*process {
	t.Helper()
	pipeline.once.Do(func() { pipeline.err = pipelineStart() })
	if pipeline.err != nil {
		t.Fatalf("the pipeline to scrape: %v", pipeline.err)
	}
	return pipeline.procs
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// pipelineStart builds the binary, isolates a namespace (tables, topics,
// a Postgres schema), migrates it and starts serve, relay and consume.
func pipelineStart() error {
	var err error
	if pipeline.bin, err = buildBinary(); err != nil {
		return err
	}

	var raw [4]byte
	_, _ = rand.Read(raw[:])
	ns := "deploytest" + hex.EncodeToString(raw[:])
	pgURL, err := isolatePostgres(ns)
	if err != nil {
		return err
	}
	apiAddr, err := freeAddr()
	if err != nil {
		return err
	}
	pipeline.apiAddr = apiAddr
	pipeline.env = append(os.Environ(),
		"EVENTPIPE_EVENTS_TABLE="+ns+"-events", "EVENTPIPE_LEASES_TABLE="+ns+"-leases", "EVENTPIPE_ANALYTICS_TABLE="+ns+"-analytics", "EVENTPIPE_KEYS_TABLE="+ns+"-keys",
		"EVENTPIPE_TOPIC_PREFIX="+ns+".", "EVENTPIPE_POSTGRES_URL="+pgURL, "EVENTPIPE_HTTP_ADDR="+apiAddr,
		"EVENTPIPE_LOG_LEVEL=warn", "OTEL_EXPORTER_OTLP_ENDPOINT=", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=")
	pipeline.cleanup = append(pipeline.cleanup, func() { deleteTables(ns) })

	ctx, cancel := context.WithTimeout(context.Background(), hangAfter())
	defer cancel()
	migrate := exec.CommandContext(ctx, pipeline.bin, "migrate", "--wait", "30s")
	migrate.Env = pipeline.env
	if out, err := migrate.CombinedOutput(); err != nil {
		return fmt.Errorf("eventpipe migrate (is the stack up? `eventpipe stack up`, then `eval \"$(eventpipe stack env)\"`): %v\n%s", err, out)
	}

	operator, err := freeAddr()
	if err != nil {
		return err
	}
	relayAddr, err := freeAddr()
	if err != nil {
		return err
	}
	consumeAddr, err := freeAddr()
	if err != nil {
		return err
	}
	for _, p := range []struct {
		name, probes string
		args         []string
	}{
		{"serve", operator, []string{"serve", "--no-auth", "--operator-addr", operator}},
		{"relay", relayAddr, []string{"relay", "--metrics-addr", relayAddr}},
		{"consume", consumeAddr, []string{"consume", "--all", "--metrics-addr", consumeAddr}},
	} {
		proc := &process{name: p.name, probes: p.probes, out: &syncBuffer{}, done: make(chan error, 1)}
		proc.cmd = exec.Command(pipeline.bin, p.args...)
		proc.cmd.Env = pipeline.env
		proc.cmd.Stdout, proc.cmd.Stderr = proc.out, proc.out
		if err := proc.cmd.Start(); err != nil {
			return fmt.Errorf("start %s: %w", p.name, err)
		}
		go func() { proc.done <- proc.cmd.Wait() }()
		pipeline.procs = append(pipeline.procs, proc)
	}
	for _, p := range pipeline.procs {
		if err := await("/readyz of "+p.name, func() error {
			if err := p.exited(); err != nil {
				return err
			}
			_, err := get(p.probes, "/readyz")
			return err
		}); err != nil {
			return err
		}
	}
	// Work through every hop: a todo created on serve reaches the events
	// table, the relay, Kafka and the consumers.
	body := strings.NewReader(`{"title":"scraped"}`)
	resp, err := http.Post("http://"+apiAddr+"/todo", "application/json", body)
	if err != nil {
		return fmt.Errorf("POST /todo: %w", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("POST /todo: %s %s", resp.Status, b)
	}
	return nil
}

// exited is the process's exit as an error with its output, nil while it
// runs.
func (p *process) exited() error {
	select {
	case err := <-p.done:
		p.done <- err
		return fmt.Errorf("%s exited (%v):\n%s", p.name, err, p.out.String())
	default:
		return nil
	}
}

// pipelineStop sends SIGTERM to each process, waits for it (kills it
// after its grace period), and removes the namespace.
func pipelineStop() {
	for _, p := range pipeline.procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range pipeline.procs {
		select {
		case <-p.done:
		case <-time.After(30 * time.Second): // the 25 s grace period, and a margin
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	for _, c := range slices.Backward(pipeline.cleanup) {
		c()
	}
	if built.bin != "" {
		os.RemoveAll(filepath.Dir(built.bin))
	}
}

// await calls check until it returns nil, failing after hangAfter with
// its last error.
func await(what string, check func() error) error {
	start := time.Now()
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Since(start) > hangAfter() {
			return fmt.Errorf("%s: still not done after %v (%s); last: %w", what, time.Since(start).Round(time.Second), envHangAfter, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// get answers GET http://addr+path's body, an error unless 200.
func get(addr, path string) ([]byte, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return b, fmt.Errorf("GET %s%s: %s %s", addr, path, resp.Status, b)
	}
	return b, nil
}

// scrape parses each process's /metrics and returns every series it
// exports (a histogram's as its _bucket, _sum and _count series), with
// the label process=<its name>.
func scrape(procs []*process) ([]labels.Labels, error) {
	var out []labels.Labels
	for _, p := range procs {
		b, err := get(p.probes, "/metrics")
		if err != nil {
			return nil, err
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			return nil, fmt.Errorf("%s /metrics: %w", p.name, err)
		}
		for name, f := range families {
			names := []string{name}
			if f.GetType() == dto.MetricType_HISTOGRAM {
				names = []string{name + "_bucket", name + "_sum", name + "_count"}
			}
			for _, m := range f.GetMetric() {
				b := labels.NewBuilder(labels.EmptyLabels())
				for _, l := range m.GetLabel() {
					b.Set(l.GetName(), l.GetValue())
				}
				b.Set("process", p.name)
				for _, n := range names {
					b.Set(model.MetricNameLabel, n)
					out = append(out, b.Labels())
				}
			}
		}
	}
	return out, nil
}

// matches reports whether some series matches every matcher.
func matches(series []labels.Labels, ms []*labels.Matcher) bool {
	for _, ls := range series {
		ok := true
		for _, m := range ms {
			if !m.Matches(ls.Get(m.Name)) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// awaitSeries scrapes the running pipeline until each selector of want
// matches at least one series, and fails naming those that match none.
func awaitSeries(t *testing.T, want *selectors) {
	t.Helper()
	procs := scraped(t)
	err := await("the series the alerts and the dashboard select", func() error {
		for _, p := range procs {
			if err := p.exited(); err != nil {
				return err
			}
		}
		series, err := scrape(procs)
		if err != nil {
			return err
		}
		var missing []string
		for _, sel := range slices.Sorted(maps.Keys(want.users)) {
			if !matches(series, want.matchers[sel]) {
				missing = append(missing, fmt.Sprintf("%s (used by %s)", sel, strings.Join(want.users[sel], ", ")))
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("no series of serve, relay or consume --all matches: %s", strings.Join(missing, "; "))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestProbesNameEveryDependency: on the running pipeline, each process's
// /readyz passed its dependencies' checks (consume --all: its groups
// formed, the events table, Postgres and Elasticsearch; the relay: its
// leases balanced; serve: its command groups and the events table) and
// /livez its loops' checks.
func TestProbesNameEveryDependency(t *testing.T) {
	want := map[string]map[string][]string{
		"/readyz": {
			"serve":   {"draining", "dynamodb", "kafka-groups", "started"},
			"relay":   {"draining", "relay-leases", "started"},
			"consume": {"draining", "dynamodb", "elasticsearch", "kafka-groups", "postgres", "started"},
		},
		"/livez": {
			"serve":   {"command-router"},
			"relay":   {"loop"},
			"consume": {"running"},
		},
	}
	for _, p := range scraped(t) {
		for _, path := range []string{"/readyz", "/livez"} {
			b, err := get(p.probes, path)
			if err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
			var r struct {
				Status string   `json:"status"`
				Passed []string `json:"passed"`
			}
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatalf("%s %s: %v: %s", p.name, path, err, b)
			}
			for _, c := range want[path][p.name] {
				if !slices.Contains(r.Passed, c) {
					t.Errorf("%s %s passed %v, want %s among them", p.name, path, r.Passed, c)
				}
			}
			t.Logf("%s %s: %s, passed %v", p.name, path, r.Status, r.Passed)
		}
	}
}

// isolatePostgres creates the schema ns in the stack's database and
// returns the URL whose search_path names it (dropped at the end).
func isolatePostgres(ns string) (string, error) {
	base := os.Getenv("EVENTPIPE_POSTGRES_URL")
	if base == "" {
		base = "postgres://eventpipe@127.0.0.1:5433/eventpipe?sslmode=disable" // eventpipe's default
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", fmt.Errorf("postgres (is the stack up? `eventpipe stack up`): %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{ns}.Sanitize()); err != nil {
		return "", fmt.Errorf("create schema %s: %w", ns, err)
	}
	pipeline.cleanup = append(pipeline.cleanup, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, base); err == nil {
			_, _ = conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{ns}.Sanitize()+" CASCADE")
			conn.Close(ctx)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("search_path", ns)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// deleteTables deletes the namespace's DynamoDB tables (DynamoDB Local
// takes any credentials).
func deleteTables(ns string) {
	endpoint := os.Getenv("EVENTPIPE_DYNAMODB_ENDPOINT")
	if endpoint == "" {
		endpoint = "http://127.0.0.1:8000"
	}
	if endpoint == "aws" {
		return // never on AWS: this test runs against the local stack
	}
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, t := range []string{"-events", "-leases", "-analytics", "-keys"} {
		if _, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(ns + t)}); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(os.Stderr, "deploytest: delete tables of %s: %v\n", ns, err)
	}
}
