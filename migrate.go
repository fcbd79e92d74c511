package eventpipe

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe/projections/elastic/esclient"

	"github.com/eventpipe/eventpipe/internal/dynamoclient"
	"github.com/eventpipe/eventpipe/internal/kmsclient"
	migrate "github.com/eventpipe/eventpipe/migrations/dynamodb"
	kmskey "github.com/eventpipe/eventpipe/migrations/kms"
	pgmigrate "github.com/eventpipe/eventpipe/migrations/postgres"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/elastic"
)

// MigrateConfig configures Migrate.
type MigrateConfig struct {
	// Process: the catalogue (the read models whose own migrations, see
	// projections.Migrator, are applied too), the endpoints (DynamoDB,
	// the table names, Postgres, Elasticsearch) and the logger
	// (defaults: see Process). The search_path of Endpoints.Postgres
	// picks the Postgres schema (default "public"; see PostgresSchema),
	// which must exist.
	Process
	// DB, when set, is the read models' database, used instead of
	// OpenPostgres(Endpoints) and not closed by Migrate: the migrations go
	// to the schema its connections use (current_schema()), over one
	// connection Migrate opens with the pool's connection settings (the
	// migration tool resets the session after each migration, which a
	// pooled connection must not see).
	DB *pgxpool.Pool
	// Search, when set, is the search models' Elasticsearch, used instead
	// of a client of Endpoints.Elasticsearch.
	Search *esclient.Client
}

// Validate reports, as an *eventstore.ValidationError, the settings from
// the environment that could not be read and a table name DynamoDB
// refuses or two tables of one name, the defaults filled (as Migrate
// fills them).
func (c MigrateConfig) Validate() error {
	_ = c.FillProcess() // Process.Validate reports Endpoints.Err
	if err := c.Process.Validate(); err != nil {
		return err
	}
	ep := c.Endpoints
	tables := []struct{ field, name string }{
		{"Endpoints.EventsTable", ep.EventsTable}, {"Endpoints.LeasesTable", ep.LeasesTable}, {"Endpoints.AnalyticsTable", ep.AnalyticsTable},
		{"Endpoints.KeysTable", ep.KeysTable},
	}
	seen := map[string]string{}
	for _, t := range tables {
		if !validTableName(t.name) {
			return invalid(t.field, fmt.Sprintf("%q is not a DynamoDB table name (3–255 of [a-zA-Z0-9_.-])", t.name))
		}
		if other, ok := seen[t.name]; ok {
			return invalid(t.field, fmt.Sprintf("%q is %s too: each table needs its own", t.name, other))
		}
		seen[t.name] = t.field
	}
	return nil
}

