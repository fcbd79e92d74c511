// Package testenv gives integration tests real connections to the stack's
// services, at the addresses internal/endpoints resolves. A service that
// cannot be reached fails the test at once with a message saying how to
// start it: integration tests never skip silently.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/eventpipe/eventpipe/projections/elastic/esclient"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/elastic/go-elasticsearch/v8"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/internal/dynamoclient"
	"github.com/eventpipe/eventpipe/internal/endpoints"
	"github.com/eventpipe/eventpipe/internal/probe"
)

// probeTimeout bounds a service check. A missing service fails at once
// (connection refused); a busy one (DynamoDB Local under a full parallel
// test run) may take seconds to answer, which is not a failure.
const probeTimeout = 30 * time.Second

// probeContext is the context of a service check.
func probeContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), probeTimeout)
}

const startHint = "start the local stack with `make stack-up` (or `go run ./cmd/eventpipe stack up`), or point %s at a running service"

// Endpoints returns the endpoints from the environment.
func Endpoints() endpoints.Endpoints { return endpoints.FromEnv() }

// DynamoDB returns a client for the configured DynamoDB endpoint after a
// ListTables probe; it fails tb when the endpoint is unreachable.
func DynamoDB(tb testing.TB) *dynamodb.Client {
	tb.Helper()
	ep := Endpoints().DynamoDB
	ctx, cancel := probeContext()
	defer cancel()
	if err := probe.DynamoDB(ctx, ep); err != nil {
		tb.Fatalf("DynamoDB is not reachable at %s: %v\n"+startHint, ep, err, endpoints.EnvDynamoDB)
	}
	client, err := dynamoclient.New(context.Background(), dynamoclient.Config{Endpoint: ep})
	if err != nil {
		tb.Fatalf("dynamodb client: %v", err)
	}
	return client
}

// DynamoDBStreams returns a DynamoDB Streams client for the configured
// endpoint; it fails tb when DynamoDB is unreachable.
func DynamoDBStreams(tb testing.TB) *dynamodbstreams.Client {
	tb.Helper()
	DynamoDB(tb)
	client, err := dynamoclient.NewStreams(context.Background(), dynamoclient.Config{Endpoint: Endpoints().DynamoDB})
	if err != nil {
		tb.Fatalf("dynamodb streams client: %v", err)
	}
	return client
}

// KafkaBrokers returns the configured seed brokers after a Metadata probe;
// it fails tb when no broker answers.
func KafkaBrokers(tb testing.TB) []string {
	tb.Helper()
	brokers := Endpoints().KafkaBrokers
	ctx, cancel := probeContext()
	defer cancel()
	if err := probe.Kafka(ctx, brokers, kafka.Security{}); err != nil {
		tb.Fatalf("Kafka is not reachable at %v: %v\n"+startHint, brokers, err, endpoints.EnvKafkaBrokers)
	}
	return brokers
}

