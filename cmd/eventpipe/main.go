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
	"github.com/eventpipe/eventpipe/tracing/otlp"
)

// catalog is what the binary knows: the built-in domains, their read
// models and the upcasters every subcommand reads events through.
var catalog = eventpipe.Builtin()

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel()})))
	var traces tracingSetup
	err := rootCommand(&traces).ExecuteContext(ctx)
	traces.flush(ctx) // the spans of a short command such as send
	if err != nil {
		fmt.Fprintln(os.Stderr, "eventpipe:", err)
		os.Exit(1)
	}
}

// tracingSetup sets tracing up before a subcommand runs: OTLP/HTTP
// export when --otlp-endpoint (serve, consume, relay, send) or
// OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT gives an endpoint, otherwise
// propagation only (package tracing).
type tracingSetup struct {
	shutdown func(context.Context) error
}

// otlpEndpointFlag names the flag addTracingFlag registers.
const otlpEndpointFlag = "otlp-endpoint"

// addTracingFlag registers --otlp-endpoint on a command that traces.
func addTracingFlag(cmd *cobra.Command) {
	cmd.Flags().String(otlpEndpointFlag, "", "export traces over OTLP/HTTP to this URL, e.g. http://127.0.0.1:4318 (default: $"+
		otlp.EnvTracesEndpoint+", else $"+otlp.EnvEndpoint+"; neither: no export)")
}

// setup runs as the root's PersistentPreRunE.
func (t *tracingSetup) setup(cmd *cobra.Command, _ []string) error {
	cfg := otlp.FromEnv()
	if f := cmd.Flags().Lookup(otlpEndpointFlag); f != nil && f.Value.String() != "" {
		cfg.Endpoint = f.Value.String()
	}
	shutdown, err := otlp.Setup(cmd.Context(), cfg)
	if err != nil {
		return err
	}
	t.shutdown = shutdown
	return nil
}

// flush exports the spans still buffered, waiting at most 5 s.
func (t *tracingSetup) flush(ctx context.Context) {
	if t.shutdown == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := t.shutdown(ctx); err != nil {
		slog.Warn("traces not flushed", "err", err)
	}
}

func rootCommand(traces *tracingSetup) *cobra.Command {
	root := &cobra.Command{
		Use:   "eventpipe",
		Short: "An event-sourcing pipeline: DynamoDB event store, Kafka bus, read models",
		Long: `eventpipe is an event-sourcing pipeline on Watermill: commands on a Kafka bus,
handlers appending to a DynamoDB event store with optimistic concurrency, a relay
from the table's stream back onto the bus, and subscribers building read models.

Addresses come from the environment; 'eventpipe stack env' prints them.
In a container without a shell or curl, 'eventpipe probe <url>' is the health
check (e.g. of http://127.0.0.1:8080/readyz).`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		PersistentPreRunE: traces.setup,
	}
	root.AddCommand(stackCommand(), migrateCommand(), serveCommand(), sendCommand(), eventsCommand(), relayCommand(), consumeCommand(), replayCommand(), demoCommand(), statusCommand(), trackCommand(), analyticsCommand(), parkedCommand(), poisonCommand(), recalculateCommand(), forgetCommand(), exportCommand(), sagasCommand(), schemasCommand(catalog), authCommand(), versionCommand(), probeCommand())
	return root
}

func logLevel() slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(os.Getenv("EVENTPIPE_LOG_LEVEL"))); err != nil {
		return slog.LevelInfo
	}
	return l
}
