package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe/internal/dynamoclient"
	"github.com/eventpipe/eventpipe/internal/endpoints"
	migrate "github.com/eventpipe/eventpipe/migrations/dynamodb"
)

func migrateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Create or check the storage: the DynamoDB events and relay lease tables (idempotent)",
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
			return nil
		},
	}
}
