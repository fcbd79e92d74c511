package e2e_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
	migrate "github.com/eventpipe/eventpipe/migrations/dynamodb"
	pgmigrate "github.com/eventpipe/eventpipe/migrations/postgres"
	"github.com/eventpipe/eventpipe/projections/readmodels"
)

// BenchmarkEndToEndLatency measures how long a command takes to show up
// in a read model: b.N RecordTransaction commands are published onto the
// bus at a fixed rate, half of the append ceiling measured first in the
// same run (the same commands through the Dispatcher directly, 16 at a
// time), and travel command topic → command handler → DynamoDB → stream →
// relay → events topic → the accounts projection → Postgres. A poller
// sees each transaction's row appear in account_transactions. Reported:
// p50, p99 and max from publishing the command to the row being visible,
// and each stage's share of the median: command (publish to the event's
// OccurredAt, set when the handler appends), relay (OccurredAt to the
// relay's Kafka record timestamp) and projection (the record timestamp to
// the row being seen). Nothing about time is asserted.
func BenchmarkEndToEndLatency(b *testing.B) {
	const accounts = 32
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ep := rigs.Endpoints(b)
	db := withLeasesAndReadModels(b, &ep, "lat")
	quiet := slog.New(slog.DiscardHandler)
	svc, err := eventpipe.NewWriteSide(ctx, eventpipe.WriteSideConfig{Process: eventpipe.Process{Endpoints: ep, Logger: quiet}, ConsumerGroup: testenv.UniqueName(b, "g")})
	if err != nil {
		b.Fatal(err)
	}
	defer svc.Close()
	rel, err := eventpipe.NewRelay(ctx, eventpipe.RelayConfig{Process: eventpipe.Process{Endpoints: ep, Logger: quiet}, DiscoveryInterval: 200 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	defer rel.Close()
	cons, err := eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{Process: eventpipe.Process{Endpoints: ep, Logger: quiet}, DB: db, Names: []string{readmodels.Accounts{}.Name()},
		Start: bus.StartEarliest})
	if err != nil {
		b.Fatal(err)
	}
	defer cons.Close()
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{svc.RunCommandHandlers, rel.Run, cons.Run} {
		wg.Go(func() { _ = run(ctx) })
	}
	defer func() { cancel(); wg.Wait() }()
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: ep.KafkaBrokers, Logger: watermill.NopLogger{}})
	if err != nil {
		b.Fatal(err)
	}
	defer pub.Close()
	topics := bus.Topics{Prefix: ep.TopicPrefix}

	account := func(side string, i int) string { return fmt.Sprintf("%s-%02d", side, i%accounts) }
	transact := func(side string, n int) commands.Command {
		cmd, err := commands.NewJSON(bankaccount.RecordTransaction, bankaccount.AggregateType, account(side, n),
			bankaccount.TransactionAcceptedData{Desc: fmt.Sprintf("%s-%d", side, n), Amount: 1})
		if err != nil {
			b.Fatal(err)
		}
		return cmd
	}
	for i := range accounts {
		for _, side := range []string{"ceil", "lat"} {
			cmd, _ := commands.NewJSON(bankaccount.OpenAccount, bankaccount.AggregateType, account(side, i), struct{}{})
			if res, err := svc.Dispatcher.Dispatch(ctx, cmd); err != nil || res.Status != commands.StatusAccepted {
				b.Fatalf("open: %+v %v", res, err)
			}
		}
	}
	// The pipeline is warm once an account opening is in the read model.
	waitRow(b, db, `SELECT count(*) FROM accounts`, 2*accounts)

	// The append ceiling: the same commands through the Dispatcher, 16
	// at a time.
	start := time.Now()
	var ceilWG sync.WaitGroup
	for w := range 16 {
		ceilWG.Go(func() {
			for n := w; n < b.N; n += 16 {
				if res, err := svc.Dispatcher.Dispatch(ctx, transact("ceil", n)); err != nil || res.Status != commands.StatusAccepted {
					b.Errorf("ceiling command %d: %+v %v", n, res, err)
					return
				}
			}
		})
	}
	ceilWG.Wait()
	ceiling := float64(b.N) / time.Since(start).Seconds()
	rate := ceiling / 2
	// Start from a pipeline that has caught up with the ceiling's events.
	waitRow(b, db, `SELECT count(*) FROM account_transactions WHERE description LIKE 'ceil-%'`, b.N)

	b.ResetTimer()
	sent := make([]time.Time, b.N)
	type rowsSeen struct {
		at  map[string]time.Time
		err error
	}
	seen := make(chan rowsSeen, 1)
	go func() { // watching while the commands go out
		at, err := seeRows(db, b.N)
		seen <- rowsSeen{at, err}
	}()
	begin := time.Now()
	for n := range b.N {
		time.Sleep(time.Until(begin.Add(time.Duration(float64(n) / rate * float64(time.Second)))))
		msg, err := transact("lat", n).ToMessage()
		if err != nil {
			b.Fatal(err)
		}
		sent[n] = time.Now()
		if err := pub.Publish(topics.Commands(bankaccount.AggregateType), msg); err != nil {
			b.Fatal(err)
		}
	}
	got := <-seen
	if got.err != nil {
		b.Fatal(got.err)
	}
	visible := got.at
	b.StopTimer()
	occurred, relayed := eventTimes(b, ep.KafkaBrokers, topics.Events(bankaccount.AggregateType), b.N)

	var total, command, relay, projection []time.Duration
	for n := range b.N {
		desc := fmt.Sprintf("lat-%d", n)
		total = append(total, visible[desc].Sub(sent[n]))
		command = append(command, occurred[desc].Sub(sent[n]))
		relay = append(relay, relayed[desc].Sub(occurred[desc]))
		projection = append(projection, visible[desc].Sub(relayed[desc]))
	}
	p50 := percentile(total, 50)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ceiling, "ceiling_commands/s")
	b.ReportMetric(rate, "sent_commands/s")
	b.ReportMetric(ms(p50), "p50_ms")
	b.ReportMetric(ms(percentile(total, 99)), "p99_ms")
	b.ReportMetric(ms(slices.Max(total)), "max_ms")
	b.ReportMetric(ms(percentile(command, 50))/ms(p50), "command_share")
	b.ReportMetric(ms(percentile(relay, 50))/ms(p50), "relay_share")
	b.ReportMetric(ms(percentile(projection, 50))/ms(p50), "projection_share")
}

