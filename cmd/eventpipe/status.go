package main

import (
	"errors"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe"
)

func statusCommand() *cobra.Command {
	var group string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "One screen: the stack, each relay stream's leases, every consumer group's position and lag, poisoned messages",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			s, err := newStack(cmd)
			if err != nil {
				return err
			}
			fmt.Fprintln(out, "STACK")
			stackErr := printStatus(cmd, s)
			r := eventpipe.Status(cmd.Context(), eventpipe.StatusConfig{Catalog: catalog, CommandGroup: group})

			for _, rel := range r.Relays {
				fmt.Fprintf(out, "\nRELAY %s  ", rel.Name)
				if rel.Err != nil {
					fmt.Fprintf(out, "%d records on %s; could not read: %v\n", rel.Poisoned, rel.PoisonTopic, rel.Err)
					continue
				}
				fmt.Fprintf(out, "stream %s, %d leases, %d records on %s\n", dash(rel.Stream), len(rel.Leases), rel.Poisoned, rel.PoisonTopic)
				if len(rel.Leases) == 0 {
					continue
				}
				w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "SHARD\tOWNER\tCHECKPOINT\tFINISHED\tUPDATED")
				for _, l := range rel.Leases {
					fmt.Fprintf(w, "%s\t%s\t%s\t%v\t%s\n", l.ShardID, dash(l.Owner), dash(l.Checkpoint), l.Finished, l.UpdatedAt.Format(time.RFC3339))
				}
				_ = w.Flush()
			}

			fmt.Fprintln(out, "\nCONSUMER GROUPS")
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "GROUP\tTOPICS\tCOMMITTED\tNEWEST\tLAG\tPOISONED")
			for _, g := range r.Groups {
				fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\n", g.Group, len(g.Topics), g.Committed, g.Newest, g.Lag, g.Poisoned)
			}
			_ = w.Flush()
			for _, err := range r.Errors {
				if !slices.ContainsFunc(r.Relays, func(rel eventpipe.RelayStreamReport) bool { return rel.Err != nil && errors.Is(err, rel.Err) }) {
					fmt.Fprintln(out, "could not read:", err) // a relay stream's was printed in place
				}
			}
			fmt.Fprintf(out, "\n(read in %s)\n", r.Took.Round(time.Millisecond))
			if stackErr != nil {
				return stackErr
			}
			if len(r.Errors) > 0 {
				return fmt.Errorf("status: %d parts could not be read", len(r.Errors))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&group, "group", eventpipe.DefaultCommandGroup, "consumer group of the command handlers")
	return cmd
}
