package testservers

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/certs"
	"github.com/eventpipe/eventpipe/dev/kafkabroker"
	"github.com/eventpipe/eventpipe/dev/stack"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/internal/probe"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
	"github.com/eventpipe/eventpipe/testkit/integration"
	"github.com/eventpipe/eventpipe/tlsconfig"
)

// SecureServices are services with the shapes of a production cluster,
// started for one test: a Kafka broker speaking only TLS with
// SCRAM-SHA-512, an Elasticsearch-API server speaking only HTTPS with an
// API key, both with certificates of a CA made for the test, and the
// stack's Postgres reached as its TLS-only, password role with
// sslmode=verify-full against the stack's CA. DynamoDB is the stack's
// (DynamoDB Local has no authentication).
type SecureServices struct {
	// Dir holds the test's CA (ca.pem), the servers' certificates and the
	// secret files.
	Dir string
	// CAFile is the test CA that issued the Kafka and Elasticsearch
	// certificates; KafkaPasswordFile and ESAPIKeyFile hold their
	// secrets.
	CAFile, KafkaPasswordFile, ESAPIKeyFile string
	// Broker is the Kafka broker child (kill and restart it with its
	// methods).
	Broker *KafkaBrokerProcess
	// Endpoints reach the services with their security settings, for
	// in-process use; Env are the same settings as environment
	// variables, for child processes (file paths, never secrets).
	Endpoints endpoints.Endpoints
	Env       []string
}

// SecureKafkaUser is the SASL user of the SecureServices' broker.
const SecureKafkaUser = "eventpipe"

// StartSecureServices starts the secured broker and Elasticsearch-API
// server as children of the test binary (so call RunChildIfRequested in
// TestMain) and stops them when tb ends. Endpoints are the environment's
// with the secured services in place; the caller sets its own tables,
// topic prefix and Postgres schema (SecurePostgresURL).
func StartSecureServices(tb testing.TB) *SecureServices {
	tb.Helper()
	testenv.Integration(tb)
	dir := tb.TempDir()
	files, err := certs.WriteServer(dir, "eventpipe test CA", "127.0.0.1", "localhost")
	if err != nil {
		tb.Fatal(err)
	}
	caFile, certFile, keyFile := files.CAFile, files.CertFile, files.KeyFile
	s := &SecureServices{Dir: dir, CAFile: caFile,
		KafkaPasswordFile: writeSecret(tb, dir, "kafka-password", randomHex(tb)),
		ESAPIKeyFile:      filepath.Join(dir, "es-api-key")}

	kafkaPassword, _ := os.ReadFile(s.KafkaPasswordFile)
	sec := kafka.Security{TLS: tlsconfig.Config{CAFile: caFile},
		SASL: kafka.SASL{Mechanism: kafka.SASLScramSHA512, Username: SecureKafkaUser, Password: string(kafkaPassword)}}
	s.Broker = StartKafkaBrokerWithConfig(tb, KafkaBrokerConfig{DataDir: filepath.Join(dir, "kafka"), Security: sec,
		Env: []string{kafkabroker.EnvSASLPasswordFile + "=" + s.KafkaPasswordFile},
		Args: []string{"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-ca-file", caFile,
			"--sasl-mechanism", kafka.SASLScramSHA512, "--sasl-username", SecureKafkaUser}})

	id, key := randomHex(tb)[:20], randomHex(tb)
	creds, _ := json.Marshal(map[string]any{"api_keys": []map[string]string{{"id": id, "api_key": key, "name": "eventpipe"}}})
	credsFile := writeSecret(tb, dir, "es-credentials.json", string(creds))
	apiKey := base64.StdEncoding.EncodeToString([]byte(id + ":" + key))
	writeSecret(tb, dir, "es-api-key", apiKey)
	esAddr := "127.0.0.1:" + strconv.Itoa(integration.FreePort(tb))
	esSec := esclient.Security{APIKey: apiKey, TLS: tlsconfig.Config{CAFile: caFile}}
	esURL := "https://" + esAddr
	integration.StartChild(tb, integration.ChildConfig{
		Main: mainESServer,
		Args: []string{"--addr", esAddr, "--data-dir", filepath.Join(dir, "es"), "--tls-cert-file", certFile, "--tls-key-file", keyFile,
			"--tls-ca-file", caFile, "--credentials-file", credsFile},
		Ready: func(ctx context.Context) error { return probe.Elasticsearch(ctx, esURL, esSec) },
	})

	ep := testenv.Endpoints()
	ep.KafkaBrokers, ep.Kafka = []string{s.Broker.Addr}, sec
	ep.Elasticsearch, ep.ElasticsearchSecurity = esURL, esSec
	s.Endpoints = ep
	s.Env = []string{
		endpoints.EnvKafkaBrokers + "=" + s.Broker.Addr,
		kafka.EnvPrefix + "TLS_CA_FILE=" + caFile,
		kafka.EnvSASLMechanism + "=" + kafka.SASLScramSHA512,
		kafka.EnvSASLUsername + "=" + SecureKafkaUser,
		kafka.EnvSASLPasswordFile + "=" + s.KafkaPasswordFile,
		endpoints.EnvElasticsearch + "=" + esURL,
		esclient.EnvPrefix + "TLS_CA_FILE=" + caFile,
		esclient.EnvAPIKey + "_FILE=" + s.ESAPIKeyFile,
	}
	return s
}

// SecurePostgres returns the URL of the stack's Postgres as its TLS-only
// role (stack.PostgresTLSRole), sslmode=verify-full against the stack's
// CA, with search_path set to schema, and the PGPASSFILE that carries its
// password. The role is a member of the plain URL's role, so it can work
// in the schemas PostgresSchema creates.
func SecurePostgres(tb testing.TB, schema string) (pgURL, pgPassFile string) {
	tb.Helper()
	testenv.Integration(tb)
	dir := testenv.Endpoints().StackDir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(stack.RepoRoot(), dir)
	}
	f, err := stack.SecureMaterial(dir)
	if err != nil {
		tb.Fatalf("the stack's TLS material: %v", err)
	}
	u, err := url.Parse(testenv.Endpoints().Postgres)
	if err != nil {
		tb.Fatal(err)
	}
	u.User = url.User(stack.PostgresTLSRole)
	q := u.Query()
	q.Set("sslmode", "verify-full")
	q.Set("sslrootcert", f.CA)
	if schema != "" {
		q.Set("search_path", schema)
	}
	u.RawQuery = q.Encode()
	return u.String(), f.PGPass
}

func writeSecret(tb testing.TB, dir, name, value string) string {
	tb.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(value), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

func randomHex(tb testing.TB) string {
	tb.Helper()
	b := make([]byte, 24)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
