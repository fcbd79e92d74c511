package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe/internal/dynamoclient"
	"github.com/eventpipe/eventpipe/internal/endpoints"
	migrate "github.com/eventpipe/eventpipe/migrations/dynamodb"
	pgmigrate "github.com/eventpipe/eventpipe/migrations/postgres"
)

func migrateCommand() *cobra.Command {
	var schema string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or check the storage: the DynamoDB events and lease tables and the Postgres read models (idempotent)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			ep := endpoints.FromEnv()
			db, err := dynamoclient.New(ctx, dynamoclient.Config{Endpoint: ep.DynamoDB})
			if err != nil {
				return err
			}
			if err := migrate.CreateEventsTable(ctx, db, ep.EventsTable); err != nil {
				return err
			}
			if err := migrate.CreateLeasesTable(ctx, db, ep.LeasesTable); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "dynamodb tables %s and %s ready at %s\n", ep.EventsTable, ep.LeasesTable, ep.DynamoDB)
			version, err := pgmigrate.Migrate(ctx, pgmigrate.Config{URL: ep.Postgres, Schema: schema})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "postgres schema %s at version %d (read models, projection positions)\n", schema, version)
			return nil
		},
	}
	cmd.Flags().StringVar(&schema, "postgres-schema", "public", "Postgres schema of the read models (must exist)")
	return cmd
}
