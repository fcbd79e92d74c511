package main

import (
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe"
)

func serveCommand() *cobra.Command {
	var group string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the command handlers (one consumer group) and the HTTP API",
		Long: `serve consumes every commands topic, runs each command through its handler
against the DynamoDB event store and publishes the result on commands.replies.
It also serves the HTTP API (the todo resource, /healthz, /metrics) on
EVENTPIPE_HTTP_ADDR. It stops gracefully on SIGINT/SIGTERM.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			svc, err := eventpipe.NewWriteSide(cmd.Context(), eventpipe.WriteSideConfig{Catalog: catalog, ConsumerGroup: group, Logger: slog.Default()})
			if err != nil {
				return err
			}
			defer svc.Close()
			slog.Info("serving", "http", svc.Endpoints().HTTPAddr, "commands", svc.Dispatcher.Topics(), "group", group)
			return svc.Run(cmd.Context())
		},
	}
	addTracingFlag(cmd)
	cmd.Flags().StringVar(&group, "group", eventpipe.DefaultCommandGroup, "consumer group of the command handlers")
	return cmd
}
