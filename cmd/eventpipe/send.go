package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/internal/endpoints"
)

func sendCommand() *cobra.Command {
	var (
		id, data, actor string
		expected        int64
		wait            bool
		timeout         time.Duration
	)
	cmd := &cobra.Command{
		Use:   "send <command-type>",
		Short: "Publish a command onto the bus (and with --wait print its result)",
		Example: `  eventpipe send CreateTodo --aggregate-id t1 --data '{"title":"buy milk"}' --wait
  eventpipe send UpdateTodo --aggregate-id t1 --data '{"title":"buy oat milk"}' --expected-version 1 --wait`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			ep := endpoints.FromEnv()
			aggregateType, ok := catalog.AggregateTypeOf(args[0])
			if !ok {
				return fmt.Errorf("%w %q (known: %v)", commands.ErrUnknownCommand, args[0], catalog.CommandTypes())
			}
			c := commands.New(args[0], aggregateType, id, json.RawMessage(data))
			c.Actor = actor
			if cmd.Flags().Changed("expected-version") {
				c.ExpectedVersion = &expected
			}
			if err := c.Validate(); err != nil {
				return err
			}
			sender, err := kafka.NewSender(kafka.SenderConfig{
				Brokers: ep.KafkaBrokers, Topics: bus.Topics{Prefix: ep.TopicPrefix}, Logger: watermill.NopLogger{},
			})
			if err != nil {
				return err
			}
			defer sender.Close()
			out := json.NewEncoder(cmd.OutOrStdout())
			if !wait {
				if err := sender.Send(ctx, c); err != nil {
					return err
				}
				return out.Encode(map[string]string{"command_id": c.ID, "topic": c.Topic(bus.Topics{Prefix: ep.TopicPrefix})})
			}
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			res, err := sender.SendAndWait(ctx, c)
			if err != nil {
				return err
			}
			if err := out.Encode(res); err != nil {
				return err
			}
			if res.Status != commands.StatusAccepted {
				return fmt.Errorf("command %s %s: %s", c.ID, res.Status, res.Reason)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&id, "aggregate-id", "", "id of the aggregate the command is for (required)")
	f.StringVar(&data, "data", "{}", "command payload, a JSON object")
	f.Int64Var(&expected, "expected-version", 0, "fail with a conflict unless the aggregate is at this version")
	f.BoolVar(&wait, "wait", false, "wait for the result and print it")
	f.DurationVar(&timeout, "timeout", 30*time.Second, "how long --wait waits")
	f.StringVar(&actor, "actor", "", "who sends the command (recorded in event metadata)")
	_ = cmd.MarkFlagRequired("aggregate-id")
	return cmd
}
