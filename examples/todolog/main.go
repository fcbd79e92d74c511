// Command todolog is an example of a program of its own built on
// eventpipe as a library: it adds a read model (TodoLog, with its own
// Postgres table and migrations) to the built-in catalogue, runs it, can
// rebuild it, and sends todo commands.
//
//	todolog migrate            create the tables (eventpipe's and todo_log)
//	todolog consume            run the todo_log read model until Ctrl-C (-metrics-addr serves /metrics)
//	todolog replay             rebuild todo_log from the event store
//	todolog send -n 10 -id t   create todos t-000… (then update them with -updates)
//
// Addresses come from the environment, as for the eventpipe binary
// (EVENTPIPE_DYNAMODB_ENDPOINT, EVENTPIPE_KAFKA_BROKERS,
// EVENTPIPE_POSTGRES_URL, …); the search_path parameter of
// EVENTPIPE_POSTGRES_URL names the Postgres schema (default public), for
// every subcommand alike.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/operator"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "todolog:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: todolog migrate|consume|replay|send [flags]")
	}
	fl := flag.NewFlagSet(args[0], flag.ContinueOnError)
	n := fl.Int("n", 10, "send: how many todos")
	updates := fl.Int("updates", 0, "send: updates per todo after its creation")
	prefix := fl.String("id", "todo", "send: todo id prefix")
	metricsAddr := fl.String("metrics-addr", "", "consume: serve /metrics here (empty: off)")
	if err := fl.Parse(args[1:]); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	catalog := eventpipe.Builtin()
	if err := catalog.AddReadModel(TodoLog{}); err != nil {
		return err
	}
	ep := eventpipe.EndpointsFromEnv()
	switch args[0] {
	case "migrate":
		m, err := eventpipe.Migrate(ctx, eventpipe.MigrateConfig{Process: eventpipe.Process{Catalog: catalog, Endpoints: ep}})
		if err != nil {
			return err
		}
		fmt.Printf("todo_log at version %d in schema %s\n", m.ReadModelVersions["todo_log"], m.PostgresSchema)
		return nil
	case "consume":
		reg := eventpipe.NewMetricsRegistry()
		c, err := eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{Process: eventpipe.Process{Catalog: catalog, Endpoints: ep}, Names: []string{"todo_log"}, Registerer: reg})
		if err != nil {
			return err
		}
		defer c.Close()
		if *metricsAddr != "" {
			go func() {
				if err := eventpipe.ServeMetrics(ctx, *metricsAddr, reg); err != nil {
					slog.Error("metrics server", "err", err)
				}
			}()
		}
		if err := c.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	case "replay":
		res, err := operator.Replay(ctx, operator.ReplayConfig{Process: eventpipe.Process{Catalog: catalog, Endpoints: ep}, ReadModel: "todo_log"})
		if err != nil {
			return err
		}
		fmt.Printf("todo_log rebuilt: %+v\n", res)
		return nil
	case "send":
		return send(ctx, catalog, ep, *prefix, *n, *updates)
	}
	return fmt.Errorf("unknown subcommand %q", args[0])
}

// send creates n todos and updates each of them, waiting for every answer.
func send(ctx context.Context, catalog *eventpipe.Catalog, ep eventpipe.Endpoints, prefix string, n, updates int) error {
	sender, err := eventpipe.NewSender(eventpipe.SenderConfig{Process: eventpipe.Process{Endpoints: ep, Catalog: catalog, Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		return err
	}
	defer sender.Close()
	for round := 0; round <= updates; round++ {
		typ := "UpdateTodo"
		if round == 0 {
			typ = "CreateTodo"
		}
		for i := range n {
			payload, _ := json.Marshal(map[string]string{"title": fmt.Sprintf("%s %d", typ, round)})
			cmd, err := catalog.NewCommand(typ, fmt.Sprintf("%s-%03d", prefix, i), payload)
			if err != nil {
				return err
			}
			res, err := sender.SendAndWait(ctx, cmd)
			if err != nil {
				return err
			}
			if res.Status != commands.StatusAccepted {
				return fmt.Errorf("%s %s: %s (%s)", typ, cmd.AggregateID, res.Status, res.Reason)
			}
		}
	}
	fmt.Printf("sent %d commands\n", n*(updates+1))
	return nil
}
