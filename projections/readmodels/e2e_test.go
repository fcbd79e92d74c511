package readmodels_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/internal/dynamoclient"
	migrate "github.com/eventpipe/eventpipe/migrations/dynamodb"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/readmodels"
	"github.com/eventpipe/eventpipe/relay"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestStoreRelayKafkaPostgresEqualsAReplay runs the whole read path:
// events appended to DynamoDB Local, the relay onto Kafka, the accounts
// projection's Runner into Postgres. The live read model equals a
// from-scratch replay of the store into another schema, row by row; then
// every event is published again and nothing changes.
func TestStoreRelayKafkaPostgresEqualsAReplay(t *testing.T) {
	const accounts, perAccount = 20, 15
	ctx := context.Background()
	live := newWorld(t)
	topics := bus.Topics{Prefix: testenv.UniqueName(t, "ns") + "."}
	brokers := testenv.KafkaBrokers(t)
	var all []eventstore.Envelope
	for i := range accounts {
		evs, _ := live.openAccount(t, fmt.Sprintf("acc-%02d", i), perAccount)
		all = append(all, evs...)
	}

	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	leases := testenv.UniqueName(t, "leases")
	if err := migrate.CreateLeasesTable(ctx, live.ddb, leases); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, live.ddb, leases) })
	streams, err := dynamoclient.NewStreams(ctx, dynamoclient.Config{Endpoint: testenv.Endpoints().DynamoDB})
	if err != nil {
		t.Fatal(err)
	}
	rl, err := relay.New(relay.Config{Streams: streams, DynamoDB: live.ddb, EventsTable: live.table, LeaseTable: leases,
		Publisher: pub, Topics: topics, WorkerID: "e2e", DiscoveryInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	applier, err := projections.NewApplier(projections.ApplierConfig{DB: live.db, Store: live.store, Projection: readmodels.Accounts{}})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	runner, err := projections.NewRunner(projections.RunnerConfig{Applier: applier, Brokers: brokers, Topics: topics, Publisher: pub, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	relayDone, runnerDone := make(chan error, 1), make(chan error, 1)
	go func() { relayDone <- rl.Run(runCtx) }()
	go func() { runnerDone <- runner.Run(runCtx) }()
	defer func() { cancel(); <-relayDone; <-runnerDone }()

	waitApplied := func() {
		t.Helper()
		applied := func() int64 {
			var n int64
			if err := live.db.QueryRow(ctx, `SELECT coalesce(sum(seq), 0) FROM projection_positions WHERE projection = 'accounts'`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		integration.AwaitProgress(t, "events applied", applied, int64(len(all)))
		if n := applied(); n != int64(len(all)) {
			t.Fatalf("applied %d of %d events", n, len(all))
		}
	}
	waitApplied()
	if n := gathered(t, reg, "eventpipe_projection_events_applied_total"); n != float64(len(all)) {
		t.Errorf("applied counter %v, want %d", n, len(all))
	}
	if age := gathered(t, reg, "eventpipe_projection_last_event_age_seconds"); age <= 0 || age > 300 {
		t.Errorf("last event age %v s, want a positive lag", age)
	}
	// The Kafka offset lag of the projection's group falls to 0 once the
	// applied messages' offsets are committed and the monitor has polled.
	integration.Await(t, "a consumer lag of 0", func() error {
		series, lag := 0, 0.0
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == kafka.LagMetricName {
				for _, m := range f.Metric {
					series++
					lag += m.Gauge.GetValue()
				}
			}
		}
		if series == 0 || lag != 0 {
			return fmt.Errorf("consumer lag %v over %d series", lag, series)
		}
		return nil
	})

	replay := newWorld(t)
	replay.store = live.store
	replayApplier, err := projections.NewApplier(projections.ApplierConfig{DB: replay.db, Store: live.store, Projection: readmodels.Accounts{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replayApplier.Apply(ctx, all); err != nil {
		t.Fatal(err)
	}
	compare := func() {
		t.Helper()
		for _, q := range []string{
			`SELECT account_id, balance, version, apply_count FROM accounts ORDER BY 1`,
			`SELECT account_id, seq, description, amount, balance FROM account_transactions ORDER BY 1, 2`,
			`SELECT aggregate_id, seq FROM projection_positions ORDER BY 1`,
		} {
			a, b := dump(t, live, q), dump(t, replay, q)
			if a != b || a == "" {
				t.Fatalf("%s\nlive:\n%s\nreplay:\n%s", q, a, b)
			}
		}
	}
	compare()

	// Publish every event again: positions make it a no-op.
	var msgs []*message.Message
	for _, e := range all {
		m, err := bus.EventMessage(e)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	if err := pub.Publish(topics.Events(all[0].AggregateType), msgs...); err != nil {
		t.Fatal(err)
	}
	testenv.WaitCommitted(t, brokers, runner.ConsumerGroup(), topics.Events(all[0].AggregateType), int64(2*len(all)))
	compare()
}

// gathered returns the value of the single series called name.
func gathered(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.Metric) == 1 {
			m := f.Metric[0]
			if m.Counter != nil {
				return m.Counter.GetValue()
			}
			return m.Gauge.GetValue()
		}
	}
	t.Fatalf("no single series %s", name)
	return 0
}

func dump(t *testing.T, w *world, q string) string {
	t.Helper()
	rows, err := w.db.Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := ""
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		out += fmt.Sprintln(vals...)
	}
	return out
}
