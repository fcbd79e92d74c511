package eventpipe

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe/eventstore"
	pgmigrate "github.com/eventpipe/eventpipe/migrations/postgres"
	"github.com/eventpipe/eventpipe/tlsconfig"
)

// DefaultPostgresSchema is the Postgres schema of the read models when
// the Postgres URL has no search_path parameter.
const DefaultPostgresSchema = pgmigrate.DefaultSchema

// maxPostgresIdent is Postgres' identifier limit in bytes: a longer name
// is cut, silently, to its first 63 bytes.
const maxPostgresIdent = 63

// PostgresSchema returns the Postgres schema that every eventpipe process
// given ep keeps its tables in (read models, projection positions, parked
// events, sagas' state): the search_path parameter of ep.Postgres
// (EVENTPIPE_POSTGRES_URL, e.g.
// postgres://eventpipe@127.0.0.1:5433/eventpipe?sslmode=disable&search_path=tenant_a),
// or DefaultPostgresSchema when the URL has none. It is the one way to pick
// the schema: Migrate, NewConsumers, NewWriteSide, the parked events and
// the operator's tools (package operator: Replay, Status) all use it,
// through OpenPostgres.
//
// The search_path must name exactly one schema, as Postgres reads it: an
// unquoted name is folded to lower case, a double-quoted one ("Tenant A",
// %22Tenant%20A%22 in a URL) is kept as it is. A list of schemas, $user, a
// name longer than 63 bytes, an unparsable URL or a search_path set through
// the options parameter is a *eventstore.ValidationError (wrapped). An empty
// ep.Postgres is filled first, as every Config does (Endpoints.Fill).
func PostgresSchema(ep Endpoints) (string, error) {
	_, schema, err := postgresConfig(ep)
	return schema, err
}

// OpenPostgres returns a pool on ep.Postgres whose connections see exactly
// one schema, PostgresSchema(ep): their search_path is set to it at
// connect time, so every table eventpipe creates, reads and writes
// without a schema is that schema's, and a table missing there is an
// error rather than another schema's table. It does not connect: a
// Postgres that is down fails the first query, not OpenPostgres. The
// caller closes the pool. Every eventpipe process that opens a pool on the
// read models' database opens it here.
func OpenPostgres(ctx context.Context, ep Endpoints) (*pgxpool.Pool, error) {
	cfg, _, err := postgresConfig(ep)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres pool: %w", err)
	}
	return pool, nil
}

// postgresConfig parses ep.Postgres into a pool configuration whose
// search_path is its one schema, and returns the schema.
func postgresConfig(ep Endpoints) (*pgxpool.Config, string, error) {
	if ep.Postgres == "" {
		ep = ep.Fill()
	}
	cfg, err := pgxpool.ParseConfig(ep.Postgres)
	if err != nil {
		// pgx's message quotes the URL with its password redacted.
		return nil, "", fmt.Errorf("postgres url: %w", &eventstore.ValidationError{Field: "Endpoints.Postgres", Reason: err.Error()})
	}
	if err := refuseCleartextPassword(cfg.ConnConfig.Config, ep.AllowCleartextCredentials); err != nil {
		return nil, "", fmt.Errorf("postgres url: %w", err)
	}
	params := cfg.ConnConfig.RuntimeParams
	if strings.Contains(params["options"], "search_path") {
		return nil, "", fmt.Errorf("postgres url: %w", &eventstore.ValidationError{Field: "Endpoints.Postgres",
			Reason: "sets search_path through the options parameter; name the schema with the search_path parameter instead"})
	}
	schema, err := parseSearchPath(params["search_path"])
	if err != nil {
		return nil, "", fmt.Errorf("postgres url: %w", err)
	}
	params["search_path"] = pgx.Identifier{schema}.Sanitize()
	return cfg, schema, nil
}

