package aggregator_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/analytics/aggregator"
	"github.com/eventpipe/eventpipe/analytics/analyticsbus"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/internal/dynamoclient"
	migrations "github.com/eventpipe/eventpipe/migrations/dynamodb"
)

func TestMain(m *testing.M) {
	runChildIfRequested()
	os.Exit(m.Run())
}

const envAggregatorChild = "EVENTPIPE_TEST_AGGREGATOR_CHILD"

// childConfig is the consumer a test runs, in process or as a child.
func childConfig(db aggregator.API, brokers []string, table, prefix string, poison message.Publisher) aggregator.Config {
	return aggregator.Config{
		Kafka: kafka.SubscriberConfig{
			Brokers: brokers, SessionTimeout: 6 * time.Second, HeartbeatInterval: time.Second,
			RebalanceTimeout: 5 * time.Second, Logger: watermill.NopLogger{},
		},
		Topics: bus.Topics{Prefix: prefix}, Client: db, Table: table,
		BatchSize: 100, DiscoveryInterval: 500 * time.Millisecond, Poison: poison,
	}
}

// runChildIfRequested runs the aggregation consumer in this process when
// a test started it as a child, from the environment (analytics table,
// topic prefix, brokers), until SIGTERM or SIGKILL.
func runChildIfRequested() {
	if os.Getenv(envAggregatorChild) == "" {
		return
	}
	slog.SetLogLoggerLevel(slog.LevelWarn)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := func() error {
		ep := endpoints.FromEnv()
		db, err := dynamoclient.New(ctx, dynamoclient.Config{Endpoint: ep.DynamoDB})
		if err != nil {
			return err
		}
		pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: ep.KafkaBrokers, Logger: watermill.NopLogger{}})
		if err != nil {
			return err
		}
		defer pub.Close()
		cfg := childConfig(db, ep.KafkaBrokers, ep.AnalyticsTable, ep.TopicPrefix, pub)
		cfg.Kafka.InstanceID = ep.KafkaInstanceID
		c, err := aggregator.New(cfg)
		if err != nil {
			return err
		}
		return c.Run(ctx)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "aggregator child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// world is a fresh analytics table and a unique topic prefix.
type world struct {
	t       testing.TB
	db      *ddb.Client
	table   string
	store   *analytics.Store
	topics  bus.Topics
	brokers []string
}

func newWorld(t testing.TB) *world {
	t.Helper()
	db := testenv.DynamoDB(t)
	table := testenv.UniqueName(t, "analytics")
	if err := migrations.CreateAnalyticsTable(context.Background(), db, table); err != nil {
		t.Fatalf("create table: %v", err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, db, table) })
	st, err := analytics.New(analytics.Config{Client: db, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	return &world{t: t, db: db, table: table, store: st, topics: bus.Topics{Prefix: testenv.UniqueName(t, "agg") + "."}, brokers: testenv.KafkaBrokers(t)}
}

// publish puts events on their source's topic, as the relay does.
func (w *world) publish(events []analytics.Event, extra ...*message.Message) {
	w.t.Helper()
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: w.brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		w.t.Fatal(err)
	}
	defer pub.Close()
	bySource := map[string][]*message.Message{}
	var order []string
	for _, e := range events {
		m, err := analyticsbus.Message(e)
		if err != nil {
			w.t.Fatal(err)
		}
		if bySource[e.SourceID] == nil {
			order = append(order, e.SourceID)
		}
		bySource[e.SourceID] = append(bySource[e.SourceID], m)
	}
	for _, src := range order {
		msgs := bySource[src]
		if len(extra) > 0 {
			mid := len(msgs) / 2
			msgs = append(append(append([]*message.Message(nil), msgs[:mid]...), extra...), msgs[mid:]...)
		}
		for start := 0; start < len(msgs); start += 5000 {
			if err := pub.Publish(w.topics.Analytics(src), msgs[start:min(start+5000, len(msgs))]...); err != nil {
				w.t.Fatal(err)
			}
		}
	}
}

// eventsCounted sums the events of a source's daily aggregations.
func (w *world) eventsCounted(source string) int64 {
	w.t.Helper()
	var n int64
	p := ddb.NewQueryPaginator(w.db, &ddb.QueryInput{
		TableName:                 aws.String(w.table),
		KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: analytics.SourceKey(source)}, ":p": &types.AttributeValueMemberS{Value: "AGG#daily#"}},
		ProjectionExpression:      aws.String("events"),
		ConsistentRead:            aws.Bool(true),
	})
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		if err != nil {
			w.t.Fatal(err)
		}
		for _, it := range out.Items {
			if v, ok := it["events"].(*types.AttributeValueMemberN); ok {
				var x int64
				fmt.Sscan(v.Value, &x)
				n += x
			}
		}
	}
	return n
}
