package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/operator"
	"github.com/eventpipe/eventpipe/sagas"
)

func sagasCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sagas",
		Short: "List, show, abort or retry saga instances (list, show, abort, retry)",
		Long: `A saga instance keeps its state in Postgres (saga_instances) and waits for the
answers to the commands it sent, for events and for its timeouts. 'sagas list'
shows the instances by saga and status (running, stuck, aborting, or the outcome
they finished with) with their age and what they wait for; 'sagas show' one
instance in full. An effect is stuck when it waited longer than --stuck-after
(default 30s): an outbox row no saga process ran, or a command whose answer the
saga never took. 'sagas retry' retries an instance's stuck effects, sending
commands again under their own ids (the command handlers dedupe them); 'sagas
abort' ends an instance through its saga's compensation (cancel the step in
flight, refund what was taken). Aborts and retries are recorded in Postgres (operator_actions;
'eventpipe status' shows the latest).`,
	}
	cmd.AddCommand(sagasListCommand(), sagasShowCommand(), sagasAbortCommand(), sagasRetryCommand())
	return cmd
}

func sagasListCommand() *cobra.Command {
	var (
		state      string
		stuckAfter time.Duration
		limit      int
	)
	cmd := &cobra.Command{
		Use:   "list [saga] [--state running|stuck|aborting|finished|<outcome>]",
		Short: "List saga instances: saga, instance, status, age, pending step, next timeout",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := operator.SagaInstancesConfig{Process: eventpipe.Process{Catalog: catalog, Endpoints: eventpipe.EndpointsFromEnv(), Logger: slog.Default()}, Status: state,
				StuckAfter: stuckAfter, Limit: limit}
			if len(args) == 1 {
				cfg.Saga = args[0]
			}
			list, err := operator.SagaInstances(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			now := time.Now()
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "SAGA\tINSTANCE\tSTATUS\tAGE\tUPDATED\tPENDING\tNEXT TIMEOUT")
			for _, o := range list {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s ago\t%s\t%s\n", o.Saga, o.Instance, o.Status, age(now, o.CreatedAt), age(now, o.UpdatedAt),
					pendingCell(now, o.Pending), timeoutCell(now, o.Timeouts))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if len(list) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "no saga instances")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "only instances of this status: running, stuck, aborting, finished, or an outcome (completed, aborted, …)")
	cmd.Flags().DurationVar(&stuckAfter, "stuck-after", sagas.DefaultStuckAfter, "how long an effect waits before it counts as stuck")
	cmd.Flags().IntVar(&limit, "limit", 100, "the most instances listed, oldest first")
	return cmd
}

func sagasShowCommand() *cobra.Command {
	var stuckAfter time.Duration
	cmd := &cobra.Command{
		Use:   "show <saga> <instance>",
		Short: "Show a saga instance: state, inputs handled, commands and answers, timeouts, outbox",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := operator.SagaInstance(cmd.Context(), operator.SagaInstanceConfig{Process: eventpipe.Process{Catalog: catalog, Endpoints: eventpipe.EndpointsFromEnv(), Logger: slog.Default()},
				Saga: args[0], Instance: args[1], StuckAfter: stuckAfter})
			if err != nil {
				return err
			}
			return printSagaInstance(cmd.OutOrStdout(), time.Now(), d)
		},
	}
	cmd.Flags().DurationVar(&stuckAfter, "stuck-after", sagas.DefaultStuckAfter, "how long an effect waits before it counts as stuck")
	return cmd
}

