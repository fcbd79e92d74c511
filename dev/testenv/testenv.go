// Package testenv gives integration tests real connections to the stack's
// services, at the addresses package endpoints resolves, mostly through
// the public test kit of package testkit/integration (which users' own
// tests use) plus what only eventpipe's own tests need. A service that
// cannot be reached fails the test at once with a message saying how to
// start it: integration tests never skip silently. The one exception is
// the unit tier: under `go test -short` (`make test-unit`) every accessor
// skips its test as an integration test, saying so (see Integration).
package testenv

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/elastic/go-elasticsearch/v8/esapi"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/internal/dynamoclient"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// Integration marks tb as an integration test: under `go test -short`
// (`make test-unit`, the tier that runs without services) it skips tb,
// saying why; otherwise it does nothing, and a service the test cannot
// reach fails it (integration.Mark). Every accessor of a service here
// calls it; a test that needs the stack in another way (a child process,
// a kill) calls it first.
func Integration(tb testing.TB) {
	tb.Helper()
	integration.Mark(tb)
}

// Endpoints returns the endpoints from the environment.
func Endpoints() endpoints.Endpoints { return endpoints.FromEnv() }

// DynamoDB returns a client for the configured DynamoDB endpoint after a
// ListTables probe; it fails tb when the endpoint is unreachable
// (integration.DynamoDB).
func DynamoDB(tb testing.TB) *dynamodb.Client {
	tb.Helper()
	return integration.DynamoDB(tb)
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
// it fails tb when no broker answers (integration.KafkaBrokers).
func KafkaBrokers(tb testing.TB) []string {
	tb.Helper()
	return integration.KafkaBrokers(tb)
}

// Postgres returns a pool on the configured database, closed when tb ends;
// it fails tb when Postgres is unreachable (integration.Postgres).
func Postgres(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	return integration.Postgres(tb)
}

// Elasticsearch returns an esclient.Client of the configured
// Elasticsearch (the stack's Elasticsearch-API server, or a real one named
// by ELASTICSEARCH_URL); it fails tb when nothing answers
// (integration.Elasticsearch).
func Elasticsearch(tb testing.TB) *esclient.Client {
	tb.Helper()
	return integration.Elasticsearch(tb)
}

// UniqueName returns prefix-<test name>-<random>, at most 63 bytes, valid
// as a DynamoDB table, Kafka topic and consumer group name
// (integration.UniqueName).
func UniqueName(tb testing.TB, prefix string) string {
	tb.Helper()
	return integration.UniqueName(tb, prefix)
}

// DeleteTable deletes a DynamoDB table a test created, reporting (not
// failing on) an error (integration.DeleteTable).
func DeleteTable(tb testing.TB, db *dynamodb.Client, name string) {
	tb.Helper()
	integration.DeleteTable(tb, db, name)
}

// PostgresSchema creates a fresh schema for tb (prefix plus the test's
// name) and returns it with the Postgres URL that selects it
// (search_path). When tb ends, the schema is dropped, and so is every
// schema whose name starts with it (a replay's shadow and retired
// schemas); see integration.PostgresSchema.
func PostgresSchema(tb testing.TB, prefix string) (schema, url string) {
	tb.Helper()
	return integration.PostgresSchema(tb, prefix)
}

// SearchDocument is a document as Elasticsearch stores it: its version
// and its source.
type SearchDocument struct {
	Version int64
	Source  string
}

// SearchDocuments refreshes index (or alias) and returns every document
// in it by id (up to 10,000).
func SearchDocuments(tb testing.TB, es *esclient.Client, index string) map[string]SearchDocument {
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

// FreePort returns a loopback port that was free a moment ago
// (integration.FreePort).
func FreePort(tb testing.TB) int {
	tb.Helper()
	return integration.FreePort(tb)
}
