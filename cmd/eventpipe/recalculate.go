package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/operator"
)

func recalculateCommand() *cobra.Command {
	var all, reindex bool
	var after, actor, reason string
	var retries, workers int
	cmd := &cobra.Command{
		Use:   "recalculate <aggregate-type> [<id>] [--all [--after <id>]]",
		Short: "Recalculate aggregates' STATE items from their event logs through the domain's rules",
		Long: `recalculate folds an aggregate's stored events through its domain's rules (the
fold the command handlers write as the STATE item on every append) and rewrites
STATE when it differs, conditional on the aggregate's version not having moved
(a command handled meanwhile is never overwritten: the aggregate is read and
folded again). A STATE that is right is left as it is. No event is appended.

A log the rules reject is refused, naming the event, and nothing is written for
that aggregate. With --all the type's aggregates are listed from the events
table's by-type index a page at a time (no table scan) and --workers of them
recalculated at once; each line printed ends with the id, and a run that stops
says the id up to which all are done: run again with --after <id> to resume.
The first --all on a table indexes the aggregates last appended to before the
index existed (one table scan, recorded in the table; --reindex runs it again).
Each run is recorded in Postgres (operator_actions; 'eventpipe status' shows the
latest).`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := operator.RecalculateConfig{
				Process: eventpipe.Process{Catalog: catalog, Endpoints: eventpipe.EndpointsFromEnv(), Logger: slog.Default()}, Type: args[0], All: all, After: after,
				Actor: actor, Reason: reason, Retries: retries, Workers: workers, Reindex: reindex,
				Progress: func(r commands.Recalculation) {
					status := "unchanged"
					if r.Changed {
						status = "changed"
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%s\tversion %d\t%s\n", status, r.Version, r.Aggregate)
					if r.Changed && !all {
						fmt.Fprintf(cmd.OutOrStdout(), "was\t(seq %d) %s\nnow\t(seq %d) %s\n", r.WasSeq, orNone(r.Was, r.HadState), r.Version, r.Now)
					}
				},
			}
			if len(args) == 2 {
				cfg.ID = args[1]
			}
			res, err := operator.Recalculate(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d changed, %d unchanged", res.Changed, res.Unchanged)
			if all {
				fmt.Fprintf(cmd.OutOrStdout(), "; last id %q", res.Last)
			}
			if res.Indexed > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "; %d aggregates indexed", res.Indexed)
			}
			fmt.Fprintf(cmd.OutOrStdout(), " (operator action %d)\n", res.Action.ID)
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "every aggregate of the type, listed in id order from the by-type index")
	cmd.Flags().StringVar(&after, "after", "", "with --all: start after this id (the last id of a run that stopped)")
	cmd.Flags().IntVar(&workers, "workers", operator.DefaultRecalculateWorkers, "with --all: aggregates recalculated at once")
	cmd.Flags().BoolVar(&reindex, "reindex", false, "with --all: index the aggregates written before the by-type index again (a table scan)")
	cmd.Flags().IntVar(&retries, "retries", 3, "retries of one aggregate after a concurrent command moved its version")
	cmd.Flags().StringVar(&actor, "actor", operator.DefaultActor(), "who recalculates (recorded)")
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded)")
	return cmd
}

func orNone(b []byte, ok bool) string {
	if !ok {
		return "(no STATE item)"
	}
	return string(b)
}
