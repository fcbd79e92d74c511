package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/eventstore"
	ddbstore "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	"github.com/eventpipe/eventpipe/internal/endpoints"
	"github.com/eventpipe/eventpipe/internal/httpapi"
	"github.com/eventpipe/eventpipe/projections"
)

func consumeCommand() *cobra.Command {
	var (
		all         bool
		metricsAddr string
	)
	names := catalog.ReadModelNames
	cmd := &cobra.Command{
		Use:   "consume <projection>... | --all",
		Short: "Run read-model projections into Postgres (" + strings.Join(names(), ", ") + ")",
		Long: `consume runs projections: each consumes its event topics in its own consumer
group (projection.<name>) and applies every event to its Postgres read model in
the same transaction as its position per aggregate, so redeliveries are skipped
and missing events are read from the event store first. A projection that has
applied nothing yet first catches up from the event store (events by type),
then follows the live topics. Run 'eventpipe migrate' once before.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if all {
				args = names()
			}
			if len(args) == 0 {
				return fmt.Errorf("consume: name a projection (%s) or pass --all", strings.Join(names(), ", "))
			}
			ctx := cmd.Context()
			ep := endpoints.FromEnv()
			store, err := eventpipe.OpenStore(ctx, ep, catalog, slog.Default())
			if err != nil {
				return err
			}
			db, err := pgxpool.New(ctx, ep.Postgres)
			if err != nil {
				return fmt.Errorf("consume: postgres: %w", err)
			}
			defer db.Close()
			pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: ep.KafkaBrokers, ClientID: "eventpipe-consume"})
			if err != nil {
				return err
			}
			defer pub.Close()
			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			g, ctx := errgroup.WithContext(ctx)
			for _, name := range args {
				p, ok := catalog.ReadModel(name)
				if !ok {
					return fmt.Errorf("consume: unknown projection %q (have %s)", name, strings.Join(names(), ", "))
				}
				applier, err := projections.NewApplier(projections.ApplierConfig{DB: db, Store: store, Projection: p})
				if err != nil {
					return err
				}
				runner, err := projections.NewRunner(projections.RunnerConfig{Applier: applier, Brokers: ep.KafkaBrokers,
					Topics: bus.Topics{Prefix: ep.TopicPrefix}, Publisher: pub, History: storeHistory(store), Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"projection": name}, reg)})
				if err != nil {
					return err
				}
				g.Go(func() error { return runner.Run(ctx) })
			}
			if metricsAddr != "" {
				srv, err := httpapi.New(httpapi.Config{Addr: metricsAddr, Registry: reg})
				if err != nil {
					return err
				}
				g.Go(func() error { return srv.Run(ctx, nil) })
			}
			if err := g.Wait(); err != nil && err != context.Canceled {
				return err
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "run every projection")
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", "127.0.0.1:9465", "serve /metrics and /healthz here (empty: off)")
	return cmd
}

// storeHistory pages the event store's events by type (GSI1, AP6) for a
// new projection's catch-up.
func storeHistory(s *ddbstore.Store) projections.HistoryPage {
	return func(ctx context.Context, eventType, cursor string) ([]eventstore.Envelope, string, error) {
		p, err := s.ListByType(ctx, ddbstore.TypeQuery{EventType: eventType, Cursor: cursor, Limit: 1000})
		return p.Events, p.Next, err
	}
}
