package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/operator"
	"github.com/eventpipe/eventpipe/poison"
)

func poisonCommand() *cobra.Command {
	var group string
	cmd := &cobra.Command{
		Use:   "poison",
		Short: "Show the poison topics' messages and redrive them once the cause is fixed (list, show, redrive)",
		Long: `Every consumer group sends the messages it can never handle to its poison topic
(<prefix>poison.<group>) with the reason. 'poison list' shows them, topic by
topic; 'poison show' one of them with its metadata and payload; 'poison
redrive' publishes chosen messages again to the topic they were poisoned from
(same payload, key and metadata, without the poison fields), each once: a
second redrive of a message publishes nothing and says so. Every redrive is
recorded in Postgres (operator_actions, poison_redrives): run 'eventpipe
migrate' first. Deploy the fix before redriving.`,
	}
	cmd.PersistentFlags().StringVar(&group, "group", eventpipe.DefaultCommandGroup, "consumer group of the command handlers")
	cmd.AddCommand(poisonListCommand(&group), poisonShowCommand(&group), poisonRedriveCommand(&group))
	return cmd
}

func poisonListCommand(group *string) *cobra.Command {
	return &cobra.Command{
		Use:   "list [topic]",
		Short: "List poison messages: topic, offset, origin, reason, message id, age, redrive",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := operator.PoisonListConfig{Process: eventpipe.Process{Catalog: catalog, Endpoints: eventpipe.EndpointsFromEnv(), Logger: slog.Default()}, CommandGroup: *group}
			if len(args) == 1 {
				cfg.Topic = args[0]
			}
			msgs, err := operator.PoisonList(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			now := time.Now()
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "POISON TOPIC\tOFFSET\tORIGIN\tREASON\tMESSAGE ID\tAGE\tREDRIVEN")
			for _, m := range msgs {
				fmt.Fprintf(w, "%s\t%d/%d\t%s\t%s\t%s\t%s\t%s\n", m.Topic, m.Partition, m.Offset, originCell(m.Origin()),
					cut(oneLine(m.Reason()), 80), dash(m.UUID), m.Age(now).Truncate(time.Second), redriveCell(m.Redrive))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if len(msgs) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "no poison messages")
			}
			return nil
		},
	}
}

func poisonShowCommand(group *string) *cobra.Command {
	return &cobra.Command{
		Use:   "show <topic> <offset | partition/offset>",
		Short: "Print one poison message: where it came from, why, its metadata and payload",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			pos, err := parsePoisonPosition(args[1])
			if err != nil {
				return err
			}
			m, err := operator.PoisonShow(cmd.Context(), operator.PoisonListConfig{Process: eventpipe.Process{Catalog: catalog, Endpoints: eventpipe.EndpointsFromEnv(), Logger: slog.Default()},
				CommandGroup: *group, Topic: args[0]}, pos)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "poison topic:  %s (%s)\n", m.Topic, m.Owner)
			fmt.Fprintf(out, "position:      partition %d, offset %d\n", m.Partition, m.Offset)
			fmt.Fprintf(out, "poisoned at:   %s (%s ago)\n", m.Timestamp.UTC().Format(time.RFC3339), time.Since(m.Timestamp).Truncate(time.Second))
			fmt.Fprintf(out, "origin:        %s\n", originCell(m.Origin()))
			if h := m.Origin().Handler; h != "" {
				fmt.Fprintf(out, "handler:       %s\n", h)
			}
			fmt.Fprintf(out, "message id:    %s\n", dash(m.UUID))
			fmt.Fprintf(out, "key:           %s\n", dash(m.Key))
			fmt.Fprintf(out, "reason:        %s\n", m.Reason())
			fmt.Fprintf(out, "redriven:      %s\n", redriveCell(m.Redrive))
			fmt.Fprintln(out, "metadata:")
			for _, k := range sortedMetadataKeys(m.Metadata) {
				fmt.Fprintf(out, "  %s: %s\n", k, m.Metadata[k])
			}
			fmt.Fprintf(out, "payload (%d bytes):\n%s\n", len(m.Payload), m.Payload)
			return nil
		},
	}
}

