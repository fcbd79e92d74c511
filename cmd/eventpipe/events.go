package main

import (
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/eventstore"
	ddbstore "github.com/eventpipe/eventpipe/eventstore/dynamodb"
)

func eventsCommand() *cobra.Command {
	var (
		eventType string
		after     int64
		from, to  string
		limit     int
	)
	cmd := &cobra.Command{
		Use:   "events [<aggregate-type> <aggregate-id>]",
		Short: "Print the event log of an aggregate, or every event of a type (--type)",
		Example: `  eventpipe events todo t1
  eventpipe events --type TodoCreated --from 2026-11-01T00:00:00Z`,
		Args: cobra.RangeArgs(0, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			store, err := eventpipe.OpenStore(ctx, eventpipe.EndpointsFromEnv(), catalog, slog.Default())
			if err != nil {
				return err
			}
			out := json.NewEncoder(cmd.OutOrStdout())
			switch {
			case eventType != "" && len(args) == 0:
				q := ddbstore.TypeQuery{EventType: eventType, Limit: limit}
				if q.From, err = parseTime(from); err != nil {
					return err
				}
				if q.To, err = parseTime(to); err != nil {
					return err
				}
				for {
					page, err := store.ListByType(ctx, q)
					if err != nil {
						return err
					}
					for _, e := range page.Events {
						if err := out.Encode(e); err != nil {
							return err
						}
					}
					if page.Next == "" {
						return nil
					}
					q.Cursor = page.Next
				}
			case eventType == "" && len(args) == 2:
				evs, err := store.Load(ctx, eventstore.Ref{Type: args[0], ID: args[1]}, after)
				if err != nil {
					return err
				}
				for _, e := range evs {
					if err := out.Encode(e); err != nil {
						return err
					}
				}
				return nil
			default:
				return errors.New("give either <aggregate-type> <aggregate-id>, or --type <event-type>")
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&eventType, "type", "", "list every event of this type, across aggregates, in ULID order")
	f.Int64Var(&after, "after", 0, "with an aggregate: only events with a sequence above this")
	f.StringVar(&from, "from", "", "with --type: events prepared at or after this RFC 3339 time")
	f.StringVar(&to, "to", "", "with --type: events prepared before this RFC 3339 time")
	f.IntVar(&limit, "page-size", 0, "with --type: events per DynamoDB page (default 100)")
	return cmd
}

func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return time.Parse(time.RFC3339, s)
}
