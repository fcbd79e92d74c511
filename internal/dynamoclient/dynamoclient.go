// Package dynamoclient builds DynamoDB and DynamoDB Streams clients for a
// configured endpoint: DynamoDB Local from the stack (static dummy
// credentials, response checksums off because DynamoDB Local sends wrong
// CRC32s on some error responses) or AWS itself (the SDK's default
// credential chain: environment, shared config and SSO, web identity,
// ECS and EC2 roles; optionally a role assumed through STS on top). The
// clients are safe for concurrent use.
package dynamoclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/eventpipe/eventpipe/eventstore"
)

// AWSEndpoint is the Endpoint value that selects the real AWS service.
const AWSEndpoint = "aws"

// Config selects the DynamoDB endpoint.
type Config struct {
	// Endpoint is the base URL of DynamoDB Local (e.g. http://127.0.0.1:8000)
	// or AWSEndpoint for the real service.
	Endpoint string
	// Region defaults to us-east-1 for local endpoints; for AWS the SDK's
	// usual resolution applies when empty.
	Region string
	// MaxConns bounds idle connections per host (default 256) so that many
	// concurrent writers reuse connections instead of redialling.
	MaxConns int
	// RoleARN, when set, is an IAM role assumed through STS with the
	// default chain's credentials (refreshed before they expire); AWS
	// only.
	RoleARN string
	// RoleSessionName names the assumed role's sessions in CloudTrail
	// (default "eventpipe").
	RoleSessionName string
	// STSEndpoint overrides the STS endpoint the role is assumed at
	// (default: the region's); for VPC endpoints and tests.
	STSEndpoint string
}

func (c *Config) setDefaults() {
	if c.MaxConns == 0 {
		c.MaxConns = 256
	}
	if c.Region == "" && c.Endpoint != AWSEndpoint {
		c.Region = "us-east-1"
	}
	if c.RoleSessionName == "" {
		c.RoleSessionName = "eventpipe"
	}
}

// Validate reports a missing or malformed endpoint.
func (c Config) Validate() error {
	if c.Endpoint == "" {
		return fmt.Errorf("dynamoclient: %w", &eventstore.ValidationError{Field: "Endpoint",
			Reason: fmt.Sprintf("is empty (want a URL such as http://127.0.0.1:8000, or %q)", AWSEndpoint)})
	}
	if c.Endpoint == AWSEndpoint {
		if c.RoleARN != "" && !strings.HasPrefix(c.RoleARN, "arn:") {
			return fmt.Errorf("dynamoclient: RoleARN %q is not an ARN: %w", c.RoleARN,
				&eventstore.ValidationError{Field: "RoleARN", Reason: "want arn:aws:iam::<account>:role/<name>"})
		}
		return nil
	}
	if c.RoleARN != "" {
		return fmt.Errorf("dynamoclient: RoleARN with endpoint %s: %w", c.Endpoint,
			&eventstore.ValidationError{Field: "RoleARN", Reason: fmt.Sprintf("a role is assumed only against AWS (endpoint %q); a local endpoint takes static credentials", AWSEndpoint)})
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("dynamoclient: %w", &eventstore.ValidationError{Field: "Endpoint", Reason: fmt.Sprintf("%q is not an http(s) URL", c.Endpoint)})
	}
	return nil
}

// Local reports whether the endpoint is a local emulator rather than AWS.
func (c Config) Local() bool { return c.Endpoint != AWSEndpoint }

// AWSConfig resolves the aws.Config shared by both clients.
func AWSConfig(ctx context.Context, cfg Config) (aws.Config, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return aws.Config{}, err
	}
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = cfg.MaxConns
		t.MaxIdleConnsPerHost = cfg.MaxConns
		t.IdleConnTimeout = 90 * time.Second
	})
	opts := []func(*config.LoadOptions) error{config.WithHTTPClient(httpClient)}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.Local() {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider("local", "local", "")))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("dynamoclient: load AWS config: %w", err)
	}
	if cfg.RoleARN != "" {
		stsClient := sts.NewFromConfig(awsCfg, func(o *sts.Options) {
			if cfg.STSEndpoint != "" {
				o.BaseEndpoint = aws.String(cfg.STSEndpoint)
			}
		})
		awsCfg.Credentials = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(stsClient, cfg.RoleARN,
			func(o *stscreds.AssumeRoleOptions) { o.RoleSessionName = cfg.RoleSessionName }))
	}
	return awsCfg, nil
}

// New returns a DynamoDB client for cfg; optFns adjust the client options
// after ours (e.g. a retry policy).
func New(ctx context.Context, cfg Config, optFns ...func(*dynamodb.Options)) (*dynamodb.Client, error) {
	awsCfg, err := AWSConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
		if cfg.Local() {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
			o.DisableValidateResponseChecksum = true
		}
	}, func(o *dynamodb.Options) {
		for _, fn := range optFns {
			fn(o)
		}
	}), nil
}

// NewStreams returns a DynamoDB Streams client for cfg; optFns adjust the
// client options after ours.
func NewStreams(ctx context.Context, cfg Config, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.Client, error) {
	awsCfg, err := AWSConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return dynamodbstreams.NewFromConfig(awsCfg, func(o *dynamodbstreams.Options) {
		if cfg.Local() {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
	}, func(o *dynamodbstreams.Options) {
		for _, fn := range optFns {
			fn(o)
		}
	}), nil
}
