package endpoints

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
)

// TestFillKeepsWhatIsSetAndFillsEachEmptyFieldOnItsOwn fills two partly
// filled Endpoints from the environment: one with only Kafka brokers
// keeps them and gets the environment's DynamoDB endpoint (and every
// other field), one with only a DynamoDB endpoint keeps it and gets the
// environment's brokers.
func TestFillKeepsWhatIsSetAndFillsEachEmptyFieldOnItsOwn(t *testing.T) {
	t.Setenv(EnvDynamoDB, "http://dynamodb.env:8000")
	t.Setenv(EnvKafkaBrokers, "kafka-env-1:9092, kafka-env-2:9092")
	t.Setenv(EnvPostgres, "postgres://env@pg.env/db")
	t.Setenv(EnvTopicPrefix, "env.")
	t.Setenv(EnvEventsTable, "")
	t.Setenv(EnvElasticsearch, "") // blank counts as unset, whatever the machine exports

	onlyBrokers := Endpoints{KafkaBrokers: []string{"mine:9092"}}.Fill()
	if !slices.Equal(onlyBrokers.KafkaBrokers, []string{"mine:9092"}) {
		t.Errorf("brokers %v, want the ones set", onlyBrokers.KafkaBrokers)
	}
	if onlyBrokers.DynamoDB != "http://dynamodb.env:8000" || onlyBrokers.Postgres != "postgres://env@pg.env/db" || onlyBrokers.TopicPrefix != "env." {
		t.Errorf("filled %+v, want DynamoDB, Postgres and the topic prefix from the environment", onlyBrokers)
	}
	if onlyBrokers.EventsTable != DefaultEventsTable || onlyBrokers.Elasticsearch != DefaultElasticsearch {
		t.Errorf("filled %+v, want the defaults where the environment is blank or unset", onlyBrokers)
	}

	onlyDynamo := Endpoints{DynamoDB: "aws"}.Fill()
	if onlyDynamo.DynamoDB != "aws" {
		t.Errorf("DynamoDB %q, want the one set", onlyDynamo.DynamoDB)
	}
	if !slices.Equal(onlyDynamo.KafkaBrokers, []string{"kafka-env-1:9092", "kafka-env-2:9092"}) {
		t.Errorf("brokers %v, want the environment's", onlyDynamo.KafkaBrokers)
	}

	set := Endpoints{DynamoDB: "d", KafkaBrokers: []string{"k"}, Postgres: "p", Elasticsearch: "e", HTTPAddr: "h",
		EventsTable: "ev", LeasesTable: "l", AnalyticsTable: "a", KeysTable: "ks", StackDir: "s", TopicPrefix: "t.", KMS: "m", KMSKeyID: "alias/x"}
	if got := set.Fill(); !reflect.DeepEqual(got, set) {
		t.Errorf("Fill of a full Endpoints = %+v, want it unchanged", got)
	}
}

// TestFillCoversEveryField fails when a field is added to Endpoints
// without fill learning it: every field of an empty Endpoints must come
// out set.
func TestFillCoversEveryField(t *testing.T) {
	def := Endpoints{DynamoDB: "d", KafkaBrokers: []string{"k"}, Postgres: "p", Elasticsearch: "e", HTTPAddr: "h",
		EventsTable: "ev", LeasesTable: "l", AnalyticsTable: "a", KeysTable: "ks", StackDir: "s", TopicPrefix: "t.", KMS: "m", KMSKeyID: "alias/x",
		Kafka:                 kafka.Security{SASL: kafka.SASL{Mechanism: kafka.SASLPlain, Username: "u", Password: "p"}},
		ElasticsearchSecurity: esclient.Security{APIKey: "k"}, AWSRoleARN: "arn:aws:iam::1:role/r", KafkaInstanceID: "pod-0", AllowCleartextCredentials: true,
		err: errors.New("env")}
	v := reflect.ValueOf(def)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("the test's full Endpoints leaves %s empty", v.Type().Field(i).Name)
		}
	}
	got := reflect.ValueOf(fill(Endpoints{}, def))
	for i := range got.NumField() {
		if got.Field(i).IsZero() {
			t.Errorf("fill leaves %s empty", got.Type().Field(i).Name)
		}
	}
}

// TestSecuritySettingsComeFromTheEnvironmentAndFiles reads Kafka SASL and
// TLS, an Elasticsearch API key from a file and a role to assume from
// the environment; a secret set both inline and as a file, or an unknown
// SASL mechanism, is reported by Err.
func TestSecuritySettingsComeFromTheEnvironmentAndFiles(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "es-api-key")
	if err := os.WriteFile(keyFile, []byte("aWQ6a2V5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("EVENTPIPE_KAFKA_SASL_MECHANISM", "scram-sha-512")
	t.Setenv("EVENTPIPE_KAFKA_SASL_USERNAME", "eventpipe")
	t.Setenv("EVENTPIPE_KAFKA_SASL_PASSWORD", "s3cret")
	t.Setenv("EVENTPIPE_KAFKA_TLS_CA_FILE", "/etc/ssl/kafka-ca.pem")
	t.Setenv("ELASTICSEARCH_API_KEY_FILE", keyFile)
	t.Setenv(EnvAWSRoleARN, "arn:aws:iam::123456789012:role/eventpipe")
	ep := Endpoints{}.Fill()
	if err := ep.Err(); err != nil {
		t.Fatal(err)
	}
	if ep.Kafka.SASL.Mechanism != "SCRAM-SHA-512" || ep.Kafka.SASL.Password != "s3cret" || !ep.Kafka.TLS.On() || ep.Kafka.TLS.CAFile != "/etc/ssl/kafka-ca.pem" {
		t.Errorf("kafka security %v; want SCRAM-SHA-512 over TLS with the CA file", ep.Kafka)
	}
	if ep.ElasticsearchSecurity.APIKey != "aWQ6a2V5" || ep.AWSRoleARN != "arn:aws:iam::123456789012:role/eventpipe" {
		t.Errorf("elasticsearch %v, role %q; want the key from the file and the role", ep.ElasticsearchSecurity, ep.AWSRoleARN)
	}
	if s := fmt.Sprintf("%v %+v", ep, ep); strings.Contains(s, "s3cret") || strings.Contains(s, "aWQ6a2V5") {
		t.Errorf("printing the endpoints shows a secret: %s", s)
	}

	t.Setenv("ELASTICSEARCH_API_KEY", "inline")
	if err := (Endpoints{}).Fill().Err(); err == nil || !strings.Contains(err.Error(), "ELASTICSEARCH_API_KEY") {
		t.Errorf("an API key set inline and as a file: Err %v; want it named", err)
	}
	t.Setenv("ELASTICSEARCH_API_KEY", "")
	t.Setenv("EVENTPIPE_KAFKA_SASL_MECHANISM", "GSSAPI")
	if err := (Endpoints{}).Fill().Err(); err == nil || !strings.Contains(err.Error(), "GSSAPI") {
		t.Errorf("an unknown mechanism: Err %v; want it named", err)
	}
}
