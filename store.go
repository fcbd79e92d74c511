package eventpipe

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/eventpipe/eventpipe/analytics"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/eventstore"
	ddbstore "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	"github.com/eventpipe/eventpipe/internal/dynamoclient"
	"github.com/eventpipe/eventpipe/internal/secretenv"
)

// Endpoints are the addresses and names every part of eventpipe agrees
// on: the DynamoDB endpoint and tables, the Kafka brokers and topic
// prefix, the Postgres URL, the HTTP address. EndpointsFromEnv reads them.
// Every Config that takes Endpoints fills each field left empty on its
// own, from the environment or its default (Endpoints.Fill): the fields
// that are set are kept.
type Endpoints = endpoints.Endpoints

// EndpointsFromEnv returns the endpoints from the environment
// (EVENTPIPE_DYNAMODB_ENDPOINT, EVENTPIPE_KAFKA_BROKERS, …), each
// defaulting to its loopback address or default name.
func EndpointsFromEnv() Endpoints { return endpoints.FromEnv() }

// processDefaults fills the fields every process Config shares: the
// built-in catalogue, each empty field of the endpoints from the
// environment (Endpoints.Fill), slog's default logger.
// It returns why the environment's security settings could not be read.
func processDefaults(catalog **Catalog, ep *Endpoints, logger **slog.Logger) error {
	if *catalog == nil {
		*catalog = Builtin()
	}
	*ep = ep.Fill()
	if *logger == nil {
		*logger = slog.Default()
	}
	return ep.Err()
}

// dynamoConfig is the DynamoDB client configuration of ep: its endpoint
// and the role to assume.
func dynamoConfig(ep Endpoints) dynamoclient.Config {
	return dynamoclient.Config{Endpoint: ep.DynamoDB, RoleARN: ep.AWSRoleARN}
}

// OpenDynamoDB returns a DynamoDB client of ep's endpoint (DynamoDB
// Local, or AWS when ep.DynamoDB is "aws", assuming ep.AWSRoleARN when
// set): the client OpenStore and OpenAnalytics read and write through.
func OpenDynamoDB(ctx context.Context, ep Endpoints) (*dynamodb.Client, error) {
	return dynamoclient.New(ctx, dynamoConfig(ep))
}

// storeOr returns given, or, when it is nil, the DynamoDB store of ep
// (OpenStore): a config's Store field, defaulted.
func storeOr(ctx context.Context, given eventstore.Store, ep Endpoints, c *Catalog, logger *slog.Logger) (eventstore.Store, error) {
	if given != nil {
		return given, nil
	}
	s, err := OpenStore(ctx, ep, c, logger)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// OpenStore connects to the events table of ep (DynamoDB Local, or AWS
// when ep.DynamoDB is "aws") with c's schema: the event types of its
// domains and its upcasters. logger may be nil (slog's default).
func OpenStore(ctx context.Context, ep Endpoints, c *Catalog, logger *slog.Logger) (*ddbstore.Store, error) {
	client, err := dynamoclient.New(ctx, dynamoConfig(ep))
	if err != nil {
		return nil, err
	}
	return ddbstore.New(ddbstore.Config{Client: client, Table: ep.EventsTable, Schema: c.Schema(), Logger: logger})
}

// OpenAnalytics connects to the analytics table of ep (seed 001's raw
// events, sessions and aggregations; see package analytics). logger may
// be nil (slog's default).
func OpenAnalytics(ctx context.Context, ep Endpoints, logger *slog.Logger) (*analytics.Store, error) {
	client, err := dynamoclient.New(ctx, dynamoConfig(ep))
	if err != nil {
		return nil, err
	}
	return analytics.New(analytics.Config{Client: client, Table: ep.AnalyticsTable, Logger: logger})
}

// Environment variables of the deployment's command key (see
// WriteSideConfig.CommandKey): a file holding it (preferred: it stays out
// of the process list and the environment of children), or the key
// itself.
const (
	EnvCommandKey     = "EVENTPIPE_COMMAND_KEY"
	EnvCommandKeyFile = EnvCommandKey + secretenv.FileSuffix
)

// CommandKeyFromEnv returns the command key of EVENTPIPE_COMMAND_KEY_FILE
// (the file's contents, surrounding white space trimmed) or
// EVENTPIPE_COMMAND_KEY, nil when neither is set. A key shorter than
// commands.MinKeyLength bytes, or both variables set, is an
// *eventstore.ValidationError. Generate one with `openssl rand -hex 32`.
func CommandKeyFromEnv() ([]byte, error) {
	key, err := secretenv.Lookup(os.LookupEnv, EnvCommandKey)
	if err != nil {
		return nil, fmt.Errorf("command key: %w", err)
	}
	if key == "" {
		return nil, nil
	}
	if len(key) < commands.MinKeyLength {
		return nil, &eventstore.ValidationError{Field: "command key", Reason: fmt.Sprintf("has %d bytes, want at least %d (openssl rand -hex 32)", len(key), commands.MinKeyLength)}
	}
	return []byte(key), nil
}
