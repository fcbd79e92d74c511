// Package postgres holds the read models' Postgres schema as numbered SQL
// migrations, applied and tracked by tern (github.com/jackc/tern/v2):
// each migration runs once, in its own transaction, and its number is
// recorded in a version table, so Migrate is idempotent and safe to run on
// every start. `eventpipe migrate` calls it.
package postgres

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/tern/v2/migrate"

	"github.com/eventpipe/eventpipe/eventstore"
)

//go:embed sql/*.sql
var files embed.FS

// VersionTable is where tern records the applied migration number of
// eventpipe's own migrations, in the target schema.
const VersionTable = "eventpipe_schema_version"

// ReadModelVersionTable is the version table of the migrations that read
// model name brings of its own (a projections.Migrator):
// eventpipe_schema_version_<name>. Postgres keeps only the first 63 bytes
// of a name, so that two long names sharing their first bytes would share
// one table; a name that would pass the limit is cut to a readable prefix
// and ends with _ and 12 hex digits of the SHA-256 of the whole name,
// making it unique per read model whatever its length. Names that fit are
// as they always were, so existing version tables are found again.
func ReadModelVersionTable(name string) string {
	full := VersionTable + "_" + name
	if len(full) <= maxIdent {
		return full
	}
	sum := sha256.Sum256([]byte(name))
	suffix := "_" + hex.EncodeToString(sum[:6])
	head := full[:maxIdent-len(suffix)]
	for !utf8.ValidString(head) { // do not cut a character in two
		head = head[:len(head)-1]
	}
	return head + suffix
}

// maxIdent is Postgres' identifier limit in bytes.
const maxIdent = 63

// Config says where to migrate, and what.
type Config struct {
	// URL is the pgx connection URL. Required unless ConnConfig is set.
	URL string
	// ConnConfig, when set, are the connection settings used instead of
	// URL's (for example those of a pool: pool.Config().ConnConfig); it
	// is copied, not changed.
	ConnConfig *pgx.ConnConfig
	// Schema is the Postgres schema the tables live in (default
	// DefaultSchema). It must exist.
	Schema string
	// Migrations are the numbered tern SQL files to apply (default:
	// eventpipe's own, Migrations()). A read model of a user's module
	// brings its own set, with its own VersionTable.
	Migrations fs.FS
	// VersionTable records how far Migrations were applied (default
	// VersionTable). Each set of migrations needs its own: a read model's
	// is ReadModelVersionTable(name). At most 63 bytes.
	VersionTable string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// DefaultSchema is the Postgres schema the tables live in when none is
// given.
const DefaultSchema = "public"

func (c *Config) setDefaults() {
	if c.Schema == "" {
		c.Schema = DefaultSchema
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

// Validate reports the first unusable field, as a
// *eventstore.ValidationError.
func (c Config) Validate() error {
	switch {
	case c.URL == "" && c.ConnConfig == nil:
		return &eventstore.ValidationError{Field: "URL", Reason: "is empty (and no ConnConfig is given)"}
	case len(c.Schema) > maxIdent:
		return &eventstore.ValidationError{Field: "Schema", Reason: fmt.Sprintf("%q is longer than Postgres' 63-byte identifier limit", c.Schema)}
	case len(c.VersionTable) > maxIdent:
		return &eventstore.ValidationError{Field: "VersionTable", Reason: fmt.Sprintf("%q is longer than Postgres' 63-byte identifier limit, "+
			"which would cut it to a name another set may share (see ReadModelVersionTable)", c.VersionTable)}
	}
	return nil
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
	if err := cfg.Validate(); err != nil {
		return 0, fmt.Errorf("migrate postgres: %w", err)
	}
	var pc *pgx.ConnConfig
	if cfg.ConnConfig != nil {
		pc = cfg.ConnConfig.Copy()
	} else {
		var err error
		if pc, err = pgx.ParseConfig(cfg.URL); err != nil {
			return 0, fmt.Errorf("migrate postgres: %w", err)
		}
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
