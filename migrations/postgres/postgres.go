// Package postgres holds the read models' Postgres schema as numbered SQL
// migrations, applied and tracked by tern (github.com/jackc/tern/v2):
// each migration runs once, in its own transaction, and its number is
// recorded in a version table, so Migrate is idempotent and safe to run on
// every start. `eventpipe migrate` calls it.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/tern/v2/migrate"
)

//go:embed sql/*.sql
var files embed.FS

// VersionTable is where tern records the applied migration number of
// eventpipe's own migrations, in the target schema.
const VersionTable = "eventpipe_schema_version"

// Config says where to migrate, and what.
type Config struct {
	// URL is the pgx connection URL. Required.
	URL string
	// Schema is the Postgres schema the tables live in (default
	// "public"). It must exist.
	Schema string
	// Migrations are the numbered tern SQL files to apply (default:
	// eventpipe's own, Migrations()). A read model of a user's module
	// brings its own set, with its own VersionTable.
	Migrations fs.FS
	// VersionTable records how far Migrations were applied (default
	// VersionTable). Each set of migrations needs its own.
	VersionTable string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Schema == "" {
		c.Schema = "public"
	}
	if c.Migrations == nil {
		c.Migrations = Migrations()
	}
	if c.VersionTable == "" {
		c.VersionTable = VersionTable
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Migrations returns the embedded migration files (for inspection).
func Migrations() fs.FS {
	sub, err := fs.Sub(files, "sql")
	if err != nil {
		panic(err) // the embed pattern guarantees the folder
	}
	return sub
}

// Migrate applies every pending migration to cfg.Schema and returns the
// schema version afterwards. Migrations already applied are skipped; a
// database at a newer version than this binary knows is an error, never
// changed.
//
// It opens its own connection with search_path set at connect time: tern
// runs RESET ALL after each migration, which would undo a SET.
func Migrate(ctx context.Context, cfg Config) (int32, error) {
	cfg.setDefaults()
	if cfg.URL == "" {
		return 0, errors.New("migrate postgres: Config.URL is empty")
	}
	pc, err := pgx.ParseConfig(cfg.URL)
	if err != nil {
		return 0, fmt.Errorf("migrate postgres: %w", err)
	}
	pc.RuntimeParams["search_path"] = pgx.Identifier{cfg.Schema}.Sanitize()
	conn, err := pgx.ConnectConfig(ctx, pc)
	if err != nil {
		return 0, fmt.Errorf("migrate postgres: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", cfg.Schema).Scan(&exists); err != nil {
		return 0, fmt.Errorf("migrate postgres: %w", err)
	}
	if !exists {
		return 0, fmt.Errorf("migrate postgres: schema %q does not exist", cfg.Schema)
	}
	m, err := migrate.NewMigrator(ctx, conn, pgx.Identifier{cfg.Schema, cfg.VersionTable}.Sanitize())
	if err != nil {
		return 0, fmt.Errorf("migrate postgres: %w", err)
	}
	if err := m.LoadMigrations(cfg.Migrations); err != nil {
		return 0, fmt.Errorf("migrate postgres: load migrations: %w", err)
	}
	current, err := m.GetCurrentVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrate postgres: current version: %w", err)
	}
	known := int32(len(m.Migrations))
	if current > known {
		return current, fmt.Errorf("migrate postgres: %w: %s in schema %s is at version %d, this binary knows %d", ErrNewerSchema, cfg.VersionTable, cfg.Schema, current, known)
	}
	m.OnStart = func(seq int32, name, _, _ string) {
		cfg.Logger.InfoContext(ctx, "applying postgres migration", "schema", cfg.Schema, "set", cfg.VersionTable, "version", seq, "name", name)
	}
	if err := m.Migrate(ctx); err != nil {
		return 0, fmt.Errorf("migrate postgres: %w", err)
	}
	return known, nil
}

// ErrNewerSchema is returned when the database was migrated by a newer
// eventpipe than this one.
var ErrNewerSchema = errors.New("database schema is newer than this binary")
