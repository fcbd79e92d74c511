// Package endpoints holds the addresses and resource names every eventpipe
// component agrees on, with loopback defaults that environment variables
// override. The stack, every subcommand and every test read them from here,
// so pointing eventpipe at docker-compose services or at AWS is a matter of
// exporting a few variables.
package endpoints

import (
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/bus/kafka"
	ddbstore "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	"github.com/eventpipe/eventpipe/httpapi"
	"github.com/eventpipe/eventpipe/internal/kmsclient"
	"github.com/eventpipe/eventpipe/privacy"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
	"github.com/eventpipe/eventpipe/relay"
	"github.com/eventpipe/eventpipe/tlsconfig"
)

// Environment variable names. `eventpipe stack env` prints them.
const (
	EnvDynamoDB       = "EVENTPIPE_DYNAMODB_ENDPOINT"
	EnvKafkaBrokers   = "EVENTPIPE_KAFKA_BROKERS"
	EnvPostgres       = "EVENTPIPE_POSTGRES_URL"
	EnvElasticsearch  = "ELASTICSEARCH_URL"
	EnvHTTPAddr       = "EVENTPIPE_HTTP_ADDR"
	EnvEventsTable    = "EVENTPIPE_EVENTS_TABLE"
	EnvLeasesTable    = "EVENTPIPE_LEASES_TABLE"
	EnvAnalyticsTable = "EVENTPIPE_ANALYTICS_TABLE"
	EnvKeysTable      = "EVENTPIPE_KEYS_TABLE"
	EnvStackDir       = "EVENTPIPE_STACK_DIR"
	EnvTopicPrefix    = "EVENTPIPE_TOPIC_PREFIX"
	EnvAWSRoleARN     = "EVENTPIPE_AWS_ROLE_ARN"
	EnvKMS            = "EVENTPIPE_KMS_ENDPOINT"
	EnvKMSKeyID       = "EVENTPIPE_KMS_KEY_ID"
	// EnvKafkaInstanceID is this process's static consumer group
	// identity; unlike the others it names one process, so `stack env`
	// never prints it.
	EnvKafkaInstanceID = "EVENTPIPE_KAFKA_INSTANCE_ID"
)

// Defaults used when the matching environment variable is unset or empty.
// Each has one owner: the addresses of the local stack's services are
// this package's; a name or address a component also needs on its own is
// that component's, and repeated here by reference.
const (
	DefaultDynamoDB       = "http://127.0.0.1:8000"
	DefaultKafkaBrokers   = "127.0.0.1:9092"
	DefaultPostgres       = "postgres://eventpipe@127.0.0.1:5433/eventpipe?sslmode=disable"
	DefaultElasticsearch  = esclient.DefaultURL
	DefaultHTTPAddr       = httpapi.DefaultAddr
	DefaultEventsTable    = ddbstore.DefaultTable
	DefaultLeasesTable    = relay.DefaultLeaseTable
	DefaultAnalyticsTable = analytics.DefaultTable
	DefaultKeysTable      = privacy.DefaultKeysTable
	DefaultStackDir       = ".stack"
	// DefaultKMS is the local stack's KMS (dev/kmsserver).
	DefaultKMS = "http://127.0.0.1:8100"
	// DefaultKMSKeyID is the KMS key that wraps the per-subject data
	// keys: the alias the local stack creates at start.
	DefaultKMSKeyID = "alias/eventpipe-subjects"
)

