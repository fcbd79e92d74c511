package streamsim

import (
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
)

// Client returns a DynamoDB Streams client pointed at the simulator
// (Start's URL): NewClient with the simulator's region. Note that by
// default the SDK retries LimitExceededException and InternalServerError
// itself (3 attempts, with back-off and a retry quota), which hides
// throttling from the caller.
func (s *Sim) Client(optFns ...func(*dynamodbstreams.Options)) *dynamodbstreams.Client {
	return NewClient(s.url, s.cfg.Region, optFns...)
}

// NewClient returns a DynamoDB Streams client for a simulator at url
// (Sim.URL) in region, for a process that has the address but not the
// Sim: static dummy credentials, up to 256 idle connections. optFns
// adjust it further, e.g. NoRetries.
func NewClient(url, region string, optFns ...func(*dynamodbstreams.Options)) *dynamodbstreams.Client {
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = 1024
		t.MaxIdleConnsPerHost = 256
	})
	return dynamodbstreams.New(dynamodbstreams.Options{
		Region:       region,
		BaseEndpoint: aws.String(url),
		Credentials:  credentials.NewStaticCredentialsProvider("streamsim", "streamsim", ""),
		HTTPClient:   httpClient,
	}, optFns...)
}

// NoRetries makes a client answer every error at once, without the
// SDK's retries: for seeing the raw LimitExceededException.
func NoRetries(o *dynamodbstreams.Options) {
	o.Retryer = aws.NopRetryer{}
}
