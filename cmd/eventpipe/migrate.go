package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe"
)

func migrateCommand() *cobra.Command {
	var schema string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or check the storage: the DynamoDB events and lease tables and the Postgres read models (idempotent)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ep := eventpipe.EndpointsFromEnv()
			m, err := eventpipe.Migrate(cmd.Context(), eventpipe.MigrateConfig{Catalog: catalog, Endpoints: ep, Schema: schema})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "dynamodb tables %s and %s ready at %s\n", m.EventsTable, m.LeasesTable, ep.DynamoDB)
			fmt.Fprintf(cmd.OutOrStdout(), "postgres schema %s at version %d (read models, projection positions)\n", m.PostgresSchema, m.PostgresVersion)
			return nil
		},
	}
	cmd.Flags().StringVar(&schema, "postgres-schema", "public", "Postgres schema of the read models (must exist)")
	return cmd
}