func poisonRedriveCommand(group *string) *cobra.Command {
	var (
		offsets       []string
		all           bool
		actor, reason string
	)
	cmd := &cobra.Command{
		Use:   "redrive <topic> (--offset N [--offset P/N ...] | --all)",
		Short: "Publish poison messages again to the topic they came from, each once",
		Long: `redrive publishes each chosen message of the poison topic to the topic it was
poisoned from, with its payload, key (so the same partition: the aggregate's
order holds) and metadata minus the poison fields, plus
eventpipe_redriven_from=<poison topic>/<partition>/<offset>. Each message is
redriven once: the redrive is recorded in Postgres (poison_redrives) as
started before it is published and done after the broker acknowledged it; a
message recorded done is not published again ("already redriven"), and one
whose earlier redrive was interrupted is looked for on the target topic
before it is published. The call is recorded in operator_actions. Relay
poison records name no topic and cannot be redriven. Exits non-zero when a
message failed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var pos []operator.PoisonPosition
			for _, o := range offsets {
				p, err := parsePoisonPosition(o)
				if err != nil {
					return err
				}
				pos = append(pos, p)
			}
			if all == (len(pos) > 0) {
				return errors.New("poison redrive: give --offset (one or more) or --all")
			}
			res, err := operator.PoisonRedrive(cmd.Context(), operator.PoisonRedriveConfig{Process: eventpipe.Process{Catalog: catalog, Endpoints: eventpipe.EndpointsFromEnv(), Logger: slog.Default()},
				CommandGroup: *group, Topic: args[0], Positions: pos, All: all, Actor: actor, Reason: reason})
			out := cmd.OutOrStdout()
			for _, r := range res.Results {
				switch r.Outcome {
				case poison.Redriven:
					note := ""
					if r.Resumed {
						note = " (an interrupted redrive had not published it)"
					}
					fmt.Fprintf(out, "%d/%d %s: redriven to %s%s\n", r.Partition, r.Offset, dash(r.UUID), r.Target, note)
				case poison.AlreadyRedriven:
					fmt.Fprintf(out, "%d/%d %s: already redriven to %s by %s at %s; not published again\n", r.Partition, r.Offset, dash(r.UUID),
						r.Target, r.By, r.At.UTC().Format(time.RFC3339))
				case poison.Recovered:
					fmt.Fprintf(out, "%d/%d %s: an interrupted redrive had published it to %s; recorded, not published again\n", r.Partition, r.Offset, dash(r.UUID), r.Target)
				case poison.Busy:
					fmt.Fprintf(out, "%d/%d %s: another redrive of it is running; not published\n", r.Partition, r.Offset, dash(r.UUID))
				default:
					fmt.Fprintf(out, "%d/%d %s: failed: %s\n", r.Partition, r.Offset, dash(r.UUID), oneLine(fmt.Sprint(r.Err)))
				}
			}
			if err != nil {
				return err
			}
			if len(res.Results) == 0 {
				fmt.Fprintln(out, "nothing to redrive")
			}
			if n := res.Count(poison.Failed) + res.Count(poison.Busy); n > 0 {
				return fmt.Errorf("poison redrive: %d of %d messages not redriven", n, len(res.Results))
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&offsets, "offset", nil, "a message to redrive: its offset, or partition/offset (repeat for several)")
	cmd.Flags().BoolVar(&all, "all", false, "redrive every message of the topic")
	cmd.Flags().StringVar(&actor, "actor", operator.DefaultActor(), "who redrives (recorded)")
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded)")
	return cmd
}

// parsePoisonPosition reads "N" (any partition) or "P/N".
func parsePoisonPosition(s string) (operator.PoisonPosition, error) {
	pos := operator.PoisonPosition{Partition: operator.AnyPartition}
	off := s
	if p, o, ok := strings.Cut(s, "/"); ok {
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil || n < 0 {
			return pos, fmt.Errorf("offset %q: want N or partition/N", s)
		}
		pos.Partition, off = int32(n), o
	}
	n, err := strconv.ParseInt(off, 10, 64)
	if err != nil || n < 0 {
		return pos, fmt.Errorf("offset %q: want N or partition/N", s)
	}
	pos.Offset = n
	return pos, nil
}

// originCell says where a poison message came from.
func originCell(o poison.Origin) string {
	switch {
	case !o.Known():
		return "-"
	case o.Offset < 0:
		return o.Topic
	}
	return fmt.Sprintf("%s/%d/%d", o.Topic, o.Partition, o.Offset)
}

// redriveCell says whether and when a message was redriven.
func redriveCell(r *poison.Record) string {
	switch {
	case r == nil:
		return "-"
	case r.State == "done" && r.DoneAt != nil:
		return "done " + r.DoneAt.UTC().Format(time.RFC3339) + " by " + r.Actor
	}
	return r.State + " " + r.StartedAt.UTC().Format(time.RFC3339) + " by " + r.Actor
}

// cut shortens s to n runes.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func sortedMetadataKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// printOperatorActions prints the status section "OPERATOR ACTIONS": the
// latest actions, newest first.
func printOperatorActions(out io.Writer, r operator.StatusReport) {
	fmt.Fprintln(out, "\nOPERATOR ACTIONS")
	if r.OperatorActionsErr != nil {
		fmt.Fprintln(out, "?")
		return
	}
	if len(r.OperatorActions) == 0 {
		fmt.Fprintln(out, "none")
		return
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "AT\tACTOR\tACTION\tTARGET\tREASON\tRESULT")
	for _, a := range r.OperatorActions {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", a.At.UTC().Format(time.RFC3339), a.Actor, a.Action, cut(a.Target, 60),
			dash(cut(oneLine(a.Reason), 40)), cut(oneLine(a.Result), 80))
	}
	_ = w.Flush()
}
