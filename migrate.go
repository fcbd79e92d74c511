package eventpipe

import (
	"context"
	"fmt"

	"github.com/eventpipe/eventpipe/internal/dynamoclient"
	migrate "github.com/eventpipe/eventpipe/migrations/dynamodb"
	pgmigrate "github.com/eventpipe/eventpipe/migrations/postgres"
)

// Migrated says what Migrate made ready.
type Migrated struct {
	EventsTable, LeasesTable string // DynamoDB tables at Endpoints.DynamoDB
	PostgresSchema           string // "" for the search path's first schema
	PostgresVersion          int32  // the read-model schema's migration version
}

// Migrate creates or checks the storage of ep, idempotently: the DynamoDB
// events table (with its stream, index and TTL) and lease table, and the
// Postgres read-model tables and projection positions in schema (""
// for the connection's default). A table of another shape, or a database
// migrated by a newer eventpipe, is an error and left unchanged.
func Migrate(ctx context.Context, ep Endpoints, schema string) (Migrated, error) {
	out := Migrated{EventsTable: ep.EventsTable, LeasesTable: ep.LeasesTable, PostgresSchema: schema}
	db, err := dynamoclient.New(ctx, dynamoclient.Config{Endpoint: ep.DynamoDB})
	if err != nil {
		return out, err
	}
	if err := migrate.CreateEventsTable(ctx, db, ep.EventsTable); err != nil {
		return out, err
	}
	if err := migrate.CreateLeasesTable(ctx, db, ep.LeasesTable); err != nil {
		return out, err
	}
	version, err := pgmigrate.Migrate(ctx, pgmigrate.Config{URL: ep.Postgres, Schema: schema})
	if err != nil {
		return out, fmt.Errorf("migrate postgres: %w", err)
	}
	out.PostgresVersion = version
	return out, nil
}