// refuseCleartextPassword refuses a password (from the URL, PGPASSWORD
// or a passfile) that a connection of cfg could send without TLS to a
// host that is not loopback: sslmode disable, or allow or prefer, whose
// plain-text fallback an attacker on the path can force. Unless allow
// (Endpoints.AllowCleartextCredentials).
func refuseCleartextPassword(cfg pgconn.Config, allow bool) error {
	if cfg.Password == "" {
		return nil
	}
	tried := []*pgconn.FallbackConfig{{Host: cfg.Host, Port: cfg.Port, TLSConfig: cfg.TLSConfig}}
	for _, f := range append(tried, cfg.Fallbacks...) {
		if f.TLSConfig != nil {
			continue
		}
		if err := tlsconfig.RefuseCleartext("Endpoints.Postgres", "the password could go without TLS",
			"use sslmode=require, verify-ca or verify-full", []string{f.Host}, allow); err != nil {
			return err
		}
	}
	return nil
}

// parseSearchPath returns the one schema a search_path value names, as
// Postgres reads it, or DefaultPostgresSchema for an empty value.
func parseSearchPath(v string) (string, error) {
	invalid := func(format string, args ...any) error {
		return &eventstore.ValidationError{Field: "search_path", Reason: fmt.Sprintf(format, args...)}
	}
	var names []string
	rest := strings.TrimSpace(v)
	for rest != "" {
		var name string
		if rest[0] == '"' {
			var b strings.Builder
			i := 1
			for ; ; i++ {
				if i >= len(rest) {
					return "", invalid("%q has an unterminated quoted name", v)
				}
				if rest[i] == '"' {
					if i+1 < len(rest) && rest[i+1] == '"' {
						b.WriteByte('"')
						i++
						continue
					}
					break
				}
				b.WriteByte(rest[i])
			}
			name, rest = b.String(), strings.TrimSpace(rest[i+1:])
			if name == "" {
				return "", invalid("%q names an empty schema", v)
			}
		} else {
			end := strings.IndexByte(rest, ',')
			if end < 0 {
				end = len(rest)
			}
			raw := strings.TrimSpace(rest[:end])
			if raw == "$user" {
				return "", invalid("%q names $user; name the schema itself", v)
			}
			for i, r := range raw {
				letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '_'
				if !letter && (i == 0 || !(r >= '0' && r <= '9' || r == '$')) {
					return "", invalid("%q: %q is not a plain schema name; double-quote it (%%22…%%22 in a URL)", v, raw)
				}
			}
			name, rest = strings.ToLower(raw), rest[end:]
		}
		if len(name) > maxPostgresIdent {
			return "", invalid("schema %q is longer than Postgres' 63-byte identifier limit", name)
		}
		names = append(names, name)
		if rest == "" {
			break
		}
		if rest[0] != ',' {
			return "", invalid("%q: expected a comma after %q", v, name)
		}
		if rest = strings.TrimSpace(rest[1:]); rest == "" {
			return "", invalid("%q ends with a comma", v)
		}
	}
	switch len(names) {
	case 0:
		return DefaultPostgresSchema, nil
	case 1:
		return names[0], nil
	}
	return "", invalid("%q names %d schemas; eventpipe keeps its tables in one: name only that one", v, len(names))
}

// ReadModelDB returns db and the schema its connections use
// (current_schema()), or, when db is nil, a pool OpenPostgres opens on ep
// and its schema (PostgresSchema); closeDB closes what was opened here.
// Migrate and operator.Replay take the read models' database with it.
func ReadModelDB(ctx context.Context, db *pgxpool.Pool, ep Endpoints) (_ *pgxpool.Pool, schema string, closeDB func(), err error) {
	if db == nil {
		if schema, err = PostgresSchema(ep); err != nil {
			return nil, "", nil, err
		}
		if db, err = OpenPostgres(ctx, ep); err != nil {
			return nil, "", nil, err
		}
		return db, schema, db.Close, nil
	}
	var current *string
	if err := db.QueryRow(ctx, `SELECT current_schema()`).Scan(&current); err != nil {
		return nil, "", nil, fmt.Errorf("postgres: current schema: %w", err)
	}
	if current == nil {
		return nil, "", nil, errors.New("postgres: the search_path of the given pool names no existing schema")
	}
	return db, *current, func() {}, nil
}
