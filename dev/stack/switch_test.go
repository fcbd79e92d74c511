package stack_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/stack"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/httpapi/auth"
	"github.com/eventpipe/eventpipe/internal/dynamoclient"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestSwitchModesKeepsData brings a throwaway stack up in plain mode,
// writes a DynamoDB item, Kafka records and a Postgres row, stops it,
// brings it up in secure mode on the same folder and reads everything
// back over the secured doors (TLS and SCRAM for Kafka, verify-full and
// the password for Postgres), writes more, and goes back to plain mode
// where everything written in both modes is there. The secured broker
// used to refuse every client ("invalid sasl") on a folder a plain broker
// had written, and Up timed out.
func TestSwitchModesKeepsData(t *testing.T) {
	testenv.Integration(t)
	ctx := context.Background()
	var out bytes.Buffer
	plain, cfg := newThrowawayStackWith(t, &out, nil)
	up := func(secure bool) *stack.Stack {
		t.Helper()
		c := cfg
		c.Secure = secure
		s, err := stack.New(c)
		if err != nil {
			t.Fatal(err)
		}
		out.Reset()
		began := time.Now()
		if err := s.Up(ctx); err != nil {
			t.Fatalf("up in %s mode: %v\n%s", s.Mode(), err, out.String())
		}
		if s.Secure() != secure {
			t.Fatalf("up asked for secure=%v runs in %s mode", secure, s.Mode())
		}
		t.Logf("up in %s mode in %v", s.Mode(), time.Since(began).Round(time.Millisecond))
		return s
	}
	down := func(s *stack.Stack) {
		t.Helper()
		if err := s.Down(ctx); err != nil {
			t.Fatalf("down from %s mode: %v", s.Mode(), err)
		}
	}
	if err := plain.Up(ctx); err != nil {
		t.Fatalf("first up: %v\n%s", err, out.String())
	}
	ep := plain.Endpoints()

	// Plain mode: write into DynamoDB, Kafka and Postgres.
	db, err := dynamoclient.New(ctx, dynamoclient.Config{Endpoint: ep.DynamoDB})
	if err != nil {
		t.Fatal(err)
	}
	table := aws.String("switched")
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            table,
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
	}); err != nil {
		t.Fatal(err)
	}
	putItem := func(pk, v string) {
		t.Helper()
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: pk}, "v": &ddbtypes.AttributeValueMemberS{Value: v},
		}}); err != nil {
			t.Fatalf("dynamodb put %s: %v", pk, err)
		}
	}
	checkItems := func(mode string, want map[string]string) {
		t.Helper()
		for pk, v := range want {
			got, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, ConsistentRead: aws.Bool(true),
				Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}}})
			if err != nil {
				t.Fatalf("dynamodb in %s mode: %v", mode, err)
			}
			if s, _ := got.Item["v"].(*ddbtypes.AttributeValueMemberS); s == nil || s.Value != v {
				t.Fatalf("dynamodb item %s in %s mode = %v, want v=%s", pk, mode, got.Item, v)
			}
		}
	}
	putItem("plain", "written in plain mode")
	publish(t, ep.KafkaBrokers, kafka.Security{}, "switched", "plain one", "plain two")
	pgExec(t, ep.Postgres, "CREATE TABLE switched (v text); INSERT INTO switched VALUES ('written in plain mode')")
	down(plain)

	// Secure mode on the same folder: the data is there through the
	// secured doors, plain text is refused, and the auth material and its
	// variables are there.
	secure := up(true)
	env := envMap(t, secure)
	sec, err := kafka.SecurityFromEnv(func(name string) (string, bool) { v, ok := env[name]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if got := readTopic(t, ep.KafkaBrokers, sec, "switched", 2); !slices.Equal(got, []string{"plain one", "plain two"}) {
		t.Fatalf("kafka in secure mode holds %q", got)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if err := kafka.Ping(pctx, kafka.Cluster{Brokers: ep.KafkaBrokers}); err == nil {
		t.Error("the secured broker answers plain text")
	}
	cancel()
	t.Setenv("PGPASSFILE", env["PGPASSFILE"])
	if got := pgRows(t, env["EVENTPIPE_POSTGRES_URL"]); !slices.Equal(got, []string{"written in plain mode"}) {
		t.Fatalf("postgres in secure mode holds %q", got)
	}
	if err := pgTry(ep.Postgres); err == nil {
		t.Error("the secured Postgres accepts the plain URL")
	}
	checkItems("secure", map[string]string{"plain": "written in plain mode"})
	for _, name := range []string{auth.EnvIssuer, auth.EnvAudience, auth.EnvJWKSFile, auth.EnvPolicyFile} {
		if env[name] == "" {
			t.Errorf("stack env in secure mode lacks %s", name)
		}
	}
	for _, name := range []string{auth.EnvIssuer, auth.EnvAudience, auth.EnvJWKSFile, auth.EnvPolicyFile} {
		t.Setenv(name, env[name])
	}
	if cfg, err := auth.ConfigFromEnv(); err != nil || cfg == nil {
		t.Errorf("the auth variables of stack env do not configure serve: %v", err)
	}
	putItem("secure", "written in secure mode")
	publish(t, ep.KafkaBrokers, sec, "switched", "secure three")
	pgExec(t, env["EVENTPIPE_POSTGRES_URL"], "INSERT INTO switched VALUES ('written in secure mode')")
	down(secure)

	// Back to plain mode: everything written in both modes, over plain
	// text; stack env unsets what only secure mode sets.
	again := up(false)
	if got := readTopic(t, ep.KafkaBrokers, kafka.Security{}, "switched", 3); !slices.Equal(got, []string{"plain one", "plain two", "secure three"}) {
		t.Fatalf("kafka back in plain mode holds %q", got)
	}
	if got := pgRows(t, ep.Postgres); !slices.Equal(got, []string{"written in plain mode", "written in secure mode"}) {
		t.Fatalf("postgres back in plain mode holds %q", got)
	}
	checkItems("plain", map[string]string{"plain": "written in plain mode", "secure": "written in secure mode"})
	lines, err := again.EnvLines()
	if err != nil {
		t.Fatal(err)
	}
	last := lines[len(lines)-1]
	for _, name := range []string{"EVENTPIPE_KAFKA_SASL_MECHANISM", "PGPASSFILE", auth.EnvJWKSFile, auth.EnvPolicyFile} {
		if !strings.HasPrefix(last, "unset ") || !slices.Contains(strings.Fields(last), name) {
			t.Errorf("stack env in plain mode does not unset %s; last line %q", name, last)
		}
	}
}

// envMap is `stack env` of s as a map (export lines only).
func envMap(t *testing.T, s *stack.Stack) map[string]string {
	t.Helper()
	lines, err := s.EnvLines()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, l := range lines {
		if kv, ok := strings.CutPrefix(l, "export "); ok {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = strings.Trim(v, "'")
		}
	}
	return env
}

// publish writes bodies to topic.
func publish(t *testing.T, brokers []string, sec kafka.Security, topic string, bodies ...string) {
	t.Helper()
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Security: sec, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	for _, body := range bodies {
		if err := pub.Publish(topic, message.NewMessage(watermill.NewULID(), []byte(body))); err != nil {
			t.Fatalf("publish %q: %v", body, err)
		}
	}
}

// readTopic reads n records of topic from the start as a new group and
// returns their bodies sorted; it fails when they do not come within
// integration.HangAfter.
func readTopic(t *testing.T, brokers []string, sec kafka.Security, topic string, n int) []string {
	t.Helper()
	sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{Brokers: brokers, Security: sec, Logger: watermill.NopLogger{},
		ConsumerGroup: "read-" + watermill.NewShortUUID()})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := sub.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < n {
		select {
		case m := <-ch:
			got = append(got, string(m.Payload))
			m.Ack()
		case <-time.After(integration.HangAfter()):
			t.Fatalf("read %d of %d records of %s, then none for %v", len(got), n, topic, integration.HangAfter())
		}
	}
	slices.Sort(got)
	return got
}

func pgExec(t *testing.T, url, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("postgres: %v", err)
	}
}

// pgRows returns table switched's values, sorted.
func pgRows(t *testing.T, url string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("postgres at %s: %v", url, err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SELECT v FROM switched ORDER BY v")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return got
}
