package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/internal/probe"
)

func migrateCommand() *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or check the storage: the DynamoDB events, lease, analytics and keys tables, the Postgres read models and the Elasticsearch indices (idempotent)",
		Long: `migrate creates or checks the storage, idempotently: the DynamoDB events, lease,
analytics and keys tables, eventpipe's Postgres tables (and those of every read model
that brings its own migrations) and an Elasticsearch index behind each search
model's alias.

The Postgres tables go to the schema that the search_path parameter of
EVENTPIPE_POSTGRES_URL names (default public), for example
...?sslmode=disable&search_path=tenant_a; the schema must exist. Every other
subcommand reads the same URL, so they all use that schema.

With --wait, migrate first waits up to that long for every service the
pipeline uses (DynamoDB, Kafka, Postgres, Elasticsearch) to answer, so that
a compose file or a job can start it with the services.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ep := eventpipe.EndpointsFromEnv()
			if wait > 0 {
				if err := awaitServices(cmd.Context(), ep, wait); err != nil {
					return fmt.Errorf("migrate: %w", err)
				}
			}
			m, err := eventpipe.Migrate(cmd.Context(), eventpipe.MigrateConfig{Process: eventpipe.Process{Catalog: catalog, Endpoints: ep}})
			if err != nil {
				return err
			}
			// URLs are printed with their passwords masked.
			dynamo, _ := endpoints.Redact(ep.DynamoDB)
			es, _ := endpoints.Redact(ep.Elasticsearch)
			fmt.Fprintf(cmd.OutOrStdout(), "dynamodb tables %s, %s, %s and %s ready at %s\n", m.EventsTable, m.LeasesTable, m.AnalyticsTable, m.KeysTable, dynamo)
			switch {
			case m.KMSKeyCreated:
				fmt.Fprintf(cmd.OutOrStdout(), "kms key %s created as %s at %s (wraps the data subjects' keys)\n", m.KMSKey, ep.KMSKeyID, ep.KMS)
			case m.KMSKey != "":
				fmt.Fprintf(cmd.OutOrStdout(), "kms key %s (%s) ready at %s (wraps the data subjects' keys)\n", m.KMSKey, ep.KMSKeyID, ep.KMS)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "postgres schema %s at version %d (read models, projection positions)\n", m.PostgresSchema, m.PostgresVersion)
			for _, alias := range slices.Sorted(maps.Keys(m.SearchIndices)) {
				fmt.Fprintf(cmd.OutOrStdout(), "elasticsearch alias %s on index %s at %s\n", alias, m.SearchIndices[alias], es)
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 0, "first wait up to this long for DynamoDB, KMS, Kafka, Postgres and Elasticsearch to answer (0: do not wait)")
	return cmd
}

// awaitServices waits until each service of ep answers a probe
// (internal/probe), asking again every second, for at most limit. The
// error names the services that never answered and why.
func awaitServices(ctx context.Context, ep endpoints.Endpoints, limit time.Duration) error {
	if err := ep.Err(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	checks := map[string]func(context.Context) error{
		"dynamodb": func(ctx context.Context) error { return probe.DynamoDB(ctx, ep.DynamoDB) },
		"kms":      func(ctx context.Context) error { return probe.KMS(ctx, ep.KMS) },
		"kafka":    func(ctx context.Context) error { return probe.Kafka(ctx, ep.KafkaBrokers, ep.Kafka) },
		"postgres": func(ctx context.Context) error { return probe.Postgres(ctx, ep.Postgres) },
		"elasticsearch": func(ctx context.Context) error {
			return probe.Elasticsearch(ctx, ep.Elasticsearch, ep.ElasticsearchSecurity)
		},
	}
	waiting := map[string]error{}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		for _, name := range slices.Sorted(maps.Keys(checks)) {
			pctx, pcancel := context.WithTimeout(ctx, probe.DefaultTimeout)
			err := checks[name](pctx)
			pcancel()
			if err == nil {
				if _, was := waiting[name]; was {
					slog.Info("migrate: service answers", "service", name)
				}
				delete(checks, name)
				delete(waiting, name)
				continue
			}
			prev, was := waiting[name]
			if !was {
				slog.Info("migrate: waiting for a service", "service", name, "err", err)
			}
			var netErr net.Error
			timedOut := errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout())
			if !was || prev == nil || !timedOut {
				waiting[name] = err // a time-out says less than the refusal before it
			}
		}
		if len(checks) == 0 {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			var errs []error
			for _, name := range slices.Sorted(maps.Keys(waiting)) {
				errs = append(errs, waiting[name]) // each names its service
			}
			return fmt.Errorf("services not answering after --wait %s: %w", limit, errors.Join(errs...))
		}
	}
}