// Endpoints is the resolved set of addresses and names.
type Endpoints struct {
	DynamoDB       string   // DynamoDB endpoint URL; "aws" means the SDK's default AWS endpoint
	KafkaBrokers   []string // host:port of each seed broker
	Postgres       string   // pgx connection URL
	Elasticsearch  string   // Elasticsearch base URL
	HTTPAddr       string   // listen address of `eventpipe serve`
	EventsTable    string   // DynamoDB event store table
	LeasesTable    string   // DynamoDB relay lease table
	AnalyticsTable string   // DynamoDB analytics table
	KeysTable      string   // DynamoDB table of the data subjects' keys (package privacy)
	StackDir       string   // cache folder of the local stack
	TopicPrefix    string   // namespace put before every Kafka topic name ("" by default)
	KMS            string   // KMS endpoint URL; "aws" means AWS KMS with the SDK's default chain (and AWSRoleARN)
	KMSKeyID       string   // the KMS key wrapping per-subject data keys: key id, key ARN, alias/<name> or alias ARN

	// Kafka is the TLS and SASL of every Kafka client (EVENTPIPE_KAFKA_TLS*,
	// EVENTPIPE_KAFKA_SASL_*; see kafka.SecurityFromEnv).
	Kafka kafka.Security
	// ElasticsearchSecurity is the credentials and TLS of every
	// Elasticsearch client (ELASTICSEARCH_API_KEY, …; see
	// esclient.SecurityFromEnv).
	ElasticsearchSecurity esclient.Security
	// AWSRoleARN, when set, is a role the DynamoDB and KMS clients assume
	// (through STS, from the AWS default credential chain), each when its
	// endpoint is "aws"; EVENTPIPE_AWS_ROLE_ARN.
	AWSRoleARN string
	// KafkaInstanceID, when set, makes this process's consumers static
	// members of their groups (see kafka.SubscriberConfig.InstanceID): a
	// restart with the same id resumes without a rebalance. It names one
	// process (a StatefulSet's pod name), never a fleet;
	// EVENTPIPE_KAFKA_INSTANCE_ID.
	KafkaInstanceID string
	// AllowCleartextCredentials lets the Postgres password go without TLS
	// (sslmode disable, allow or prefer) to a host that is not loopback;
	// refused otherwise. From EVENTPIPE_ALLOW_CLEARTEXT_CREDENTIALS, which
	// sets Kafka's and Elasticsearch's AllowCleartextCredentials too (see
	// tlsconfig.EnvAllowCleartextCredentials).
	AllowCleartextCredentials bool

	// err is what reading the security settings from the environment
	// failed with (an unreadable secret file, a bad mechanism); Err
	// returns it.
	err error
}

// Err reports why the security settings could not be read from the
// environment, nil when they could (or were given).
func (e Endpoints) Err() error { return e.err }

// KMSClient is the KMS client configuration of e: its KMS endpoint, and
// AWSRoleARN when that endpoint is AWS KMS ("aws"); a local KMS takes
// static credentials, as DynamoDB Local does.
func (e Endpoints) KMSClient() kmsclient.Config {
	c := kmsclient.Config{Endpoint: e.KMS}
	if e.KMS == kmsclient.AWSEndpoint {
		c.RoleARN = e.AWSRoleARN
	}
	return c
}

// ValidateKMS reports an unusable KMS endpoint or key id
// (EVENTPIPE_KMS_ENDPOINT, EVENTPIPE_KMS_KEY_ID, and the role when the
// endpoint is "aws") as an *eventstore.ValidationError, the variable
// named in the message.
func (e Endpoints) ValidateKMS() error {
	if err := e.KMSClient().Validate(); err != nil {
		return fmt.Errorf("endpoints: %s=%q: %w", EnvKMS, e.KMS, err)
	}
	if err := kmsclient.ValidateKeyID(e.KMSKeyID); err != nil {
		return fmt.Errorf("endpoints: %s=%q: %w", EnvKMSKeyID, e.KMSKeyID, err)
	}
	return nil
}