// waitRow waits until query counts want rows.
func waitRow(b *testing.B, db *pgxpool.Pool, query string, want int) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var n int
		if err := db.QueryRow(context.Background(), query).Scan(&n); err != nil {
			b.Fatal(err)
		}
		if n >= want {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: %d rows after 2 minutes, want %d", query, n, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// seeRows polls account_transactions every 2 ms until the n "lat-"
// transactions are there, and returns when each was first seen. It runs
// beside the benchmark, so it returns its error rather than failing b.
func seeRows(db *pgxpool.Pool, n int) (map[string]time.Time, error) {
	seen := map[string]time.Time{}
	deadline := time.Now().Add(5 * time.Minute)
	for len(seen) < n {
		rows, err := db.Query(context.Background(), `SELECT description FROM account_transactions WHERE description LIKE 'lat-%'`)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		var desc string
		if _, err := pgx.ForEachRow(rows, []any{&desc}, func() error {
			if _, ok := seen[desc]; !ok {
				seen[desc] = now
			}
			return nil
		}); err != nil {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d transactions visible after 5 minutes", len(seen), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return seen, nil
}

// eventTimes reads the events topic from the start until it has the 2n
// transactions of both runs, and returns for each its event's OccurredAt and its record's timestamp
// (set by the relay's producer).
func eventTimes(b *testing.B, brokers []string, topic string, n int) (occurred, relayed map[string]time.Time) {
	b.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = kafka.KafkaVersion
	consumer, err := sarama.NewConsumer(brokers, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer consumer.Close()
	parts, err := consumer.Partitions(topic)
	if err != nil {
		b.Fatal(err)
	}
	occurred, relayed = map[string]time.Time{}, map[string]time.Time{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, p := range parts {
		pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			defer pc.Close()
			for {
				select {
				case <-ctx.Done():
					return
				case m := <-pc.Messages():
					e, err := eventstore.Unmarshal(m.Value)
					if err != nil || e.EventType != bankaccount.TransactionAccepted {
						continue
					}
					var d bankaccount.TransactionAcceptedData
					if e.DecodePayload(&d) != nil {
						continue
					}
					mu.Lock()
					occurred[d.Desc], relayed[d.Desc] = e.OccurredAt, m.Timestamp
					done := len(occurred) >= 2*n // the ceiling run's and the latency run's
					mu.Unlock()
					if done {
						cancel()
					}
				}
			}
		})
	}
	wg.Wait()
	return occurred, relayed
}

func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// withLeasesAndReadModels gives ep a leases table of its own and a
// Postgres schema with every migration applied (both dropped when t
// ends), and returns a pool on that schema, closed when t ends.
func withLeasesAndReadModels(t testing.TB, ep *eventpipe.Endpoints, name string) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	ep.LeasesTable = testenv.UniqueName(t, "leases")
	if err := migrate.CreateLeasesTable(ctx, testenv.DynamoDB(t), ep.LeasesTable); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, testenv.DynamoDB(t), ep.LeasesTable) })
	schema, url := testenv.PostgresSchema(t, name)
	if _, err := pgmigrate.Migrate(ctx, pgmigrate.Config{URL: testenv.Endpoints().Postgres, Schema: schema, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	ep.Postgres = url
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}
