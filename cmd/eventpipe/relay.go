package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/health"
)

func relayCommand() *cobra.Command {
	var (
		status      bool
		streams     []string
		workerID    string
		metricsAddr string
		leaseFor    time.Duration
		batchSize   int32
		idlePoll    time.Duration
		maxIdlePoll time.Duration
		discovery   time.Duration
		drain       *drainSettings
	)
	cmd := &cobra.Command{
		Use:   "relay",
		Short: "Republish the events and analytics tables' streams onto Kafka (shard leases, checkpoints)",
		Long: `relay reads DynamoDB Streams and publishes their items onto Kafka, one relay per
stream, all in this process (--streams picks them):

  events     the events table: every EVENT# item as an envelope on
             events.<aggregate type> and every OUTBOUND# item on outbound.<name>,
             keyed by aggregate id. Undecodable records go to poison.relay.
  analytics  the analytics table (EVENTPIPE_ANALYTICS_TABLE): every raw event
             on analytics.<source>, keyed by session id; sessions and
             aggregations are not published. Undecodable records go to
             poison.relay.analytics.

Several relay processes share each stream's shards through leases in
EVENTPIPE_LEASES_TABLE (one table for both streams); a dead one's shards are
taken over after --lease-duration. A batch is checkpointed only after Kafka
acknowledged all of it. If one stream's relay fails (its table is missing:
run 'eventpipe migrate'), the others stop too and relay exits with the error.
Metrics carry the label stream=events|analytics.

--status prints each stream's leases and checkpoints instead of relaying.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			ep := eventpipe.EndpointsFromEnv()
			if status {
				return printRelayStatus(ctx, cmd, ep, streams)
			}
			if err := drain.resolve(); err != nil {
				return fmt.Errorf("relay: %w", err)
			}
			reg := eventpipe.NewMetricsRegistry()
			probes, err := health.New(health.Config{Logger: slog.Default()})
			if err != nil {
				return err
			}
			var relays []*eventpipe.Relay
			defer func() {
				for _, r := range relays {
					_ = r.Close()
				}
			}()
			for _, stream := range streams {
				r, err := eventpipe.NewRelay(ctx, eventpipe.RelayConfig{
					Stream: stream, Process: eventpipe.Process{Catalog: catalog, Endpoints: ep, Logger: slog.Default()}, WorkerID: workerID, LeaseDuration: leaseFor,
					DiscoveryInterval: discovery, BatchSize: batchSize, IdlePoll: idlePoll, MaxIdlePoll: maxIdlePoll, Registerer: reg,
				})
				if err != nil {
					return err
				}
				relays = append(relays, r)
			}
			eventpipe.AddRelayChecks(probes, relays)
			var serve func(context.Context) error
			if metricsAddr != "" {
				serve = func(ctx context.Context) error { return eventpipe.ServeProbes(ctx, metricsAddr, reg, probes) }
			}
			// On SIGTERM each relay stops reading, checkpoints what Kafka
			// acknowledged and releases its leases (relay.Relay.Run).
			return drain.run(ctx, probes, serve, func(ctx context.Context) error {
				go startedWhen(ctx, probes, func() bool { return eventpipe.RelaysStarted(relays) })
				g, ctx := errgroup.WithContext(ctx)
				for _, r := range relays {
					g.Go(func() error {
						if err := r.Run(ctx); err != nil {
							return fmt.Errorf("relay %s: %w", r.StreamName(), err)
						}
						return context.Canceled // a clean stop: stop the other relays too
					})
				}
				if err := g.Wait(); err != nil && err != context.Canceled {
					return err
				}
				return nil
			})
		},
	}
	addTracingFlag(cmd)
	f := cmd.Flags()
	f.BoolVar(&status, "status", false, "print the shard leases and checkpoints of --streams, then exit")
	f.StringSliceVar(&streams, "streams", eventpipe.RelayStreams(), "streams to relay: events, analytics (comma-separated)")
	f.StringVar(&workerID, "worker-id", "", "id written into held leases (default hostname-pid-random, one per stream)")
	f.StringVar(&metricsAddr, "metrics-addr", "127.0.0.1:9464", "serve /metrics, /healthz and the probes /livez, /readyz and /startupz here (empty: off)")
	f.DurationVar(&leaseFor, "lease-duration", 10*time.Second, "a lease not renewed for this long is taken over")
	f.DurationVar(&discovery, "discovery-interval", 0, "how often shards and leases are listed and free ones taken, released ones too (default 2s, or a third of --lease-duration when shorter; at most that third)")
	drain = addDrainFlags(cmd)
	f.Int32Var(&batchSize, "batch-size", 1000, "GetRecords limit (1–1000); at most this many records repeat after a crash")
	f.DurationVar(&idlePoll, "idle-poll", 100*time.Millisecond, "pause after an empty read, doubling up to --max-idle-poll (most of a quiet table's latency; DynamoDB Streams allows 5 reads/s per shard)")
	f.DurationVar(&maxIdlePoll, "max-idle-poll", time.Second, "longest pause between reads of an idle shard")
	return cmd
}

// printRelayStatus prints the leases of each stream. A stream whose
// leases cannot be read (its table is missing) is reported in place and
// makes the command fail after the others are printed.
func printRelayStatus(ctx context.Context, cmd *cobra.Command, ep eventpipe.Endpoints, streams []string) error {
	out := cmd.OutOrStdout()
	var errs []error
	for i, name := range streams {
		if i > 0 {
			fmt.Fprintln(out)
		}
		stream, leases, err := eventpipe.RelayStreamStatus(ctx, ep, name)
		if err != nil {
			fmt.Fprintf(out, "%s: %v\n", name, err)
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		fmt.Fprintf(out, "%s stream %s\nleases in %s: %d\n\n", name, stream, ep.LeasesTable, len(leases))
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "SHARD\tPARENT\tOWNER\tCOUNTER\tCHECKPOINT\tFINISHED\tUPDATED")
		for _, l := range leases {
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%v\t%s\n", l.ShardID, dash(l.ParentShardID), dash(l.Owner), l.Counter,
				dash(l.Checkpoint), l.Finished, l.UpdatedAt.Format(time.RFC3339))
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
