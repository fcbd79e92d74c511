package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/internal/dynamoclient"
	"github.com/eventpipe/eventpipe/internal/kmsclient"
	"github.com/eventpipe/eventpipe/internal/probe"
	migrations "github.com/eventpipe/eventpipe/migrations/dynamodb"
	"github.com/eventpipe/eventpipe/privacy"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
)

// ProbeTimeout bounds the check of one service. A missing service fails
// at once (connection refused); a busy one (DynamoDB Local under a full
// parallel test run) may take seconds to answer, which is no failure.
const ProbeTimeout = 30 * time.Second

// startHint is how a failure says to start the services.
const startHint = "start the local stack with `eventpipe stack up` (`make stack-up` in eventpipe's repository), or point %s at a running service"

// Mark marks tb as an integration test. Under `go test -short` (a unit
// tier that runs without services) it skips tb, saying why; otherwise it
// does nothing, and a service the test cannot reach fails it. Stack,
// Isolate and every service accessor call it; a test that needs the
// stack in another way (a child process of its own) calls it first.
func Mark(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("integration test: needs the local stack (`eventpipe stack up`); it runs without -short")
	}
}

// service is one service of the stack and its check.
type service struct {
	name, env, addr string
	check           func(context.Context) error
}

func services(ep endpoints.Endpoints) []service {
	return []service{
		{"DynamoDB", endpoints.EnvDynamoDB, ep.DynamoDB, func(ctx context.Context) error { return probe.DynamoDB(ctx, ep.DynamoDB) }},
		{"Kafka", endpoints.EnvKafkaBrokers, strings.Join(ep.KafkaBrokers, ","), func(ctx context.Context) error {
			return probe.Kafka(ctx, ep.KafkaBrokers, ep.Kafka)
		}},
		{"Postgres", endpoints.EnvPostgres, "", func(ctx context.Context) error { return probe.Postgres(ctx, ep.Postgres) }},
		{"Elasticsearch", endpoints.EnvElasticsearch, ep.Elasticsearch, func(ctx context.Context) error {
			return probe.Elasticsearch(ctx, ep.Elasticsearch, ep.ElasticsearchSecurity)
		}},
	}
}

// run runs s's check; the error says which service is not reachable
// and how to start it.
func (s service) run() error {
	ctx, cancel := context.WithTimeout(context.Background(), ProbeTimeout)
	defer cancel()
	err := s.check(ctx)
	if err == nil {
		return nil
	}
	at := ""
	if s.addr != "" {
		at = " at " + s.addr
	}
	return fmt.Errorf("%s is not reachable%s: %w\n"+startHint, s.name, at, err, s.env)
}

// endpointsFromEnv returns the environment's endpoints, failing tb when
// their security settings cannot be read.
func endpointsFromEnv(tb testing.TB) endpoints.Endpoints {
	tb.Helper()
	ep := endpoints.FromEnv()
	if err := ep.Err(); err != nil {
		tb.Fatalf("the endpoints of the environment: %v", err)
	}
	return ep
}

// need checks the service of services(ep) called name, failing tb.
func need(tb testing.TB, ep endpoints.Endpoints, name string) {
	tb.Helper()
	for _, s := range services(ep) {
		if s.name == name {
			if err := s.run(); err != nil {
				tb.Fatalf("%v", err)
			}
			return
		}
	}
	panic("integration: no service " + name)
}

