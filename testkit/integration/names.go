package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe/endpoints"
)

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// MaxNameLen bounds UniqueName's result: Postgres' identifier limit (63
// bytes; PostgresSchema lowercases the name into one), well within
// DynamoDB's table names and Kafka's topics and consumer groups.
const MaxNameLen = 63

// UniqueName returns prefix-<test name>-<random> restricted to characters
// valid in DynamoDB table names, Kafka topics and consumer groups, so that
// tests sharing one stack never collide. It is at most MaxNameLen bytes
// (a Postgres identifier): a long test name is cut, never the prefix or
// the 8 hex digits of the random suffix, so two names from one test
// differ even where Postgres would truncate a longer one.
func UniqueName(tb testing.TB, prefix string) string {
	tb.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatalf("random name: %v", err)
	}
	suffix := "-" + hex.EncodeToString(b[:])
	prefix = unsafeName.ReplaceAllString(prefix, "-")
	name := unsafeName.ReplaceAllString(tb.Name(), "-")
	if room := MaxNameLen - len(suffix) - len(prefix) - len("-"); len(name) > room {
		name = name[:max(room, 0)]
	}
	head := strings.Trim(prefix+"-"+name, "-")
	if len(head) > MaxNameLen-len(suffix) {
		head = head[:MaxNameLen-len(suffix)] // a prefix longer than the limit
	}
	return head + suffix
}

// FreePort returns a loopback TCP port that was free a moment ago (for a
// child's listen address).
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// DeleteTable deletes the DynamoDB table name, reporting (not failing
// on) an error; a table that does not exist is no error.
func DeleteTable(tb testing.TB, db *dynamodb.Client, name string) {
	tb.Helper()
	_, err := db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name})
	var missing *ddbtypes.ResourceNotFoundException
	if err != nil && !errors.As(err, &missing) {
		tb.Logf("delete table %s: %v", name, err)
	}
}

// PostgresSchema creates a fresh schema for tb (prefix plus the test's
// name, lower case) in the environment's Postgres and returns it with the
// Postgres URL that selects it (its search_path parameter, which
// eventpipe's Postgres clients honour). When tb ends the schema is
// dropped, and so is every schema whose name starts with it (a replay's
// shadow and retired schemas). It fails tb when Postgres does not answer,
// and skips it under -short (Mark).
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
	url = endpoints.FromEnv().Postgres
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return schema, url + sep + "search_path=" + schema
}

// Isolate checks the stack (Stack) and returns its endpoints with names
// of tb's own: a new events, leases and analytics table name, a topic
// prefix (so topics, consumer groups and search aliases are the test's),
// and a new Postgres schema (PostgresSchema). eventpipe.Migrate creates
// the tables and indices. When tb ends the DynamoDB tables and the schema
// are deleted; the Kafka topics and search indices, named after the
// prefix, are left.
func Isolate(tb testing.TB) endpoints.Endpoints {
	tb.Helper()
	ep := Stack(tb)
	db := dynamoClient(tb, ep)
	ep.EventsTable = UniqueName(tb, "events")
	ep.LeasesTable = UniqueName(tb, "leases")
	ep.AnalyticsTable = UniqueName(tb, "analytics")
	ep.KeysTable = UniqueName(tb, "keys")
	ep.TopicPrefix = UniqueName(tb, "ns") + "."
	_, ep.Postgres = PostgresSchema(tb, "rm")
	tb.Cleanup(func() {
		for _, t := range []string{ep.EventsTable, ep.LeasesTable, ep.AnalyticsTable, ep.KeysTable} {
			DeleteTable(tb, db, t)
		}
	})
	return ep
}

// Environ returns ep as the environment variables that eventpipe's
// programs read (the addresses and names `eventpipe stack env` prints),
// as NAME=value for a child process's environment (ChildConfig.Env). The
// security settings are not among them: a child inherits the test's.
func Environ(ep endpoints.Endpoints) []string {
	env := []string{
		endpoints.EnvDynamoDB + "=" + ep.DynamoDB,
		endpoints.EnvKafkaBrokers + "=" + strings.Join(ep.KafkaBrokers, ","),
		endpoints.EnvPostgres + "=" + ep.Postgres,
		endpoints.EnvElasticsearch + "=" + ep.Elasticsearch,
		endpoints.EnvHTTPAddr + "=" + ep.HTTPAddr,
		endpoints.EnvEventsTable + "=" + ep.EventsTable,
		endpoints.EnvLeasesTable + "=" + ep.LeasesTable,
		endpoints.EnvAnalyticsTable + "=" + ep.AnalyticsTable,
		endpoints.EnvKeysTable + "=" + ep.KeysTable,
		endpoints.EnvStackDir + "=" + ep.StackDir,
		endpoints.EnvTopicPrefix + "=" + ep.TopicPrefix,
	}
	if ep.AWSRoleARN != "" {
		env = append(env, endpoints.EnvAWSRoleARN+"="+ep.AWSRoleARN)
	}
	return env
}