// validTableName says whether DynamoDB takes name as a table name.
func validTableName(name string) bool {
	if len(name) < 3 || len(name) > 255 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// Migrated says what Migrate made ready.
type Migrated struct {
	EventsTable, LeasesTable string // DynamoDB tables at Endpoints.DynamoDB
	AnalyticsTable           string // the analytics table (package analytics), also at Endpoints.DynamoDB
	KeysTable                string // the data subjects' keys (package privacy), also at Endpoints.DynamoDB
	// KMSKey is the id of the KMS key of Endpoints.KMSKeyID, which wraps
	// the data subjects' keys ("" when no domain declares personal data);
	// KMSKeyCreated is set when Migrate created it (a local KMS only).
	KMSKey          string
	KMSKeyCreated   bool
	PostgresSchema  string // the schema of the Postgres tables (PostgresSchema, or MigrateConfig.DB's)
	PostgresVersion int32  // eventpipe's own read-model migrations
	// ReadModelVersions are the versions of the read models that bring
	// their own migrations, by name.
	ReadModelVersions map[string]int32
	// SearchIndices are the Elasticsearch indices behind the search
	// models' aliases, by alias.
	SearchIndices map[string]string
}

// Migrate creates or checks the storage, idempotently: the DynamoDB
// events table (with its stream, index and TTL), lease table, analytics
// table (with its stream, user index and TTL) and the data subjects'
// keys table (package privacy); when the catalogue declares personal
// data, the KMS key of Endpoints.KMSKeyID (created behind its alias on a
// local KMS, only checked on AWS KMS, where the operator makes it); and in the
// Postgres schema of the URL's search_path (PostgresSchema) the
// projection positions, the built-in read models' tables and
// the tables of every read model of the catalogue that brings its own
// migrations, and in Elasticsearch an index behind the alias of every
// search model that has none (an existing index is kept as it is: a
// search model whose mappings changed is rebuilt with operator.Replay, into
// a new index). A table of another shape, or a database migrated by a newer
// eventpipe (or a newer version of a read model), is an error and left
// unchanged.
func Migrate(ctx context.Context, cfg MigrateConfig) (Migrated, error) {
	_ = cfg.FillProcess() // Validate reports Endpoints.Err
	ep := cfg.Endpoints
	out := Migrated{EventsTable: ep.EventsTable, LeasesTable: ep.LeasesTable, AnalyticsTable: ep.AnalyticsTable, KeysTable: ep.KeysTable}
	if err := cfg.Validate(); err != nil {
		return out, fmt.Errorf("migrate: %w", err)
	}
	pg, schema, closePG, err := ReadModelDB(ctx, cfg.DB, ep)
	if err != nil {
		return out, fmt.Errorf("migrate: %w", err)
	}
	defer closePG()
	out.PostgresSchema = schema
	db, err := dynamoclient.New(ctx, dynamoConfig(ep))
	if err != nil {
		return out, err
	}
	if err := migrate.CreateEventsTable(ctx, db, ep.EventsTable); err != nil {
		return out, err
	}
	if err := migrate.CreateLeasesTable(ctx, db, ep.LeasesTable); err != nil {
		return out, err
	}
	if err := migrate.CreateAnalyticsTable(ctx, db, ep.AnalyticsTable); err != nil {
		return out, err
	}
	if err := migrate.CreateSubjectKeysTable(ctx, db, ep.KeysTable); err != nil {
		return out, err
	}
	if len(cfg.Catalog.Personal()) > 0 {
		if out.KMSKey, out.KMSKeyCreated, err = ensureKMSKey(ctx, ep); err != nil {
			return out, err
		}
	}
	var models []projections.Projection
	for _, name := range cfg.Catalog.ReadModelNames() {
		p, _ := cfg.Catalog.ReadModel(name)
		models = append(models, p)
	}
	out.PostgresVersion, out.ReadModelVersions, err = MigratePostgres(ctx, pg.Config().ConnConfig, schema, cfg.Logger, models...)
	if err != nil {
		return out, err
	}
	if names := cfg.Catalog.SearchModelNames(); len(names) > 0 {
		es := cfg.Search
		if es == nil {
			if es, err = esclient.NewClient(ep.Elasticsearch, ep.ElasticsearchSecurity); err != nil {
				return out, err
			}
		}
		out.SearchIndices = map[string]string{}
		for _, name := range names {
			p, _ := cfg.Catalog.SearchModel(name)
			alias := elastic.Alias(ep.TopicPrefix, name)
			if err := elastic.EnsureIndex(ctx, es, p, alias); err != nil {
				return out, err
			}
			if out.SearchIndices[alias], err = elastic.AliasTarget(ctx, es, alias); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// MigratePostgres applies eventpipe's own migrations to schema, then the
// migrations of every model that brings its own (projections.Migrator),
// each set with its own version table (pgmigrate.ReadModelVersionTable),
// over a connection of conn's settings: Migrate's Postgres part. It
// returns eventpipe's version and each model's. operator.Replay calls it
// for the live schema and the shadow schema of the model it rebuilds.
func MigratePostgres(ctx context.Context, conn *pgx.ConnConfig, schema string, logger *slog.Logger, models ...projections.Projection) (int32, map[string]int32, error) {
	version, err := pgmigrate.Migrate(ctx, pgmigrate.Config{ConnConfig: conn, Schema: schema, Logger: logger})
	if err != nil {
		return 0, nil, err
	}
	versions := map[string]int32{}
	for _, p := range models {
		m, ok := p.(projections.Migrator)
		if !ok {
			continue
		}
		v, err := pgmigrate.Migrate(ctx, pgmigrate.Config{ConnConfig: conn, Schema: schema, Migrations: m.Migrations(),
			VersionTable: pgmigrate.ReadModelVersionTable(p.Name()), Logger: logger})
		if err != nil {
			return version, versions, fmt.Errorf("read model %s: %w", p.Name(), err)
		}
		versions[p.Name()] = v
	}
	return version, versions, nil
}

// ensureKMSKey makes sure ep.KMSKeyID names a key of ep's KMS: created
// behind its alias on a local KMS, only checked on AWS KMS.
func ensureKMSKey(ctx context.Context, ep Endpoints) (id string, created bool, err error) {
	if err := ep.ValidateKMS(); err != nil {
		return "", false, err
	}
	client, err := kmsclient.New(ctx, ep.KMSClient())
	if err != nil {
		return "", false, err
	}
	key, err := kmskey.EnsureKey(ctx, client, ep.KMSKeyID, ep.KMS != kmsclient.AWSEndpoint)
	if err != nil {
		return "", false, fmt.Errorf("migrate: %w", err)
	}
	return key.ID, key.Created, nil
}
