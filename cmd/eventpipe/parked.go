package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/operator"
)

func parkedCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "parked",
		Short: "Show, re-apply or skip the events projections parked (list, reapply, skip)",
		Long: `When a projection cannot apply an event (a permanent error: a payload it refuses,
an unknown event type), 'eventpipe consume' parks the event and, from then on,
every later event of the same aggregate, in Postgres (table parked_events),
while the projection's other aggregates keep flowing. 'parked list' shows them;
once the cause is fixed (deploy the fixed binary first), 'parked reapply'
re-applies each parked aggregate's events in sequence order through the
projection, exactly once, and unparks the aggregate when all applied. 'parked
skip' releases an aggregate past a parked event that must never apply.
Re-applies and skips are recorded in Postgres (operator_actions; 'eventpipe
status' shows the latest).`,
	}
	cmd.AddCommand(parkedListCommand(), parkedReapplyCommand(), parkedReplayAliasCommand(), parkedSkipCommand())
	return cmd
}

func parkedListCommand() *cobra.Command {
	var projection, aggregate string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List parked events: projection, aggregate, sequence, event type, parked at, reason",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ref, err := parseAggregate(aggregate)
			if err != nil {
				return err
			}
			events, err := operator.ParkedList(cmd.Context(), operator.ParkedListConfig{
				Process: eventpipe.Process{Catalog: catalog, Endpoints: eventpipe.EndpointsFromEnv(), Logger: slog.Default()}, Projection: projection, Aggregate: ref,
			})
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "PROJECTION\tAGGREGATE\tSEQUENCE\tEVENT TYPE\tPARKED AT\tREASON")
			for _, ev := range events {
				e := ev.Envelope
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\n", ev.Consumer, e.Aggregate(), e.Sequence, e.EventType,
					ev.ParkedAt.UTC().Format(time.RFC3339), oneLine(ev.Reason))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if len(events) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "nothing parked")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&projection, "projection", "", "only this read or search model's parked events")
	cmd.Flags().StringVar(&aggregate, "aggregate", "", "only this aggregate (type/id) or aggregate type")
	return cmd
}

func parkedReapplyCommand() *cobra.Command {
	var projection, aggregate, actor, reason string
	cmd := &cobra.Command{
		Use:   "reapply --projection <name> [--aggregate <type>/<id>]",
		Short: "Re-apply parked aggregates' events in sequence order and unpark them",
		Long: `reapply applies each parked aggregate's events again, in sequence order, through
the projection (the same applier 'eventpipe consume' uses, so anything applied
already is skipped) and unparks the aggregate when all applied. A running
consumer keeps parking the aggregate's new events until then, and reapply
applies those too. An aggregate whose event fails again stays parked with the
new reason, and reapply exits non-zero. (Not to be confused with 'eventpipe
replay', which rebuilds a whole model from the event store.)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if projection == "" {
				return errors.New("parked reapply: --projection is required")
			}
			ref, err := parseAggregate(aggregate)
			if err != nil {
				return err
			}
			res, err := operator.ParkedReapply(cmd.Context(), operator.ParkedReapplyConfig{
				Process: eventpipe.Process{Catalog: catalog, Endpoints: eventpipe.EndpointsFromEnv(), Logger: slog.Default()}, Projection: projection, Aggregate: ref,
				Actor: actor, Reason: reason,
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, a := range res.Aggregates {
				if a.Unparked {
					fmt.Fprintf(out, "%s: unparked, %d parked events re-applied, %d applied\n", a.Aggregate, a.Reapplied, a.Applied)
				} else {
					fmt.Fprintf(out, "%s: still parked after %d re-applied: %s\n", a.Aggregate, a.Reapplied, oneLine(fmt.Sprint(a.Err)))
				}
			}
			if len(res.Aggregates) == 0 {
				fmt.Fprintf(out, "%s: nothing parked\n", projection)
			}
			if n := res.StillParked(); n > 0 {
				return fmt.Errorf("parked reapply: %d of %d aggregates still parked", n, len(res.Aggregates))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&projection, "projection", "", "the read or search model whose parked aggregates to re-apply (required)")
	cmd.Flags().StringVar(&aggregate, "aggregate", "", "only this aggregate (type/id) or aggregate type")
	cmd.Flags().StringVar(&actor, "actor", operator.DefaultActor(), "who re-applies (recorded)")
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded)")
	return cmd
}

// parkedReplayAliasCommand is 'parked replay', the old name of 'parked
// reapply': hidden from help, it says so on stderr and does the same.
func parkedReplayAliasCommand() *cobra.Command {
	cmd := parkedReapplyCommand()
	cmd.Use = strings.Replace(cmd.Use, "reapply", "replay", 1)
	cmd.Short = "Deprecated: use 'parked reapply'"
	cmd.Long = "'parked replay' is the old name of 'parked reapply', kept for scripts; it does the same."
	cmd.Hidden = true
	run := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		fmt.Fprintln(cmd.ErrOrStderr(), "eventpipe: 'parked replay' is deprecated, use 'parked reapply' (it does the same)")
		return run(cmd, args)
	}
	return cmd
}

func parkedSkipCommand() *cobra.Command {
	var actor, reason string
	cmd := &cobra.Command{
		Use:   "skip <projection> <type>/<id> --reason \"…\"",
		Short: "Release a parked aggregate past its first parked event, without applying it",
		Long: `skip takes the aggregate's first parked event out of the parked set without
applying it (it is kept in skipped_events with who skipped it and why), moves
the read model's position for the aggregate past it, and re-applies the
aggregate's later parked events in order as 'parked reapply' does, unparking
it when they applied. Only for Postgres read models, and only when the read
model applied every event before the skipped one. Recorded in
operator_actions.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseAggregate(args[1])
			if err != nil {
				return err
			}
			if ref.ID == "" {
				return fmt.Errorf("parked skip: %q: want <type>/<id>", args[1])
			}
			res, err := operator.ParkedSkip(cmd.Context(), operator.ParkedSkipConfig{
				Process: eventpipe.Process{Catalog: catalog, Endpoints: eventpipe.EndpointsFromEnv(), Logger: slog.Default()}, Projection: args[0], Aggregate: ref,
				Actor: actor, Reason: reason,
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			e := res.Skipped.Envelope
			fmt.Fprintf(out, "%s: skipped sequence %d (%s, event %s)\n", e.Aggregate(), e.Sequence, e.EventType, e.EventID)
			if !res.Reapply.Unparked {
				fmt.Fprintf(out, "%s: still parked after %d re-applied: %s\n", ref, res.Reapply.Reapplied, oneLine(fmt.Sprint(res.Reapply.Err)))
				return fmt.Errorf("parked skip: %s still parked", ref)
			}
			fmt.Fprintf(out, "%s: unparked, %d later parked events re-applied, %d applied\n", ref, res.Reapply.Reapplied, res.Reapply.Applied)
			return nil
		},
	}
	cmd.Flags().StringVar(&actor, "actor", operator.DefaultActor(), "who skips (recorded)")
	cmd.Flags().StringVar(&reason, "reason", "", "why the event is skipped (required, recorded)")
	return cmd
}

// parseAggregate reads "type/id" or "type" ("" is none).
func parseAggregate(s string) (eventstore.Ref, error) {
	if s == "" {
		return eventstore.Ref{}, nil
	}
	typ, id, _ := strings.Cut(s, "/")
	if typ == "" {
		return eventstore.Ref{}, fmt.Errorf("--aggregate %q: want <type>/<id> or <type>", s)
	}
	return eventstore.Ref{Type: typ, ID: id}, nil
}

// oneLine keeps a reason on one line of a table.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
