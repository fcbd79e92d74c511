package endpoints

import (
	"reflect"
	"slices"
	"testing"
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
		EventsTable: "ev", LeasesTable: "l", AnalyticsTable: "a", StackDir: "s", TopicPrefix: "t."}
	if got := set.Fill(); !reflect.DeepEqual(got, set) {
		t.Errorf("Fill of a full Endpoints = %+v, want it unchanged", got)
	}
}

// TestFillCoversEveryField fails when a field is added to Endpoints
// without fill learning it: every field of an empty Endpoints must come
// out set.
func TestFillCoversEveryField(t *testing.T) {
	def := Endpoints{DynamoDB: "d", KafkaBrokers: []string{"k"}, Postgres: "p", Elasticsearch: "e", HTTPAddr: "h",
		EventsTable: "ev", LeasesTable: "l", AnalyticsTable: "a", StackDir: "s", TopicPrefix: "t."}
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
