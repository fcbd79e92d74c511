package eventpipe

import (
	"context"
	"log/slog"

	"github.com/eventpipe/eventpipe/analytics"

	ddbstore "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	"github.com/eventpipe/eventpipe/internal/dynamoclient"
	"github.com/eventpipe/eventpipe/internal/endpoints"
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
func processDefaults(catalog **Catalog, ep *Endpoints, logger **slog.Logger) {
	if *catalog == nil {
		*catalog = Builtin()
	}
	*ep = ep.Fill()
	if *logger == nil {
		*logger = slog.Default()
	}
}

// OpenStore connects to the events table of ep (DynamoDB Local, or AWS
// when ep.DynamoDB is "aws") with c's schema: the event types of its
// domains and its upcasters. logger may be nil (slog's default).
func OpenStore(ctx context.Context, ep Endpoints, c *Catalog, logger *slog.Logger) (*ddbstore.Store, error) {
	client, err := dynamoclient.New(ctx, dynamoclient.Config{Endpoint: ep.DynamoDB})
	if err != nil {
		return nil, err
	}
	return ddbstore.New(ddbstore.Config{Client: client, Table: ep.EventsTable, Schema: c.Schema(), Logger: logger})
}

// OpenAnalytics connects to the analytics table of ep (seed 001's raw
// events, sessions and aggregations; see package analytics). logger may
// be nil (slog's default).
func OpenAnalytics(ctx context.Context, ep Endpoints, logger *slog.Logger) (*analytics.Store, error) {
	client, err := dynamoclient.New(ctx, dynamoclient.Config{Endpoint: ep.DynamoDB})
	if err != nil {
		return nil, err
	}
	return analytics.New(analytics.Config{Client: client, Table: ep.AnalyticsTable, Logger: logger})
}
