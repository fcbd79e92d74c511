package main

import (
	"encoding/json"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/operator"
)

func exportCommand() *cobra.Command {
	var actor, reason string
	cmd := &cobra.Command{
		Use:   "export <subject>",
		Short: "Print everything held about a data subject, opened, as one JSON document",
		Long: `export prints what eventpipe holds about a data subject (GDPR article 15), as
one JSON document (docs/privacy.md): the subject's key scopes (the aggregates its
personal data is in), the events of those aggregates with their personal fields
opened, the rows the read models hold of them and the search models' documents.
A forgotten subject's fields read "[forgotten]". Each run is recorded in
Postgres (operator_actions): an export reads personal data.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := operator.ExportSubject(cmd.Context(), operator.ExportConfig{
				Process: eventpipe.Process{Catalog: catalog, Endpoints: eventpipe.EndpointsFromEnv(), Logger: slog.Default()},
				Subject: args[0], Actor: actor, Reason: reason,
			})
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(out)
		},
	}
	cmd.Flags().StringVar(&actor, "actor", operator.DefaultActor(), "who exports (recorded)")
	cmd.Flags().StringVar(&reason, "reason", "", "why, e.g. the request's reference (recorded)")
	return cmd
}