// Postgres returns a pool on the configured database, closed when tb ends;
// it fails tb when Postgres is unreachable.
func Postgres(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	url := Endpoints().Postgres
	ctx, cancel := probeContext()
	defer cancel()
	if err := probe.Postgres(ctx, url); err != nil {
		tb.Fatalf("Postgres is not reachable: %v\n"+startHint, err, endpoints.EnvPostgres)
	}
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		tb.Fatalf("postgres pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// Elasticsearch returns a go-elasticsearch client of the configured
// Elasticsearch (the stack's Elasticsearch-API server, or a real one named
// by ELASTICSEARCH_URL); it fails tb when nothing answers.
func Elasticsearch(tb testing.TB) *elasticsearch.Client {
	tb.Helper()
	ep := Endpoints()
	url := ep.Elasticsearch
	ctx, cancel := probeContext()
	defer cancel()
	if err := probe.Elasticsearch(ctx, url, ep.ElasticsearchSecurity); err != nil {
		tb.Fatalf("Elasticsearch is not reachable: %v\n"+startHint, err, endpoints.EnvElasticsearch)
	}
	es, err := esclient.NewClient(url, ep.ElasticsearchSecurity)
	if err != nil {
		tb.Fatalf("elasticsearch client: %v", err)
	}
	return es
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// maxNameLen bounds UniqueName's result: Postgres' identifier limit (63
// bytes; PostgresSchema lowercases the name into one), well within
// DynamoDB's table names and Kafka's topics and consumer groups.
const maxNameLen = 63

// UniqueName returns prefix-<test name>-<random> restricted to characters
// valid in DynamoDB table names, Kafka topics and consumer groups, so that
// tests sharing one stack never collide. It is at most 63 bytes (a
// Postgres identifier): a long test name is cut, never the prefix or the
// 8 hex digits of the random suffix, so two names from one test differ
// even where Postgres would truncate a longer one.
func UniqueName(tb testing.TB, prefix string) string {
	tb.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatalf("random name: %v", err)
	}
	suffix := "-" + hex.EncodeToString(b[:])
	prefix = unsafeName.ReplaceAllString(prefix, "-")
	name := unsafeName.ReplaceAllString(tb.Name(), "-")
	if room := maxNameLen - len(suffix) - len(prefix) - len("-"); len(name) > room {
		name = name[:max(room, 0)]
	}
	head := strings.Trim(prefix+"-"+name, "-")
	if len(head) > maxNameLen-len(suffix) {
		head = head[:maxNameLen-len(suffix)] // a prefix longer than the limit
	}
	return head + suffix
}

// DeleteTable deletes a DynamoDB table a test created, reporting (not
// failing on) an error.
func DeleteTable(tb testing.TB, db *dynamodb.Client, name string) {
	if _, err := db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name}); err != nil {
		tb.Logf("delete table %s: %v", name, err)
	}
}

// PostgresSchema creates a fresh schema for tb (prefix plus the test's
// name) and returns it with the Postgres URL that selects it
// (search_path). When tb ends, the schema is dropped, and so is every
// schema whose name starts with it (a replay's shadow and retired
// schemas).
func PostgresSchema(tb testing.TB, prefix string) (schema, url string) {
	tb.Helper()
	admin := Postgres(tb)
	schema = strings.ToLower(strings.ReplaceAll(UniqueName(tb, prefix), "-", "_"))
	if _, err := admin.Exec(context.Background(), "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		tb.Fatalf("create schema %s: %v", schema, err)
	}
	tb.Cleanup(func() {
		rows, err := admin.Query(context.Background(), `SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1)`, schema)
		if err != nil {
			tb.Logf("drop schema %s: %v", schema, err)
			return
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			tb.Logf("drop schema %s: %v", schema, err)
			return
		}
		for _, n := range names {
			if _, err := admin.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{n}.Sanitize()+" CASCADE"); err != nil {
				tb.Logf("drop schema %s: %v", n, err)
			}
		}
	})
	url = Endpoints().Postgres
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return schema, url + sep + "search_path=" + schema
}

// SearchDocument is a document as Elasticsearch stores it: its version
// and its source.
type SearchDocument struct {
	Version int64
	Source  string
}

// SearchDocuments refreshes index (or alias) and returns every document
// in it by id (up to 10,000).
func SearchDocuments(tb testing.TB, es *elasticsearch.Client, index string) map[string]SearchDocument {
	tb.Helper()
	ctx := context.Background()
	if err := esclient.Do(ctx, es, esapi.IndicesRefreshRequest{Index: []string{index}}, nil); err != nil {
		tb.Fatal(err)
	}
	var res struct {
		Hits struct {
			Hits []struct {
				ID      string          `json:"_id"`
				Version int64           `json:"_version"`
				Source  json.RawMessage `json:"_source"`
			} `json:"hits"`
		} `json:"hits"`
	}
	body := `{"size":10000,"version":true,"query":{"match_all":{}}}`
	if err := esclient.Do(ctx, es, esapi.SearchRequest{Index: []string{index}, Body: strings.NewReader(body)}, &res); err != nil {
		tb.Fatal(err)
	}
	out := map[string]SearchDocument{}
	for _, h := range res.Hits.Hits {
		out[h.ID] = SearchDocument{Version: h.Version, Source: string(h.Source)}
	}
	return out
}
