package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/operator"
)

// openAnalytics opens the analytics store of the environment.
func openAnalytics(cmd *cobra.Command) (*analytics.Store, error) {
	return eventpipe.OpenAnalytics(cmd.Context(), eventpipe.EndpointsFromEnv(), slog.Default())
}

// printJSON writes v to cmd's output, indented.
func printJSON(cmd *cobra.Command, v any) error {
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func trackCommand() *cobra.Command {
	var (
		in    analytics.EventInput
		props string
		at    string
	)
	cmd := &cobra.Command{
		Use:   "track <source-id>",
		Short: "Ingest one analytics event into the analytics table (seed 001's AP1, write-sharded)",
		Example: `  eventpipe track my-site --type page_view --session s1 --url /pricing
  eventpipe track my-site --type click --session s1 --user u1 --properties '{"buttonId":"cta"}'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if props != "" {
				if err := json.Unmarshal([]byte(props), &in.Properties); err != nil {
					return fmt.Errorf("track: --properties is not a JSON object: %w", err)
				}
			}
			if at != "" {
				t, err := time.Parse(time.RFC3339, at)
				if err != nil {
					return fmt.Errorf("track: --at: %w", err)
				}
				in.CreatedAt = &t
			}
			store, err := openAnalytics(cmd)
			if err != nil {
				return err
			}
			events, err := store.Ingest(cmd.Context(), args[0], []analytics.EventInput{in})
			if err != nil {
				return fmt.Errorf("track: %w", err)
			}
			return printJSON(cmd, events[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.Type, "type", "", "event type, e.g. page_view, click (required)")
	f.StringVar(&in.SessionID, "session", "", "session id (required; ULIDs list newest first)")
	f.StringVar(&in.UserID, "user", "", "signed-in user id")
	f.StringVar(&in.URL, "url", "", "page URL")
	f.StringVar(&in.Referrer, "referrer", "", "referrer URL")
	f.StringVar(&in.UserAgent, "user-agent", "", "user agent")
	f.StringVar(&props, "properties", "", "custom properties as a JSON object")
	f.StringVar(&at, "at", "", "when it happened, RFC 3339 (default now)")
	return cmd
}

func analyticsCommand() *cobra.Command {
	var (
		limit    int
		cursor   string
		period   string
		from, to string
	)
	page := func(c *cobra.Command) {
		c.Flags().IntVar(&limit, "limit", 0, "page size (0: the store's default, 50)")
		c.Flags().StringVar(&cursor, "cursor", "", "the next cursor a previous page printed")
	}
	listing := func(items any, next string) map[string]any {
		return map[string]any{"items": items, "next": next}
	}
	sessionEvents := &cobra.Command{
		Use: "session-events <source-id> <session-id>", Short: "AP2: a session's events, read across every shard in ULID order",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, err := openAnalytics(cmd)
			if err != nil {
				return err
			}
			events, err := store.SessionEvents(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			return printJSON(cmd, events)
		},
	}
	session := &cobra.Command{
		Use: "session <source-id> <session-id>", Short: "AP3: a session's details",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, err := openAnalytics(cmd)
			if err != nil {
				return err
			}
			s, ok, err := store.Session(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("session %s of source %s does not exist", args[1], args[0])
			}
			return printJSON(cmd, s)
		},
	}
	sessions := &cobra.Command{
		Use: "sessions <source-id>", Short: "AP4: a source's recent sessions, newest first",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, err := openAnalytics(cmd)
			if err != nil {
				return err
			}
			items, next, err := store.RecentSessions(cmd.Context(), args[0], limit, cursor)
			if err != nil {
				return err
			}
			return printJSON(cmd, listing(items, next))
		},
	}
	page(sessions)
	userSessions := &cobra.Command{
		Use: "user-sessions <user-id>", Short: "AP5: a user's sessions (the user index)",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, err := openAnalytics(cmd)
			if err != nil {
				return err
			}
			items, next, err := store.UserSessions(cmd.Context(), args[0], limit, cursor)
			if err != nil {
				return err
			}
			return printJSON(cmd, listing(items, next))
		},
	}
	page(userSessions)
	aggregations := &cobra.Command{
		Use:   "aggregations <source-id>",
		Short: "AP6: a source's hourly or daily aggregations, newest first; AP7 with --from and --to",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, err := openAnalytics(cmd)
			if err != nil {
				return err
			}
			p := analytics.Period(period)
			if from == "" && to == "" {
				items, next, err := store.Aggregations(cmd.Context(), args[0], p, limit, cursor)
				if err != nil {
					return err
				}
				return printJSON(cmd, listing(items, next))
			}
			lo, err := parseDay(from)
			if err != nil {
				return fmt.Errorf("--from: %w", err)
			}
			hi, err := parseDay(to)
			if err != nil {
				return fmt.Errorf("--to: %w", err)
			}
			items, err := store.AggregationsBetween(cmd.Context(), args[0], p, lo, hi)
			if err != nil {
				return err
			}
			return printJSON(cmd, items)
		},
	}
	page(aggregations)
	aggregations.Flags().StringVar(&period, "period", "hourly", "hourly or daily")
	aggregations.Flags().StringVar(&from, "from", "", "first bucket, RFC 3339 or YYYY-MM-DD (AP7)")
	aggregations.Flags().StringVar(&to, "to", "", "last bucket, RFC 3339 or YYYY-MM-DD (AP7)")
	cmd := &cobra.Command{
		Use:   "analytics",
		Short: "Read the analytics table: a session's events, sessions, a user's sessions, aggregations (seed 001's AP2–AP7)",
		Long: `The analytics table holds write-sharded raw events (eventpipe track, or POST
/sources/{id}/events), sessions and hourly and daily aggregations. Each subcommand
prints JSON.`,
	}
	cmd.AddCommand(sessionEvents, session, sessions, userSessions, aggregations, analyticsRecountCommand())
	return cmd
}

func analyticsRecountCommand() *cobra.Command {
	var source, from, to, actor, reason string
	var settle, margin time.Duration
	cmd := &cobra.Command{
		Use:   "recount --source <id> --from <T1> --to <T2>",
		Short: "Recount a source's sessions and aggregations of a closed range [T1, T2) from its raw events",
		Long: `recount reads every raw event of the source, counts the range [T1, T2) afresh with
the aggregation consumer's own fold, and rewrites the hourly aggregations of each
hour in it, the daily aggregations of each whole day in it and the sessions whose
events all fall in it, where they differ (others are reported unchanged). T1 and T2
are whole UTC hours (RFC 3339); T2 must be at least --settle ago. It is safe
beside the running consumer: each write is conditional on the item's counters,
watermarks or version being as read (the consumer's own guards), and the consumer's
later increments apply on top. The guarantee, and what "settled" means, is in
docs/operations.md. The run is recorded in Postgres (operator_actions). Prints JSON.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lo, err := time.Parse(time.RFC3339, from)
			if err != nil {
				return fmt.Errorf("--from: %w", err)
			}
			hi, err := time.Parse(time.RFC3339, to)
			if err != nil {
				return fmt.Errorf("--to: %w", err)
			}
			res, err := operator.AnalyticsRecount(cmd.Context(), operator.AnalyticsRecountConfig{
				Process: eventpipe.Process{Endpoints: eventpipe.EndpointsFromEnv(), Logger: slog.Default()}, Source: source, From: lo, To: hi, Settle: settle, Margin: margin,
				Actor: actor, Reason: reason,
			})
			if err != nil {
				return err
			}
			return printJSON(cmd, res)
		},
	}
	cmd.Flags().StringVar(&source, "source", "", "the source id (required)")
	cmd.Flags().StringVar(&from, "from", "", "start of the range, a whole UTC hour, RFC 3339 (required)")
	cmd.Flags().StringVar(&to, "to", "", "end of the range (excluded), a whole UTC hour, RFC 3339 (required)")
	cmd.Flags().DurationVar(&settle, "settle", 0, "how long ago the range must have ended (default 5m)")
	cmd.Flags().DurationVar(&margin, "margin", 0, "how far outside the range raw events are read, for sessions crossing its edges (default 2h)")
	cmd.Flags().StringVar(&actor, "actor", operator.DefaultActor(), "who recounts (recorded)")
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded)")
	for _, f := range []string{"source", "from", "to"} {
		_ = cmd.MarkFlagRequired(f)
	}
	return cmd
}

// parseDay parses RFC 3339 or YYYY-MM-DD (midnight UTC).
func parseDay(s string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Parse(time.RFC3339, s)
}
