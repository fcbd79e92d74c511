package eventpipe_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/tlsconfig"
)

// TestPostgresPasswordWithoutTLSIsRefusedOffLoopback: a Postgres URL
// whose password could go without TLS (sslmode disable, allow, prefer)
// to a host that is not loopback is refused by PostgresSchema and
// OpenPostgres with an *eventstore.ValidationError naming
// Endpoints.Postgres and how to allow it; TLS, loopback, a Unix socket,
// no password or AllowCleartextCredentials pass.
func TestPostgresPasswordWithoutTLSIsRefusedOffLoopback(t *testing.T) {
	t.Setenv("PGPASSWORD", "")
	t.Setenv("PGPASSFILE", "/nonexistent")
	for url, refused := range map[string]bool{
		"postgres://u:secret@db.internal:5432/app?sslmode=disable":          true,
		"postgres://u:secret@db.internal:5432/app?sslmode=prefer":           true,
		"postgres://u:secret@db.internal:5432/app?sslmode=allow":            true,
		"postgres://u:secret@db.internal:5432/app":                          true, // pgx's default is prefer
		"postgres://u:secret@127.0.0.1,db.internal/app?sslmode=disable":     true,
		"postgres://u:secret@db.internal:5432/app?sslmode=require":          false,
		"postgres://u:secret@db.internal:5432/app?sslmode=verify-full":      false,
		"postgres://u:secret@127.0.0.1:5433/app?sslmode=disable":            false,
		"postgres://u:secret@localhost:5433/app?sslmode=disable":            false,
		"postgres://u:secret@[::1]:5433/app?sslmode=disable":                false,
		"postgres://u:secret@/app?host=/var/run/postgresql&sslmode=disable": false,
		"postgres://u@db.internal:5432/app?sslmode=disable":                 false,
	} {
		ep := eventpipe.Endpoints{Postgres: url}
		for name, err := range map[string]error{
			"PostgresSchema": func() error { _, err := eventpipe.PostgresSchema(ep); return err }(),
			"OpenPostgres": func() error {
				pool, err := eventpipe.OpenPostgres(context.Background(), ep)
				if err == nil {
					pool.Close()
				}
				return err
			}(),
		} {
			var ve *eventstore.ValidationError
			switch {
			case !refused && err != nil:
				t.Errorf("%s(%s): %v, want it accepted", name, url, err)
			case refused && (!errors.As(err, &ve) || ve.Field != "Endpoints.Postgres" || !strings.Contains(err.Error(), tlsconfig.EnvAllowCleartextCredentials)):
				t.Errorf("%s(%s): %v, want an *eventstore.ValidationError on Endpoints.Postgres naming %s", name, url, err, tlsconfig.EnvAllowCleartextCredentials)
			case refused && strings.Contains(err.Error(), "secret"):
				t.Errorf("%s(%s): the error carries the password: %v", name, url, err)
			}
		}
		if refused {
			if _, err := eventpipe.PostgresSchema(eventpipe.Endpoints{Postgres: url, AllowCleartextCredentials: true}); err != nil {
				t.Errorf("PostgresSchema(%s) with AllowCleartextCredentials: %v, want it accepted", url, err)
			}
		}
	}
	t.Setenv(tlsconfig.EnvAllowCleartextCredentials, "1")
	if ep := (eventpipe.Endpoints{}).Fill(); !ep.AllowCleartextCredentials || !ep.Kafka.AllowCleartextCredentials || !ep.ElasticsearchSecurity.AllowCleartextCredentials {
		t.Errorf("Fill with %s=1: Postgres %v, Kafka %v, Elasticsearch %v; want all allowed", tlsconfig.EnvAllowCleartextCredentials,
			ep.AllowCleartextCredentials, ep.Kafka.AllowCleartextCredentials, ep.ElasticsearchSecurity.AllowCleartextCredentials)
	}
}
