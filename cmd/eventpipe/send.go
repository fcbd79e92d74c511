package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/commands"
)

func sendCommand() *cobra.Command {
	var (
		id, data, actor string
		keyID           string
		expected        int64
		wait            bool
		timeout         time.Duration
	)
	cmd := &cobra.Command{
		Use:   "send <command-type>",
		Short: "Publish a command onto the bus (and with --wait print its result)",
		Example: `  eventpipe send CreateTodo --aggregate-id t1 --data '{"title":"buy milk"}' --wait
  eventpipe send UpdateTodo --aggregate-id t1 --data '{"title":"buy oat milk"}' --expected-version 1 --wait
  EVENTPIPE_COMMAND_SIGNING_KEY_FILE=ops.key eventpipe send CreateTodo --aggregate-id t2 --key-id ops --actor alice --wait`,
		Long: `send publishes a command on its commands topic.

The command is signed when a producer key is set: EVENTPIPE_COMMAND_SIGNING_KEY_FILE
(or EVENTPIPE_COMMAND_SIGNING_KEY) and its id, --key-id or
EVENTPIPE_COMMAND_SIGNING_KEY_ID, one of the command handlers' producer keys
(EVENTPIPE_COMMAND_PRODUCER_KEYS_FILE of serve). The signature covers the id,
type, aggregate, payload, expected version, reply topic, --actor and issue
time; the events then record the actor as verified (actor_source "signed").
Unsigned, --actor is recorded as claimed, and command handlers that require
signed commands refuse it. With a key, --wait takes only the answer signed
for this command and ignores any other reply with its id.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			ep := eventpipe.EndpointsFromEnv()
			c, err := catalog.NewCommand(args[0], id, json.RawMessage(data))
			if err != nil {
				return err
			}
			c.Actor = actor
			if cmd.Flags().Changed("expected-version") {
				c.ExpectedVersion = &expected
			}
			signer, err := eventpipe.SignerFromEnvWithID(keyID)
			if err != nil {
				return err
			}
			sender, err := eventpipe.NewSender(eventpipe.SenderConfig{Process: eventpipe.Process{Endpoints: ep, Catalog: catalog}, Signer: signer})
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
	addTracingFlag(cmd)
	f := cmd.Flags()
	f.StringVar(&id, "aggregate-id", "", "id of the aggregate the command is for (required)")
	f.StringVar(&data, "data", "{}", "command payload, a JSON object")
	f.Int64Var(&expected, "expected-version", 0, "fail with a conflict unless the aggregate is at this version")
	f.BoolVar(&wait, "wait", false, "wait for the result and print it")
	f.DurationVar(&timeout, "timeout", 30*time.Second, "how long --wait waits")
	f.StringVar(&actor, "actor", "", "who sends the command (recorded in event metadata: as verified when the command is signed, else as claimed)")
	f.StringVar(&keyID, "key-id", "", "id of the producer key that signs the command (default $"+eventpipe.EnvCommandSigningKeyID+"; the key: $"+eventpipe.EnvCommandSigningKey+"_FILE)")
	_ = cmd.MarkFlagRequired("aggregate-id")
	return cmd
}
