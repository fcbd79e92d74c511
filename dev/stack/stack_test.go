package stack_test

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/stack"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/dev/testservers"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/internal/dynamoclient"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
)

func TestMain(m *testing.M) {
	testservers.RunChildIfRequested()
	os.Exit(m.Run())
}

// newThrowawayStack returns a stack in a temporary folder on free ports,
// sharing the main stack's downloaded tools, whose Kafka broker,
// Elasticsearch-API server and KMS are this test binary run as a child.
func newThrowawayStack(t *testing.T, out *bytes.Buffer) *stack.Stack {
	t.Helper()
	s, _ := newThrowawayStackWith(t, out, nil)
	return s
}

// newThrowawayStackWith is newThrowawayStack with mod applied to the
// config; it returns the config too, to build a second Stack on it.
func newThrowawayStackWith(t *testing.T, out *bytes.Buffer, mod func(*stack.Config)) (*stack.Stack, stack.Config) {
	t.Helper()
	dir := t.TempDir()
	// The postgres user must be able to reach its data folder.
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	port := func() string { return strconv.Itoa(testenv.FreePort(t)) }
	ep := endpoints.Default()
	ep.DynamoDB = "http://127.0.0.1:" + port()
	ep.KafkaBrokers = []string{"127.0.0.1:" + port()}
	ep.Postgres = "postgres://eventpipe@127.0.0.1:" + port() + "/eventpipe?sslmode=disable"
	ep.Elasticsearch = "http://127.0.0.1:" + port()
	ep.KMS = "http://127.0.0.1:" + port()
	cmd, env := testservers.KafkaBrokerCommand()
	esCmd, esEnv := testservers.ESServerCommand()
	kmsCmd, kmsEnv := testservers.KMSServerCommand()
	main := endpoints.FromEnv().StackDir
	if !filepath.IsAbs(main) {
		main = filepath.Join(stack.RepoRoot(), main)
	}
	cfg := stack.Config{
		Dir:                dir,
		ToolsDir:           filepath.Join(main, "tools"),
		Endpoints:          ep,
		KafkaBrokerCommand: cmd,
		KafkaBrokerEnv:     env,
		ESServerCommand:    esCmd,
		ESServerEnv:        esEnv,
		KMSServerCommand:   kmsCmd,
		KMSServerEnv:       kmsEnv,
		Out:                out,
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := stack.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Down(context.Background()) })
	return s, cfg
}

func pids(t *testing.T, s *stack.Stack) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, st := range s.Status(context.Background()) {
		out[st.Name] = st.PID
		if st.PID != 0 && !st.Healthy {
			t.Errorf("%s runs as pid %d but is unhealthy: %s", st.Name, st.PID, st.Detail)
		}
	}
	return out
}

