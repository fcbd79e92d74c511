package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/buildinfo"
	"github.com/eventpipe/eventpipe/operator"
)

func statusCommand() *cobra.Command {
	var group string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "One screen: the stack, each relay stream's leases, every consumer group's position and lag, poisoned messages, parked events, sagas",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			s, err := newStack(cmd)
			if err != nil {
				return err
			}
			fmt.Fprintln(out, "BUILD", buildinfo.Read()) // this binary's; a running process shows its own on /status and in eventpipe_build_info
			fmt.Fprintln(out, "\nSTACK")
			stackErr := printStatus(cmd, s)
			r := operator.Status(cmd.Context(), operator.StatusConfig{Process: eventpipe.Process{Catalog: catalog}, CommandGroup: group})

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
			fmt.Fprintln(w, "GROUP\tKIND\tTOPICS\tCOMMITTED\tNEWEST\tLAG\tPOISONED\tPARKED")
			for _, g := range r.Groups {
				kind := string(g.Kind)
				if g.Consumer == "" {
					kind = "commands"
				}
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", g.Group, kind, len(g.Topics), g.Committed, g.Newest, g.Lag, g.Poisoned, parkedCell(g, r.ParkedErr))
			}
			_ = w.Flush()
			printDefinitions(out, r)
			if len(r.Sagas) > 0 {
				fmt.Fprintln(out, "\nSAGAS")
				w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "SAGA\tRUNNING\tFINISHED\tTIMEOUTS\tOVERDUE\tEFFECTS PENDING")
				for _, s := range r.Sagas {
					if s.Err != nil {
						fmt.Fprintf(w, "%s\t?\t?\t?\t?\t?\n", s.Name)
						continue
					}
					fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%d\t%d\n", s.Name, s.Summary.Running, outcomes(s.Summary.Outcomes), s.Summary.Timeouts, s.Summary.Overdue, s.Summary.Effects)
				}
				_ = w.Flush()
			}
			printOperatorActions(out, r)   // issue 27: cmd/eventpipe/poison.go
			for _, err := range r.Errors { // under the table: a PARKED of "?" is explained here
				if !slices.ContainsFunc(r.Relays, func(rel operator.RelayStreamReport) bool { return rel.Err != nil && errors.Is(err, rel.Err) }) {
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

// printDefinitions prints each read and search model's build (the
// version that built it, the declared one, a rebuild's progress) and
// every consumer whose definition changed at its last start or differs
// from the catalogue's (a change not deployed yet).
func printDefinitions(out io.Writer, r operator.StatusReport) {
	var models, changed []operator.GroupStatus
	for _, g := range r.Groups {
		if g.Model != nil {
			models = append(models, g)
		}
		if len(g.DefinitionChanges()) > 0 {
			changed = append(changed, g)
		}
	}
	if len(models) > 0 {
		fmt.Fprintln(out, "\nMODELS")
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "MODEL\tKIND\tBUILT BY\tVERSION\tSTATE")
		for _, g := range models {
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\n", g.Consumer, g.Kind, g.Model.Built.ModelVersion(), g.Declared.Version, g.BuildState())
		}
		_ = w.Flush()
	}
	if len(changed) > 0 {
		fmt.Fprintln(out, "\nDEFINITION CHANGES")
		for _, g := range changed {
			for _, c := range g.DefinitionChanges() {
				fmt.Fprintf(out, "%s: %s\n", g.Consumer, c)
			}
		}
	}
}

// parkedCell is the PARKED column of g: what its projection parked
// ("3 (1 aggregate)"), "?" when that could not be read, "-" for a group
// that is not a projection's.
func parkedCell(g operator.GroupStatus, parkedErr error) string {
	switch {
	case g.Projection == "":
		return "-"
	case parkedErr != nil:
		return "?"
	case g.Parked.Events == 0:
		return "0"
	case g.Parked.Aggregates == 1:
		return fmt.Sprintf("%d (1 aggregate)", g.Parked.Events)
	}
	return fmt.Sprintf("%d (%d aggregates)", g.Parked.Events, g.Parked.Aggregates)
}

// outcomes is the FINISHED column of a saga: its finished instances by
// outcome ("12 completed, 3 compensated"), or "0".
func outcomes(by map[string]int64) string {
	if len(by) == 0 {
		return "0"
	}
	var parts []string
	for _, o := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, fmt.Sprintf("%d %s", by[o], o))
	}
	return strings.Join(parts, ", ")
}