// Default returns the built-in defaults, ignoring the environment.
func Default() Endpoints {
	return Endpoints{
		DynamoDB:       DefaultDynamoDB,
		KafkaBrokers:   []string{DefaultKafkaBrokers},
		Postgres:       DefaultPostgres,
		Elasticsearch:  DefaultElasticsearch,
		HTTPAddr:       DefaultHTTPAddr,
		EventsTable:    DefaultEventsTable,
		LeasesTable:    DefaultLeasesTable,
		AnalyticsTable: DefaultAnalyticsTable,
		KeysTable:      DefaultKeysTable,
		StackDir:       DefaultStackDir,
		KMS:            DefaultKMS,
		KMSKeyID:       DefaultKMSKeyID,
	}
}

// FromEnv returns the defaults overridden by any non-empty environment variable.
func FromEnv() Endpoints {
	return fromLookup(os.LookupEnv)
}

func fromLookup(lookup func(string) (string, bool)) Endpoints {
	e := Default()
	str := func(name string, dst *string) {
		if v, ok := lookup(name); ok && strings.TrimSpace(v) != "" {
			*dst = strings.TrimSpace(v)
		}
	}
	str(EnvDynamoDB, &e.DynamoDB)
	str(EnvPostgres, &e.Postgres)
	str(EnvElasticsearch, &e.Elasticsearch)
	str(EnvHTTPAddr, &e.HTTPAddr)
	str(EnvEventsTable, &e.EventsTable)
	str(EnvLeasesTable, &e.LeasesTable)
	str(EnvAnalyticsTable, &e.AnalyticsTable)
	str(EnvKeysTable, &e.KeysTable)
	str(EnvStackDir, &e.StackDir)
	str(EnvTopicPrefix, &e.TopicPrefix)
	str(EnvAWSRoleARN, &e.AWSRoleARN)
	str(EnvKMS, &e.KMS)
	str(EnvKMSKeyID, &e.KMSKeyID)
	str(EnvKafkaInstanceID, &e.KafkaInstanceID)
	var err error
	if e.AllowCleartextCredentials, err = tlsconfig.AllowCleartextFromEnv(lookup); err != nil {
		e.err = err
	}
	if e.Kafka, err = kafka.SecurityFromEnv(lookup); err != nil && e.err == nil {
		e.err = fmt.Errorf("kafka settings: %w", err)
	}
	if e.ElasticsearchSecurity, err = esclient.SecurityFromEnv(lookup); err != nil && e.err == nil {
		e.err = err
	}
	var brokers string
	str(EnvKafkaBrokers, &brokers)
	if brokers != "" {
		e.KafkaBrokers = SplitList(brokers)
	}
	return e
}

// Fill returns e with every empty field filled on its own: from its
// environment variable when that is set and not blank, otherwise from its
// default (as FromEnv gives it). A field that is set is kept whatever the
// others hold, so a partly filled Endpoints loses nothing. An empty
// TopicPrefix counts as unset too: it takes EVENTPIPE_TOPIC_PREFIX when
// that is set; so does a zero Kafka or ElasticsearchSecurity (plain text
// without credentials), which takes the environment's settings. Err then
// reports an environment that could not be read.
func (e Endpoints) Fill() Endpoints {
	return fill(e, FromEnv())
}

// fill is Fill against the endpoints def.
func fill(e, def Endpoints) Endpoints {
	str := func(dst *string, d string) {
		if *dst == "" {
			*dst = d
		}
	}
	str(&e.DynamoDB, def.DynamoDB)
	str(&e.Postgres, def.Postgres)
	str(&e.Elasticsearch, def.Elasticsearch)
	str(&e.HTTPAddr, def.HTTPAddr)
	str(&e.EventsTable, def.EventsTable)
	str(&e.LeasesTable, def.LeasesTable)
	str(&e.AnalyticsTable, def.AnalyticsTable)
	str(&e.KeysTable, def.KeysTable)
	str(&e.StackDir, def.StackDir)
	str(&e.TopicPrefix, def.TopicPrefix)
	str(&e.AWSRoleARN, def.AWSRoleARN)
	str(&e.KMS, def.KMS)
	str(&e.KMSKeyID, def.KMSKeyID)
	str(&e.KafkaInstanceID, def.KafkaInstanceID)
	if e.Kafka == (kafka.Security{}) {
		e.Kafka = def.Kafka
		if e.err == nil {
			e.err = def.err
		}
	}
	if e.ElasticsearchSecurity == (esclient.Security{}) {
		e.ElasticsearchSecurity = def.ElasticsearchSecurity
		if e.err == nil {
			e.err = def.err
		}
	}
	if len(e.KafkaBrokers) == 0 {
		e.KafkaBrokers = append([]string(nil), def.KafkaBrokers...)
	}
	e.AllowCleartextCredentials = e.AllowCleartextCredentials || def.AllowCleartextCredentials
	return e
}

