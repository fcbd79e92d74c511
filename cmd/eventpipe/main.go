// Command eventpipe runs every part of the eventpipe pipeline: the local
// stack, and (as the project grows) migrations, command handlers, the relay,
// projections, replay and benchmarks. Each subcommand reads its addresses
// from the environment (see `eventpipe stack env`).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/tracing"
)

// catalog is what the binary knows: the built-in domains, their read
// models and the upcasters every subcommand reads events through.
var catalog = eventpipe.Builtin()

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel()})))
	// Traces go out over OTLP when OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT
	// is set; otherwise nothing is exported.
	shutdown, err := tracing.Setup(ctx, tracing.FromEnv())
	if err != nil {
		fmt.Fprintln(os.Stderr, "eventpipe:", err)
		os.Exit(1)
	}
	err = rootCommand().ExecuteContext(ctx)
	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	_ = shutdown(flushCtx) // flush the spans of a short command such as send
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "eventpipe:", err)
		os.Exit(1)
	}
}

func rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "eventpipe",
		Short: "An event-sourcing pipeline: DynamoDB event store, Kafka bus, read models",
		Long: `eventpipe is an event-sourcing pipeline on Watermill: commands on a Kafka bus,
handlers appending to a DynamoDB event store with optimistic concurrency, a relay
from the table's stream back onto the bus, and subscribers building read models.

Addresses come from the environment; 'eventpipe stack env' prints them.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(stackCommand(), migrateCommand(), serveCommand(), sendCommand(), eventsCommand(), relayCommand(), consumeCommand(), replayCommand(), demoCommand(), statusCommand(), trackCommand(), analyticsCommand(), benchReportCommand(), parkedCommand())
	return root
}

func logLevel() slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(os.Getenv("EVENTPIPE_LOG_LEVEL"))); err != nil {
		return slog.LevelInfo
	}
	return l
}
