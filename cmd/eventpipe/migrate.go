package main

import (
	"fmt"
	"maps"
	"slices"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe"
)

func migrateCommand() *cobra.Command {
	var schema string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or check the storage: the DynamoDB events, lease and analytics tables, the Postgres read models and the Elasticsearch indices (idempotent)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ep := eventpipe.EndpointsFromEnv()
			m, err := eventpipe.Migrate(cmd.Context(), eventpipe.MigrateConfig{Catalog: catalog, Endpoints: ep, Schema: schema})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "dynamodb tables %s, %s and %s ready at %s\n", m.EventsTable, m.LeasesTable, m.AnalyticsTable, ep.DynamoDB)
			fmt.Fprintf(cmd.OutOrStdout(), "postgres schema %s at version %d (read models, projection positions)\n", m.PostgresSchema, m.PostgresVersion)
			for _, alias := range slices.Sorted(maps.Keys(m.SearchIndices)) {
				fmt.Fprintf(cmd.OutOrStdout(), "elasticsearch alias %s on index %s at %s\n", alias, m.SearchIndices[alias], ep.Elasticsearch)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&schema, "postgres-schema", "public", "Postgres schema of the read models (must exist)")
	return cmd
}
