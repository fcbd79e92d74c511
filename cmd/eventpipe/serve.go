package main

import (
	"cmp"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe"
)

func serveCommand() *cobra.Command {
	var group, operatorAddr string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the command handlers (one consumer group) and the HTTP API",
		Long: `serve consumes every commands topic, runs each command through its handler
against the DynamoDB event store and publishes the result on commands.replies.
It also serves the HTTP API (the todo, orders and analytics resources,
/healthz) on EVENTPIPE_HTTP_ADDR, and the operator surface (/metrics, the
status page /status and /status.json) on the same listener, or on its own
with --operator-addr (EVENTPIPE_OPERATOR_ADDR): set it in production, on
loopback or a private network, so that the API's listener serves only the
API. It stops gracefully on SIGINT/SIGTERM.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("operator-addr") {
				operatorAddr = os.Getenv(envOperatorAddr)
			}
			svc, err := eventpipe.NewWriteSide(cmd.Context(), eventpipe.WriteSideConfig{Catalog: catalog, ConsumerGroup: group,
				OperatorAddr: operatorAddr, Logger: slog.Default()})
			if err != nil {
				return err
			}
			defer svc.Close()
			slog.Info("serving", "http", svc.Endpoints().HTTPAddr, "operator", cmp.Or(operatorAddr, svc.Endpoints().HTTPAddr),
				"commands", svc.Dispatcher.Topics(), "group", group)
			return svc.Run(cmd.Context())
		},
	}
	addTracingFlag(cmd)
	cmd.Flags().StringVar(&group, "group", eventpipe.DefaultCommandGroup, "consumer group of the command handlers")
	cmd.Flags().StringVar(&operatorAddr, "operator-addr", "", "serve /metrics, /status and /status.json here instead of on the API's listener (default $"+envOperatorAddr+"; empty: the API's listener)")
	return cmd
}

// envOperatorAddr is serve's --operator-addr default.
const envOperatorAddr = "EVENTPIPE_OPERATOR_ADDR"

