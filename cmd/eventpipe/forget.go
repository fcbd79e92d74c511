package main

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/operator"
)

func forgetCommand() *cobra.Command {
	var actor, reason string
	cmd := &cobra.Command{
		Use:   "forget <subject>",
		Short: "Forget a data subject: erase its keys, so none of its personal data opens again, and scrub the read models",
		Long: `forget erases a data subject's personal data (GDPR article 17) by
crypto-shredding (docs/privacy.md): it deletes the subject's data keys from the
keys table, so that none of its sealed values, in the events table, its
snapshots, on Kafka or in backups of them, opens again, and nothing new can be
written for it; then it records the fact, SubjectForgotten, on the subject's
aggregate (subject/<id>), from which every read model scrubs the subject's data
(its fields read "[forgotten]"). Commands on its aggregates are refused from then
on. It cannot be undone.

Forgetting a subject again finishes an interrupted forgetting, or says when it
was forgotten. Each run is recorded in Postgres (operator_actions).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := operator.Forget(cmd.Context(), operator.ForgetConfig{
				Process: eventpipe.Process{Catalog: catalog, Endpoints: eventpipe.EndpointsFromEnv(), Logger: slog.Default()},
				Subject: args[0], Actor: actor, Reason: reason,
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if res.Before {
				fmt.Fprintf(out, "subject %s was forgotten before: %s (operator action %d)\n", args[0], res.Command.Reason, res.Action.ID)
				return nil
			}
			fmt.Fprintf(out, "subject %s forgotten at %s: %d keys erased; its scopes: %s (operator action %d)\n",
				args[0], res.Fact.ForgottenAt.Format(time.RFC3339), res.Fact.Erased, orNoScope(res.Fact.Scopes), res.Action.ID)
			return nil
		},
	}
	cmd.Flags().StringVar(&actor, "actor", operator.DefaultActor(), "who forgets (recorded)")
	cmd.Flags().StringVar(&reason, "reason", "", "why, e.g. the request's reference (recorded, and in the SubjectForgotten fact)")
	return cmd
}

func orNoScope(scopes []string) string {
	if len(scopes) == 0 {
		return "none (nothing of it was sealed)"
	}
	return strings.Join(scopes, ", ")
}
