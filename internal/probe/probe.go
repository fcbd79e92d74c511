// Package probe makes one real request to each backing service to tell
// whether it is up: ListTables on DynamoDB, ApiVersions and Metadata on
// Kafka, SELECT 1 on Postgres, GET / on Elasticsearch, ListKeys on KMS.
// The stack uses it as its health check and the tests use it to fail
// loudly when a service is missing.
package probe

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/internal/dynamoclient"
	"github.com/eventpipe/eventpipe/internal/kmsclient"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
)

// DefaultTimeout bounds a probe whose context has no deadline.
const DefaultTimeout = 5 * time.Second

func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, DefaultTimeout)
}

// DynamoDB calls ListTables (limit 1) on endpoint.
func DynamoDB(ctx context.Context, endpoint string) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	// One attempt: the caller decides whether and when to ask again.
	client, err := dynamoclient.New(ctx, dynamoclient.Config{Endpoint: endpoint},
		func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
	if err != nil {
		return err
	}
	limit := int32(1)
	if _, err := client.ListTables(ctx, &dynamodb.ListTablesInput{Limit: &limit}); err != nil {
		return fmt.Errorf("dynamodb ListTables at %s: %w", endpoint, err)
	}
	return nil
}

// KMS calls ListKeys (limit 1) on endpoint (a local KMS's URL, or "aws"
// for AWS KMS with the default credential chain) through the AWS SDK's
// KMS client.
func KMS(ctx context.Context, endpoint string) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	client, err := kmsclient.New(ctx, kmsclient.Config{Endpoint: endpoint},
		func(o *kms.Options) { o.RetryMaxAttempts = 1 })
	if err != nil {
		return err
	}
	limit := int32(1)
	if _, err := client.ListKeys(ctx, &kms.ListKeysInput{Limit: &limit}); err != nil {
		return fmt.Errorf("kms ListKeys at %s: %w", endpoint, err)
	}
	return nil
}

// Kafka pings the seed brokers (kafka.Ping: ApiVersions, the SASL
// handshake and Metadata), connecting with sec (TLS and SASL; the zero
// kafka.Security is plain text), so a wrong CA or password fails the
// probe.
func Kafka(ctx context.Context, brokers []string, sec kafka.Security) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	return kafka.Ping(ctx, kafka.Cluster{Brokers: brokers, Security: sec})
}

// Postgres connects to url and runs SELECT 1.
func Postgres(ctx context.Context, url string) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("postgres connect %s: %w", redactURL(url), err)
	}
	defer conn.Close(context.Background())
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("postgres SELECT 1 at %s: %w", redactURL(url), err)
	}
	return nil
}

// Elasticsearch sends GET / with sec's credentials and TLS through the
// client every eventpipe use of Elasticsearch has (esclient.NewClient) and
// checks the product header that the client insists on.
func Elasticsearch(ctx context.Context, baseURL string, sec esclient.Security) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	es, err := esclient.NewClient(baseURL, sec)
	if err != nil {
		return err
	}
	if u, err := url.Parse(baseURL); err == nil {
		baseURL = u.Redacted() // errors name it without its password
	}
	resp, err := es.Info(es.Info.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("elasticsearch GET %s (%s): %w", baseURL, sec, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("elasticsearch GET %s (%s): status %s", baseURL, sec, resp.Status())
	}
	if got := resp.Header.Get("X-Elastic-Product"); got != "Elasticsearch" {
		return fmt.Errorf("elasticsearch GET %s: X-Elastic-Product is %q, want \"Elasticsearch\"", baseURL, got)
	}
	return nil
}

// redactURL hides a password in a connection URL before it reaches a log.
func redactURL(raw string) string {
	cfg, err := pgx.ParseConfig(raw)
	if err != nil || cfg.Password == "" {
		return raw
	}
	return fmt.Sprintf("postgres://%s:***@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}