// TestUpIsIdempotentAndDownUpKeepsData starts a throwaway stack, checks a
// second Up changes nothing, writes to DynamoDB, Kafka and Postgres, stops
// the stack, starts it again and reads everything back.
func TestUpIsIdempotentAndDownUpKeepsData(t *testing.T) {
	testenv.Integration(t)
	ctx := context.Background()
	var out bytes.Buffer
	s := newThrowawayStack(t, &out)
	if err := s.Up(ctx); err != nil {
		t.Fatalf("first up: %v\n%s", err, out.String())
	}
	first := pids(t, s)
	for _, name := range []string{"dynamodb", "kafka", "postgres", "elasticsearch", "kms"} {
		if first[name] == 0 {
			t.Fatalf("%s has no process after up:\n%s", name, out.String())
		}
	}

	out.Reset()
	if err := s.Up(ctx); err != nil {
		t.Fatalf("second up: %v", err)
	}
	if n := strings.Count(out.String(), "already running"); n != 5 || strings.Contains(out.String(), "started at") {
		t.Fatalf("second up was not a no-op:\n%s", out.String())
	}
	if second := pids(t, s); !maps.Equal(first, second) {
		t.Fatalf("second up changed processes: %v -> %v", first, second)
	}

	// Postgres serves TLS in plain mode too: the TLS-only test role
	// answers over verify-full and nowhere else.
	checkPostgresTLSRole(t, s)

	// DynamoDB Local's stream tables got the indexes that keep writes fast.
	indexes, err := exec.Command("sqlite3", filepath.Join(s.Dir(), "data", "dynamodb", "shared-local-instance.db"), ".indexes").CombinedOutput()
	if err != nil {
		t.Errorf("list DynamoDB Local's indexes: %s %v", indexes, err)
	}
	for _, name := range []string{"eventpipe_us_stream_shard_seq", "eventpipe_us_shard_seq", "eventpipe_us_stream_seq", "eventpipe_sm_table", "eventpipe_ss_stream"} {
		if !strings.Contains(string(indexes), name) {
			t.Errorf("DynamoDB Local's database lacks the index %s: %s", name, indexes)
		}
	}

	// Write something into each service.
	ep := s.Endpoints()
	db, err := dynamoclient.New(ctx, dynamoclient.Config{Endpoint: ep.DynamoDB})
	if err != nil {
		t.Fatal(err)
	}
	table := aws.String("kept")
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            table,
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
	}); err != nil {
		t.Fatal(err)
	}
	key := map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "k"}}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: map[string]ddbtypes.AttributeValue{
		"pk": key["pk"], "v": &ddbtypes.AttributeValueMemberS{Value: "survives"},
	}}); err != nil {
		t.Fatal(err)
	}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: ep.KafkaBrokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"one", "two"} {
		if err := pub.Publish("kept", message.NewMessage(watermill.NewULID(), []byte(body))); err != nil {
			t.Fatal(err)
		}
	}
	_ = pub.Close()
	testenv.Consume(t, ep.KafkaBrokers, "kept-group", "kept", 1)
	committed := testenv.CommittedOffsets(t, ep.KafkaBrokers, "kept-group", "kept")
	pg, err := pgx.Connect(ctx, ep.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pg.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('survives')"); err != nil {
		t.Fatal(err)
	}
	pg.Close(ctx)
	es := esClient(t, ep.Elasticsearch)
	esDo(t, es, "PUT", "/kept/_doc/k?refresh=true", `{"v":"survives"}`, 201)

	out.Reset()
	if err := s.Down(ctx); err != nil {
		t.Fatalf("down: %v", err)
	}
	for name, pid := range pids(t, s) {
		if pid != 0 {
			t.Errorf("%s still runs as pid %d after down", name, pid)
		}
	}
	for _, st := range s.Status(ctx) {
		if st.Healthy {
			t.Errorf("%s still answers after down", st.Name)
		}
	}

	if err := s.Up(ctx); err != nil {
		t.Fatalf("up after down: %v\n%s", err, out.String())
	}
	got, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatalf("dynamodb after restart: %v", err)
	}
	if v, _ := got.Item["v"].(*ddbtypes.AttributeValueMemberS); v == nil || v.Value != "survives" {
		t.Fatalf("dynamodb item after restart = %v", got.Item)
	}
	if after := testenv.CommittedOffsets(t, ep.KafkaBrokers, "kept-group", "kept"); !maps.Equal(after, committed) {
		t.Fatalf("kafka committed offsets %v after restart, want %v", after, committed)
	}
	if msgs := testenv.Consume(t, ep.KafkaBrokers, "kept-audit", "kept", 2); len(msgs) != 2 {
		t.Fatalf("kafka holds %d messages after restart", len(msgs))
	}
	pg, err = pgx.Connect(ctx, ep.Postgres)
	if err != nil {
		t.Fatalf("postgres after restart: %v", err)
	}
	defer pg.Close(ctx)
	var v string
	if err := pg.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != "survives" {
		t.Fatalf("postgres row after restart = %q, %v", v, err)
	}
	if body := esDo(t, es, "GET", "/kept/_doc/k", "", 200); !strings.Contains(body, `"survives"`) {
		t.Fatalf("elasticsearch document after restart = %s", body)
	}
}

// esClient is a client of the stack's Elasticsearch API.
func esClient(t *testing.T, url string) *esclient.Client {
	t.Helper()
	es, err := esclient.NewClient(url, esclient.Security{})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// esDo sends one request and checks its status; it returns the body.
func esDo(t *testing.T, es *esclient.Client, method, path, body string, want int) string {
	t.Helper()
	req, err := http.NewRequest(method, path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := es.Perform(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, b)
	}
	return string(b)
}

// TestUpRefusesAPortHeldByAnotherProgram occupies the Kafka port with a
// plain TCP listener and expects a clear error naming the component, the
// address and the variable that moves it.
func TestUpRefusesAPortHeldByAnotherProgram(t *testing.T) {
	testenv.Integration(t)
	var out bytes.Buffer
	s := newThrowawayStack(t, &out)
	l, err := net.Listen("tcp", s.Endpoints().KafkaBrokers[0])
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	err = s.Up(context.Background())
	if err == nil {
		t.Fatal("up succeeded although the kafka port is taken")
	}
	for _, want := range []string{"kafka", s.Endpoints().KafkaBrokers[0], "in use", endpoints.EnvKafkaBrokers} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
