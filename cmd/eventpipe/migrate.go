package main

import (
	"fmt"
	"maps"
	"slices"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/endpoints"
)

func migrateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or check the storage: the DynamoDB events, lease and analytics tables, the Postgres read models and the Elasticsearch indices (idempotent)",
		Long: `migrate creates or checks the storage, idempotently: the DynamoDB events, lease
and analytics tables, eventpipe's Postgres tables (and those of every read model
that brings its own migrations) and an Elasticsearch index behind each search
model's alias.

The Postgres tables go to the schema that the search_path parameter of
EVENTPIPE_POSTGRES_URL names (default public), for example
...?sslmode=disable&search_path=tenant_a; the schema must exist. Every other
subcommand reads the same URL, so they all use that schema.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ep := eventpipe.EndpointsFromEnv()
			m, err := eventpipe.Migrate(cmd.Context(), eventpipe.MigrateConfig{Process: eventpipe.Process{Catalog: catalog, Endpoints: ep}})
			if err != nil {
				return err
			}
			// URLs are printed with their passwords masked.
			dynamo, _ := endpoints.Redact(ep.DynamoDB)
			es, _ := endpoints.Redact(ep.Elasticsearch)
			fmt.Fprintf(cmd.OutOrStdout(), "dynamodb tables %s, %s and %s ready at %s\n", m.EventsTable, m.LeasesTable, m.AnalyticsTable, dynamo)
			fmt.Fprintf(cmd.OutOrStdout(), "postgres schema %s at version %d (read models, projection positions)\n", m.PostgresSchema, m.PostgresVersion)
			for _, alias := range slices.Sorted(maps.Keys(m.SearchIndices)) {
				fmt.Fprintf(cmd.OutOrStdout(), "elasticsearch alias %s on index %s at %s\n", alias, m.SearchIndices[alias], es)
			}
			return nil
		},
	}
	return cmd
}