// SplitList splits a comma-separated list, dropping blanks.
func SplitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if p := strings.TrimSpace(part); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Redact returns raw, a URL or a comma-separated list of URLs (or a
// key=value connection string), with every password masked
// (url.URL.Redacted's "xxxxx": in the user info, and in a password
// parameter), and whether it masked one. Every URL eventpipe prints goes
// through it.
func Redact(raw string) (string, bool) {
	if strings.Contains(raw, "password=") && !strings.Contains(raw, "://") { // key=value form
		masked := false
		fields := strings.Fields(raw)
		for i, f := range fields {
			if k, _, ok := strings.Cut(f, "="); ok && k == "password" {
				fields[i], masked = "password=xxxxx", true
			}
		}
		return strings.Join(fields, " "), masked
	}
	parts := strings.Split(raw, ",")
	masked := false
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil || u.Scheme == "" {
			continue
		}
		hide := false
		if _, ok := u.User.Password(); ok {
			hide = true
		}
		if q := u.Query(); q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery, hide = q.Encode(), true
		}
		if hide {
			parts[i], masked = u.Redacted(), true
		}
	}
	return strings.Join(parts, ","), masked
}

// Exports renders the endpoints as shell `export` lines, in a stable
// order. A URL holding a password is not exported: its line is a shell
// comment showing it masked (Redact), so that evaluating the lines
// leaves the variable as the environment has it and no password is
// printed; keep the password in PGPASSFILE or ELASTICSEARCH_PASSWORD_FILE
// instead (docs/security.md).
func (e Endpoints) Exports() []string {
	kv := [][2]string{
		{EnvDynamoDB, e.DynamoDB},
		{EnvKafkaBrokers, strings.Join(e.KafkaBrokers, ",")},
		{EnvPostgres, e.Postgres},
		{EnvElasticsearch, e.Elasticsearch},
		{EnvHTTPAddr, e.HTTPAddr},
		{EnvEventsTable, e.EventsTable},
		{EnvLeasesTable, e.LeasesTable},
		{EnvAnalyticsTable, e.AnalyticsTable},
		{EnvKeysTable, e.KeysTable},
		{EnvStackDir, e.StackDir},
		{EnvTopicPrefix, e.TopicPrefix},
		{EnvKMS, e.KMS},
		{EnvKMSKeyID, e.KMSKeyID},
	}
	if e.AWSRoleARN != "" {
		kv = append(kv, [2]string{EnvAWSRoleARN, e.AWSRoleARN})
	}
	lines := ExportLines(kv)
	for i, p := range kv {
		if masked, ok := Redact(p[1]); ok {
			lines[i] = fmt.Sprintf("# %s=%s is not exported: it holds a password (kept as your environment has it; prefer a password file, see docs/security.md)", p[0], masked)
		}
	}
	return lines
}

// ExportLines renders name/value pairs as shell `export` lines, each
// value quoted where the shell needs it.
func ExportLines(kv [][2]string) []string {
	lines := make([]string, 0, len(kv))
	for _, p := range kv {
		lines = append(lines, fmt.Sprintf("export %s=%s", p[0], shellQuote(p[1])))
	}
	return lines
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:,@=", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
