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
		Short: "Show, re-drive or skip the events projections parked (list, replay, skip)",
		Long: `When a projection cannot apply an event (a permanent error: a payload it refuses,
an unknown event type), 'eventpipe consume' parks the event and, from then on,
every later event of the same aggregate, in Postgres (table parked_events),
while the projection's other aggregates keep flowing. 'parked list' shows them;
once the cause is fixed (deploy the fixed binary first), 'parked replay'
re-drives each parked aggregate's events in sequence order through the
projection, exactly once, and unparks the aggregate when all applied. 'parked
skip' releases an aggregate past a parked event that must never apply. Replays
and skips are recorded in Postgres (operator_actions; 'eventpipe status' shows
the latest).`,
	}
	cmd.AddCommand(parkedListCommand(), parkedReplayCommand(), parkedSkipCommand())
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
				Catalog: catalog, Endpoints: eventpipe.EndpointsFromEnv(), Projection: projection, Aggregate: ref, Logger: slog.Default(),
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

func parkedReplayCommand() *cobra.Command {
	var projection, aggregate, actor, reason string
	cmd := &cobra.Command{
		Use:   "replay --projection <name> [--aggregate <type>/<id>]",
		Short: "Re-drive parked aggregates in sequence order and unpark them",
		Long: `replay applies each parked aggregate's events in sequence order through the
projection (the same applier 'eventpipe consume' uses, so anything applied
already is skipped) and unparks the aggregate when all applied. A running
consumer keeps parking the aggregate's new events until then, and replay
applies those too. An aggregate whose event fails again stays parked with the
new reason, and replay exits non-zero.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if projection == "" {
				return errors.New("parked replay: --projection is required")
			}
			ref, err := parseAggregate(aggregate)
			if err != nil {
				return err
			}
			res, err := operator.ParkedReplay(cmd.Context(), operator.ParkedReplayConfig{
				Catalog: catalog, Endpoints: eventpipe.EndpointsFromEnv(), Projection: projection, Aggregate: ref,
				Actor: actor, Reason: reason, Logger: slog.Default(),
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, a := range res.Aggregates {
				if a.Unparked {
					fmt.Fprintf(out, "%s: unparked, %d parked events re-driven, %d applied\n", a.Aggregate, a.Redriven, a.Applied)
				} else {
					fmt.Fprintf(out, "%s: still parked after %d re-driven: %s\n", a.Aggregate, a.Redriven, oneLine(fmt.Sprint(a.Err)))
				}
			}
			if len(res.Aggregates) == 0 {
				fmt.Fprintf(out, "%s: nothing parked\n", projection)
			}
			if n := res.StillParked(); n > 0 {
				return fmt.Errorf("parked replay: %d of %d aggregates still parked", n, len(res.Aggregates))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&projection, "projection", "", "the read or search model whose parked aggregates to re-drive (required)")
	cmd.Flags().StringVar(&aggregate, "aggregate", "", "only this aggregate (type/id) or aggregate type")
	cmd.Flags().StringVar(&actor, "actor", operator.DefaultActor(), "who replays (recorded)")
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded)")
	return cmd
}

func parkedSkipCommand() *cobra.Command {
	var actor, reason string
	cmd := &cobra.Command{
		Use:   "skip <projection> <type>/<id> --reason \"…\"",
		Short: "Release a parked aggregate past its first parked event, without applying it",
		Long: `skip takes the aggregate's first parked event out of the parked set without
applying it (it is kept in skipped_events with who skipped it and why), moves
the read model's position for the aggregate past it, and re-drives the
aggregate's later parked events in order as 'parked replay' does, unparking
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
				Catalog: catalog, Endpoints: eventpipe.EndpointsFromEnv(), Projection: args[0], Aggregate: ref,
				Actor: actor, Reason: reason, Logger: slog.Default(),
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			e := res.Skipped.Envelope
			fmt.Fprintf(out, "%s: skipped sequence %d (%s, event %s)\n", e.Aggregate(), e.Sequence, e.EventType, e.EventID)
			if !res.Replay.Unparked {
				fmt.Fprintf(out, "%s: still parked after %d re-driven: %s\n", ref, res.Replay.Redriven, oneLine(fmt.Sprint(res.Replay.Err)))
				return fmt.Errorf("parked skip: %s still parked", ref)
			}
			fmt.Fprintf(out, "%s: unparked, %d later parked events re-driven, %d applied\n", ref, res.Replay.Redriven, res.Replay.Applied)
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
