package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/health"
	"github.com/eventpipe/eventpipe/snapshots"
)

func consumeCommand() *cobra.Command {
	var (
		all           bool
		metricsAddr   string
		snapshotEvery int64
		noParking     bool
		noAutoRebuild bool
		startFlag     string
		drain         *drainSettings
	)
	names := func() []string { return eventpipe.ConsumerNames(catalog) }
	cmd := &cobra.Command{
		Use:   "consume <consumer>... | --all",
		Short: "Run consumers: read and search models, sagas, the analytics and snapshot consumers (" + strings.Join(names(), ", ") + ")",
		Long: `consume runs consumers of the catalogue, each in its own consumer group:
read models, search models, sagas, the analytics aggregator, the snapshotter,
and any handler a binary built on the catalogue registers. Run 'eventpipe
migrate' once before.

Where a consumer group that never committed starts (--start, else the kind's
default; once the group committed, it resumes where it stopped):
  history    read and search models (default): catch up from the event store
             with a durable cursor, resumed after any crash, then follow the
             live topics from a margin before the catch-up began
  earliest   the oldest record the topics still hold (the analytics and
             snapshots consumers' default)
  latest     only what is published after the first start (sagas' and
             handlers' default: they never act on events from before they
             were deployed); a read model started so shows no history
  <time>     the first record at or after an RFC 3339 time

A read model consumes its event topics in the group projection.<name> and
applies every event to its Postgres read model in the same transaction as its
position per aggregate, so redeliveries are skipped and missing events are
read from the event store first.

A read or search model records the version of its definition that built it
(projections.Versioned, 1 when it declares none). When the declared version
changes, consume rebuilds the model from the event store beside the live one
(a shadow schema, or a new index behind the alias), which keeps serving reads
and stays live, and swaps it in once it has caught up; a killed rebuild resumes
at the next start, and 'eventpipe status' shows its progress.
--no-auto-rebuild leaves the rebuild to 'eventpipe replay'.

The search models (todos-search, orders-search) write one document per aggregate
to Elasticsearch through their alias with _bulk, the aggregate's sequence as the
external version: the index itself refuses duplicates and stale redeliveries,
and each document carries its position.

An event a read or search model can never apply (a permanent error) is parked,
not poisoned: it and every later event of its aggregate wait, in order, in the
Postgres table parked_events, while the other aggregates flow. 'eventpipe
parked list' shows them; once the cause is fixed, 'eventpipe parked reapply'
re-applies them. --no-parking sends such an event to poison.projection.<name>
instead, and with it each later event of the aggregate whose gap repair fails
on it again. Catch-up from the event store does not park: a permanent failure
there stops consume.

The analytics consumer keeps the analytics table's sessions and hourly and
daily aggregations from the analytics.<source> topics the relay fills: it
folds a batch of each partition in memory and writes each touched bucket
and session once, counting every event exactly once (per-partition offset
watermarks on the buckets, recent event ids on the sessions).

The snapshots consumer reads every domain's events topics in its own group
(snapshots) and, for each event whose sequence is a multiple of
--snapshot-every, stores the aggregate's current state as its #SNAPSHOT
(latest snapshot plus later events, through the rules), so that loading an
aggregate replays at most about that many events. Commands never wait for
it; a redelivery or a restart only snapshots again, and a snapshot that can
never be taken (the rules reject a stored event) goes to poison.snapshots.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if all {
				args = names()
			}
			if len(args) == 0 {
				return fmt.Errorf("consume: name a consumer (%s) or pass --all", strings.Join(names(), ", "))
			}
			start, err := bus.ParseStart(startFlag)
			if err != nil {
				return fmt.Errorf("consume: --start: %w", err)
			}
			key, err := eventpipe.CommandKeyFromEnv()
			if err != nil {
				return fmt.Errorf("consume: %w", err)
			}
			if err := drain.resolve(); err != nil {
				return fmt.Errorf("consume: %w", err)
			}
			ctx := cmd.Context()
			reg := eventpipe.NewMetricsRegistry()
			probes, err := health.New(health.Config{Logger: slog.Default()})
			if err != nil {
				return err
			}
			consumers, err := eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{
				Process: eventpipe.Process{Catalog: catalog, Endpoints: eventpipe.EndpointsFromEnv(), Logger: slog.Default()}, Names: args, Start: start, CommandKey: key, SnapshotEvery: snapshotEvery, NoParking: noParking, NoAutoRebuild: noAutoRebuild,
				Registerer: reg,
			})
			if err != nil {
				return fmt.Errorf("consume: %w", err)
			}
			defer consumers.Close()
			consumers.AddChecks(probes)
			var serve func(context.Context) error
			if metricsAddr != "" {
				serve = func(ctx context.Context) error { return eventpipe.ServeProbes(ctx, metricsAddr, reg, probes) }
			}
			// On SIGTERM the consumers stop taking messages, finish those in
			// flight and commit their offsets as they leave their groups.
			return drain.run(ctx, probes, serve, func(ctx context.Context) error {
				probes.Started()
				return consumers.Run(ctx)
			})
		},
	}
	addTracingFlag(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "run every consumer")
	cmd.Flags().StringVar(&startFlag, "start", "", "where a consumer group that never committed starts: history, earliest, latest or an RFC 3339 time (default: each kind's own)")
	cmd.Flags().Int64Var(&snapshotEvery, "snapshot-every", snapshots.DefaultEvery, "the snapshots consumer snapshots an aggregate every this many events")
	cmd.Flags().BoolVar(&noAutoRebuild, "no-auto-rebuild", false, "do not rebuild a read or search model whose declared version changed: keep its rows, warn, and leave the rebuild to `eventpipe replay`")
	cmd.Flags().BoolVar(&noParking, "no-parking", false, "poison permanent failures of read and search models instead of parking them (the pre-parking behaviour)")
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", "127.0.0.1:9465", "serve /metrics, /healthz and the probes /livez, /readyz and /startupz here (empty: off)")
	drain = addDrainFlags(cmd)
	return cmd
}
