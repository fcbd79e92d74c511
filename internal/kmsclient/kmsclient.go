// Package kmsclient builds AWS KMS clients for a configured endpoint: the
// local stack's KMS (dev/kmsserver; static dummy credentials, as for
// DynamoDB Local) or AWS KMS itself (the SDK's default credential chain,
// optionally a role assumed through STS on top). The AWS configuration is
// dynamoclient's (dynamoclient.AWSConfig), so DynamoDB and KMS clients
// resolve credentials, region and role the same way. Clients are safe for
// concurrent use.
package kmsclient

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/internal/dynamoclient"
)

// AWSEndpoint is the Endpoint value that selects AWS KMS.
const AWSEndpoint = dynamoclient.AWSEndpoint

// Config selects the KMS endpoint.
type Config struct {
	// Endpoint is the base URL of a local KMS (e.g. http://127.0.0.1:8100)
	// or AWSEndpoint for AWS KMS.
	Endpoint string
	// Region defaults to us-east-1 for a local endpoint; for AWS the
	// SDK's usual resolution applies when empty.
	Region string
	// RoleARN, when set, is an IAM role assumed through STS with the
	// default chain's credentials; AWS only.
	RoleARN string
	// STSEndpoint overrides the STS endpoint the role is assumed at.
	STSEndpoint string
}

// Validate reports a missing or malformed endpoint or role.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("kmsclient: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch {
	case c.Endpoint == "":
		return bad("Endpoint", "is empty (want a URL such as http://127.0.0.1:8100, or %q)", AWSEndpoint)
	case c.Endpoint == AWSEndpoint:
		if c.RoleARN != "" && !strings.HasPrefix(c.RoleARN, "arn:") {
			return bad("RoleARN", "%q is not an ARN: want arn:aws:iam::<account>:role/<name>", c.RoleARN)
		}
		return nil
	case c.RoleARN != "":
		return bad("RoleARN", "with endpoint %s: a role is assumed only against AWS (endpoint %q); a local endpoint takes static credentials", c.Endpoint, AWSEndpoint)
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return bad("Endpoint", "%q is not an http(s) URL of a host (want e.g. http://127.0.0.1:8100, or %q)", c.Endpoint, AWSEndpoint)
	}
	return nil
}

// ValidateKeyID reports a KMS key id that AWS KMS would not take as the
// key of GenerateDataKey: empty, or not a key id, a key ARN, an alias
// name ("alias/...") or an alias ARN.
func ValidateKeyID(id string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("kmsclient: %w", &eventstore.ValidationError{Field: "KeyID", Reason: fmt.Sprintf(format, args...)})
	}
	switch {
	case id == "":
		return bad("is empty (want a key id, a key ARN, alias/<name> or an alias ARN)")
	case strings.TrimSpace(id) != id || strings.ContainsAny(id, " \t\n"):
		return bad("%q holds white space", id)
	case id == "alias/" || strings.HasPrefix(id, "alias/aws/"):
		return bad("%q: an alias needs a name, and alias/aws/ names AWS managed keys, which cannot wrap data keys of your own", id)
	case strings.HasPrefix(id, "alias/"):
		return nil
	case strings.HasPrefix(id, "arn:"):
		if parts := strings.SplitN(id, ":", 6); len(parts) != 6 || parts[2] != "kms" ||
			!(strings.HasPrefix(parts[5], "key/") || strings.HasPrefix(parts[5], "alias/")) {
			return bad("%q is not a KMS key or alias ARN (arn:aws:kms:<region>:<account>:key/<id> or …:alias/<name>)", id)
		}
		return nil
	case strings.ContainsAny(id, "/:"):
		return bad("%q is neither a key id, a key ARN, alias/<name> nor an alias ARN", id)
	}
	return nil
}

// New returns a KMS client for cfg; optFns adjust the client options
// after ours (e.g. a retry policy).
func New(ctx context.Context, cfg Config, optFns ...func(*kms.Options)) (*kms.Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	awsCfg, err := dynamoclient.AWSConfig(ctx, dynamoclient.Config{
		Endpoint: cfg.Endpoint, Region: cfg.Region, RoleARN: cfg.RoleARN, STSEndpoint: cfg.STSEndpoint,
	})
	if err != nil {
		return nil, err
	}
	local := cfg.Endpoint != AWSEndpoint
	return kms.NewFromConfig(awsCfg, func(o *kms.Options) {
		if local {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
	}, func(o *kms.Options) {
		for _, fn := range optFns {
			fn(o)
		}
	}), nil
}