func sagasAbortCommand() *cobra.Command {
	var actor, reason string
	cmd := &cobra.Command{
		Use:   "abort <saga> <instance> --reason \"…\"",
		Short: "End a running saga instance through its saga's compensation",
		Long: `abort records the abort with the instance and hands it to the saga's
compensation (the transfer saga cancels the debit or credit in flight and
refunds a debit taken; the order saga cancels the shipment and refunds the
payment). Its commands go through the saga's outbox like any other, exactly
once in effect. A saga without compensation ends the instance 'aborted' at
once. The instance shows 'aborting' until the answers came back to the saga's
consumer (which must run) and it ended. Recorded in operator_actions.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := eventpipe.CommandKeyFromEnv()
			if err != nil {
				return err
			}
			res, err := operator.SagaAbort(cmd.Context(), operator.SagaAbortConfig{
				SagaOpsConfig: operator.SagaOpsConfig{Process: eventpipe.Process{Catalog: catalog, Endpoints: eventpipe.EndpointsFromEnv(), Logger: slog.Default()}, CommandKey: key, Actor: actor},
				Saga:          args[0], Instance: args[1], Reason: reason,
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, e := range res.Effects {
				fmt.Fprintf(out, "%s %s: queued %s %s → %s\n", args[0], args[1], e.Kind, e.CommandID, e.Aggregate)
			}
			switch {
			case res.Outcome != "":
				fmt.Fprintf(out, "%s %s: aborted, ended %s\n", args[0], args[1], res.Outcome)
			default:
				fmt.Fprintf(out, "%s %s: aborting; the compensation ends it once its answers come back ('sagas show' follows it)\n", args[0], args[1])
			}
			if res.Err != nil {
				return fmt.Errorf("saga abort: effects not run yet (the saga's sweep or 'sagas retry' runs them): %w", res.Err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&actor, "actor", operator.DefaultActor(), "who aborts (recorded)")
	cmd.Flags().StringVar(&reason, "reason", "", "why (required, recorded)")
	return cmd
}

func sagasRetryCommand() *cobra.Command {
	var (
		actor, reason string
		stuckAfter    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "retry <saga> <instance>",
		Short: "Retry a saga instance's stuck effects: run outbox rows, send commands again under their own ids",
		Long: `retry acts on the instance's effects that waited longer than --stuck-after:
an outbox row no saga process ran is run (and deleted); a command whose answer
the saga never took is sent again under its original command id (the command
handlers answer a repeated id once), or, when the event store holds its
answer already, that answer is published again on the replies topic. Safe
beside a running saga and safe to repeat. Recorded in operator_actions.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := eventpipe.CommandKeyFromEnv()
			if err != nil {
				return err
			}
			res, err := operator.SagaRetry(cmd.Context(), operator.SagaRetryConfig{
				SagaOpsConfig: operator.SagaOpsConfig{Process: eventpipe.Process{Catalog: catalog, Endpoints: eventpipe.EndpointsFromEnv(), Logger: slog.Default()}, CommandKey: key,
					StuckAfter: stuckAfter, Actor: actor},
				Saga: args[0], Instance: args[1], Reason: reason,
			})
			out := cmd.OutOrStdout()
			for _, r := range res.Retried {
				line := fmt.Sprintf("%s %s: %s %s (%s → %s)", args[0], args[1], r.Action, r.Effect.CommandID, r.Effect.Kind, r.Effect.Aggregate)
				if r.Err != nil {
					line += ": " + oneLine(r.Err.Error())
				}
				fmt.Fprintln(out, line)
			}
			if err != nil {
				return err
			}
			if len(res.Retried) == 0 {
				fmt.Fprintf(out, "%s %s: nothing stuck\n", args[0], args[1])
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&actor, "actor", operator.DefaultActor(), "who retries (recorded)")
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded)")
	cmd.Flags().DurationVar(&stuckAfter, "stuck-after", sagas.DefaultStuckAfter, "how long an effect waits before it counts as stuck")
	return cmd
}

