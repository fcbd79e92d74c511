package main

import (
	"context"
	"fmt"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/eventpipe/eventpipe"
)

func relayCommand() *cobra.Command {
	var (
		status      bool
		workerID    string
		metricsAddr string
		leaseFor    time.Duration
		batchSize   int32
	)
	cmd := &cobra.Command{
		Use:   "relay",
		Short: "Republish the events table's stream onto Kafka (shard leases, checkpoints)",
		Long: `relay reads the DynamoDB Stream of the events table and publishes every EVENT#
item as an envelope on events.<aggregate type> and every OUTBOUND# item on
outbound.<name>, keyed by aggregate id. Several relay processes share the
stream's shards through leases in EVENTPIPE_LEASES_TABLE; a dead one's shards
are taken over after --lease-duration. A batch is checkpointed only after Kafka
acknowledged all of it. Records that cannot be decoded go to poison.relay.

--status prints the leases and checkpoints instead of relaying.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			ep := eventpipe.EndpointsFromEnv()
			if status {
				return printRelayStatus(ctx, cmd, ep)
			}
			reg := eventpipe.NewMetricsRegistry()
			r, err := eventpipe.NewRelay(ctx, eventpipe.RelayConfig{
				Catalog: catalog, Endpoints: ep, WorkerID: workerID, LeaseDuration: leaseFor, BatchSize: batchSize,
				Registerer: reg, Logger: slog.Default(),
			})
			if err != nil {
				return err
			}
			defer r.Close()
			g, ctx := errgroup.WithContext(ctx)
			if metricsAddr != "" {
				g.Go(func() error { return eventpipe.ServeMetrics(ctx, metricsAddr, reg) })
			}
			g.Go(func() error {
				err := r.Run(ctx)
				if err == nil {
					err = context.Canceled // stop the metrics server too
				}
				return err
			})
			if err := g.Wait(); err != nil && err != context.Canceled {
				return err
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&status, "status", false, "print the shard leases and checkpoints, then exit")
	f.StringVar(&workerID, "worker-id", "", "id written into held leases (default hostname-pid-random)")
	f.StringVar(&metricsAddr, "metrics-addr", "127.0.0.1:9464", "serve /metrics and /healthz here (empty: off)")
	f.DurationVar(&leaseFor, "lease-duration", 10*time.Second, "a lease not renewed for this long is taken over")
	f.Int32Var(&batchSize, "batch-size", 1000, "GetRecords limit (1–1000); at most this many records repeat after a crash")
	return cmd
}

func printRelayStatus(ctx context.Context, cmd *cobra.Command, ep eventpipe.Endpoints) error {
	stream, leases, err := eventpipe.RelayStatus(ctx, ep)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "stream %s\nleases in %s: %d\n\n", stream, ep.LeasesTable, len(leases))
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SHARD\tPARENT\tOWNER\tCOUNTER\tCHECKPOINT\tFINISHED\tUPDATED")
	for _, l := range leases {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%v\t%s\n", l.ShardID, dash(l.ParentShardID), dash(l.Owner), l.Counter,
			dash(l.Checkpoint), l.Finished, l.UpdatedAt.Format(time.RFC3339))
	}
	return w.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