// Stack checks that DynamoDB, Kafka, Postgres and Elasticsearch all
// answer at the addresses of the environment and returns those
// endpoints (eventpipe.EndpointsFromEnv()). It fails tb naming every
// service that does not answer, with how to start the stack; under
// -short it skips tb (Mark).
func Stack(tb testing.TB) endpoints.Endpoints {
	tb.Helper()
	Mark(tb)
	ep := endpointsFromEnv(tb)
	var errs []error
	for _, s := range services(ep) {
		if err := s.run(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		tb.Fatalf("%v", errors.Join(errs...))
	}
	return ep
}

// DynamoDB returns a client of the environment's DynamoDB after a
// ListTables check; it fails tb when DynamoDB does not answer.
func DynamoDB(tb testing.TB) *dynamodb.Client {
	tb.Helper()
	Mark(tb)
	ep := endpointsFromEnv(tb)
	need(tb, ep, "DynamoDB")
	return dynamoClient(tb, ep)
}

// dynamoClient returns a client of ep's DynamoDB, failing tb.
func dynamoClient(tb testing.TB, ep endpoints.Endpoints) *dynamodb.Client {
	tb.Helper()
	client, err := dynamoclient.New(context.Background(), dynamoclient.Config{Endpoint: ep.DynamoDB})
	if err != nil {
		tb.Fatalf("dynamodb client of %s: %v", ep.DynamoDB, err)
	}
	return client
}

// KafkaBrokers returns the environment's seed brokers after a Metadata
// check; it fails tb when no broker answers.
func KafkaBrokers(tb testing.TB) []string {
	tb.Helper()
	Mark(tb)
	ep := endpointsFromEnv(tb)
	need(tb, ep, "Kafka")
	return ep.KafkaBrokers
}

// Postgres returns a pool on the environment's Postgres, closed when tb
// ends; it fails tb when Postgres does not answer SELECT 1.
func Postgres(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	Mark(tb)
	ep := endpointsFromEnv(tb)
	need(tb, ep, "Postgres")
	pool, err := pgxpool.New(context.Background(), ep.Postgres)
	if err != nil {
		tb.Fatalf("postgres pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// KMS returns a client of the environment's KMS (the stack's local one,
// or the one EVENTPIPE_KMS_ENDPOINT names) after a ListKeys check; it
// fails tb when the KMS does not answer. Stack does not check the KMS:
// only the tests of personal data need it.
func KMS(tb testing.TB) *kms.Client {
	tb.Helper()
	Mark(tb)
	ep := endpointsFromEnv(tb)
	s := service{"KMS", endpoints.EnvKMS, ep.KMS, func(ctx context.Context) error { return probe.KMS(ctx, ep.KMS) }}
	if err := s.run(); err != nil {
		tb.Fatalf("%v", err)
	}
	client, err := kmsclient.New(context.Background(), ep.KMSClient())
	if err != nil {
		tb.Fatalf("kms client of %s: %v", ep.KMS, err)
	}
	return client
}

// Elasticsearch returns a client of the environment's Elasticsearch (the
// stack's Elasticsearch-API server, or the one ELASTICSEARCH_URL names);
// it fails tb when nothing answers.
func Elasticsearch(tb testing.TB) *esclient.Client {
	tb.Helper()
	Mark(tb)
	ep := endpointsFromEnv(tb)
	need(tb, ep, "Elasticsearch")
	es, err := esclient.NewClient(ep.Elasticsearch, ep.ElasticsearchSecurity)
	if err != nil {
		tb.Fatalf("elasticsearch client of %s: %v", ep.Elasticsearch, err)
	}
	return es
}

// KeyStore returns a data subjects' key store (package privacy) on a
// keys table of tb's own on the environment's DynamoDB, deleted when tb
// ends, with a KMS key of tb's own on the environment's KMS. Its tests
// can forget subjects without touching anyone else's keys.
func KeyStore(tb testing.TB) *privacy.KeyStore {
	tb.Helper()
	ctx := context.Background()
	db := DynamoDB(tb)
	table := UniqueName(tb, "keys")
	if err := migrations.CreateSubjectKeysTable(ctx, db, table); err != nil {
		tb.Fatalf("create the keys table %s: %v", table, err)
	}
	tb.Cleanup(func() { DeleteTable(tb, db, table) })
	k := KMS(tb)
	key, err := k.CreateKey(ctx, &kms.CreateKeyInput{Description: aws.String(tb.Name())})
	if err != nil {
		tb.Fatalf("create a KMS key: %v", err)
	}
	keys, err := privacy.NewKeyStore(privacy.KeyStoreConfig{DB: db, Table: table, KMS: privacy.AWSKMS{Client: k}, KeyID: aws.ToString(key.KeyMetadata.Arn)})
	if err != nil {
		tb.Fatal(err)
	}
	return keys
}