// printSagaInstance writes what `sagas show` shows.
func printSagaInstance(out io.Writer, now time.Time, d sagas.Detail) error {
	fmt.Fprintf(out, "saga:     %s\ninstance: %s\nstatus:   %s\n", d.Saga, d.Instance, d.Status)
	fmt.Fprintf(out, "created:  %s (%s ago)\nupdated:  %s (%s ago), version %d\n", d.CreatedAt.UTC().Format(time.RFC3339), age(now, d.CreatedAt),
		d.UpdatedAt.UTC().Format(time.RFC3339), age(now, d.UpdatedAt), d.Version)
	if d.Abort != nil {
		fmt.Fprintf(out, "aborted:  %s by %s: %s\n", d.Abort.At.UTC().Format(time.RFC3339), d.Abort.Actor, d.Abort.Reason)
	}
	var state bytes.Buffer
	if err := json.Indent(&state, d.State, "  ", "  "); err != nil {
		state.Reset()
		state.Write(d.State)
	}
	fmt.Fprintf(out, "\nSTATE\n  %s\n", state.String())

	fmt.Fprintln(out, "\nINPUTS HANDLED")
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, in := range d.Inputs {
		fmt.Fprintf(w, "  %s\t%s\n", in.HandledAt.UTC().Format(time.RFC3339Nano), in.ID)
	}
	if len(d.Inputs) == 0 {
		fmt.Fprintln(w, "  none kept (a finished instance's are pruned)")
	}
	if err := w.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(out, "\nCOMMANDS")
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "  STEP\tCOMMAND ID\tTYPE\tAGGREGATE\tSENT\tTAKEN BY THE SAGA\tANSWER IN THE EVENT STORE")
	for _, c := range d.Commands {
		taken := "no"
		switch {
		case c.Answered:
			taken = "yes"
		case c.Stuck:
			taken = "no (stuck)"
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s ago\t%s\t%s\n", dash(c.Step), c.CommandID, dash(c.Type), c.Aggregate, age(now, c.Since), taken, answerCell(c.Answer))
	}
	if err := w.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(out, "\nTIMEOUTS")
	for _, t := range d.Timeouts {
		fmt.Fprintf(out, "  %s due %s (%s)\n", t.Name, t.Due.UTC().Format(time.RFC3339), dueIn(now, t.Due))
	}
	if len(d.Timeouts) == 0 {
		fmt.Fprintln(out, "  none")
	}

	fmt.Fprintln(out, "\nOUTBOX (not sent yet)")
	for _, e := range d.Outbox {
		stuck := ""
		if e.Stuck {
			stuck = ", stuck"
		}
		fmt.Fprintf(out, "  #%d %s %s → %s, queued %s ago%s\n", e.Seq, e.Kind, e.CommandID, e.Aggregate, age(now, e.Since), stuck)
	}
	if len(d.Outbox) == 0 {
		fmt.Fprintln(out, "  none")
	}
	return nil
}

// pendingCell says what an instance waits for: its pending effects.
func pendingCell(now time.Time, pending []sagas.Effect) string {
	if len(pending) == 0 {
		return "-"
	}
	var parts []string
	for _, e := range pending {
		what := dash(e.Step)
		if e.Kind == "cancel" {
			what = "cancel " + what
		}
		state := "sent"
		if e.Queued {
			state = "queued"
		}
		p := fmt.Sprintf("%s (%s %s ago", what, state, age(now, e.Since))
		if e.Stuck {
			p += ", stuck"
		}
		parts = append(parts, p+")")
	}
	return strings.Join(parts, ", ")
}

// timeoutCell names the earliest pending timeout.
func timeoutCell(now time.Time, ts []sagas.Timeout) string {
	if len(ts) == 0 {
		return "-"
	}
	return ts[0].Name + " " + dueIn(now, ts[0].Due)
}

// answerCell says what the event store recorded for a command.
func answerCell(a *sagas.Answer) string {
	if a == nil {
		return "none"
	}
	s := string(a.Status)
	if a.Reason != "" {
		s += ": " + cut(oneLine(a.Reason), 60)
	}
	return fmt.Sprintf("%s (version %d)", s, a.Version)
}

// age is how long ago t was, to the second.
func age(now, t time.Time) string { return now.Sub(t).Truncate(time.Second).String() }

// dueIn says when a due time comes, or how overdue it is.
func dueIn(now, due time.Time) string {
	if d := due.Sub(now); d > 0 {
		return "in " + d.Truncate(time.Second).String()
	}
	return "overdue by " + now.Sub(due).Truncate(time.Second).String()
}
