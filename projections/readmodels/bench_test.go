package readmodels_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/operator"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/readmodels"
)

// synthetic generates a bank's history without storing it: accounts
// AccountOpened events first, then TransactionAccepted events round
// robin over the accounts, events in all. Event k is computed, never
// kept, so a history of any length costs no memory.
type synthetic struct {
	accounts, events int
	start            time.Time
}

func newSynthetic(events int) synthetic {
	return synthetic{accounts: max(1, events/50), events: events, start: time.Now().Add(-time.Hour)}
}

func (s synthetic) event(k int) eventstore.Envelope {
	e := eventstore.Envelope{
		EventID:       fmt.Sprintf("%026d", k),
		AggregateType: bankaccount.AggregateType,
		SchemaVersion: 1,
		OccurredAt:    s.start.Add(time.Duration(k) * time.Microsecond).UTC(),
	}
	if k < s.accounts {
		e.AggregateID, e.Sequence, e.EventType = fmt.Sprintf("acc-%07d", k), 1, bankaccount.AccountOpened
		e.Payload, _ = json.Marshal(bankaccount.AccountOpenedData{ID: e.AggregateID})
		return e
	}
	j := k - s.accounts
	e.AggregateID, e.Sequence, e.EventType = fmt.Sprintf("acc-%07d", j%s.accounts), int64(2+j/s.accounts), bankaccount.TransactionAccepted
	e.Payload, _ = json.Marshal(bankaccount.TransactionAcceptedData{Desc: "bench", Amount: int64(j%100 - 40)})
	return e
}

func (s synthetic) all() []eventstore.Envelope {
	out := make([]eventstore.Envelope, s.events)
	for k := range out {
		out[k] = s.event(k)
	}
	return out
}

// history pages the synthetic events by type, 1,000 a page, as the
// store's ListByType would.
func (s synthetic) history(_ context.Context, eventType, after, cursor string) ([]eventstore.Envelope, string, error) {
	if after != "" {
		return nil, "", fmt.Errorf("the synthetic history does not resume (after %s)", after)
	}
	lo, hi := 0, 0
	switch eventType {
	case bankaccount.AccountOpened:
		lo, hi = 0, s.accounts
	case bankaccount.TransactionAccepted:
		lo, hi = s.accounts, s.events
	}
	if cursor != "" {
		n, err := strconv.Atoi(cursor)
		if err != nil {
			return nil, "", err
		}
		lo = n
	}
	end := min(hi, lo+1000)
	var page []eventstore.Envelope
	for k := lo; k < end; k++ {
		page = append(page, s.event(k))
	}
	next := ""
	if end < hi {
		next = strconv.Itoa(end)
	}
	return page, next, nil
}

func (s synthetic) count(_ context.Context, eventType string) (int, error) {
	switch eventType {
	case bankaccount.AccountOpened:
		return s.accounts, nil
	case bankaccount.TransactionAccepted:
		return s.events - s.accounts, nil
	}
	return 0, nil
}

// rawUpsert writes what the accounts projection writes for events, in
// one transaction and one pipelined batch, with none of the framework:
// no positions, no locks, no duplicate checks. It is the baseline.
func rawUpsert(ctx context.Context, db *pgxpool.Pool, events []eventstore.Envelope) error {
	var b pgx.Batch
	for _, e := range events {
		switch e.EventType {
		case bankaccount.AccountOpened:
			b.Queue(`INSERT INTO accounts (account_id, version, apply_count, opened_at, updated_at) VALUES ($1, $2, 1, $3, $3)
				ON CONFLICT (account_id) DO NOTHING`, e.AggregateID, e.Sequence, e.OccurredAt)
		case bankaccount.TransactionAccepted:
			var t bankaccount.TransactionAcceptedData
			if err := json.Unmarshal(e.Payload, &t); err != nil {
				return err
			}
			b.Queue(`INSERT INTO accounts (account_id, balance, version, apply_count, opened_at, updated_at) VALUES ($1, $4, $2, 1, $3, $3)
				ON CONFLICT (account_id) DO UPDATE SET balance = accounts.balance + EXCLUDED.balance, version = EXCLUDED.version,
				apply_count = accounts.apply_count + 1, updated_at = EXCLUDED.updated_at`, e.AggregateID, e.Sequence, e.OccurredAt, t.Amount)
			b.Queue(`INSERT INTO account_transactions (account_id, seq, description, amount, balance, occurred_at)
				SELECT $1, $2, $3, $4, balance, $5 FROM accounts WHERE account_id = $1 ON CONFLICT DO NOTHING`,
				e.AggregateID, e.Sequence, t.Desc, t.Amount, e.OccurredAt)
		}
	}
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error { return tx.SendBatch(ctx, &b).Close() })
}

// BenchmarkProjectionVsRawBatchedUpsert applies b.N×100 account events
// (1 in 50 an account opening) to the accounts read model three ways in
// one run, each into a fresh schema: the raw batched upsert baseline
// (1,000 events per transaction), the Applier with the same batches
// (locks, positions, duplicate checks), and the whole live path (the
// Runner consuming the events from Kafka, as many per transaction as
// have arrived). It reports events/s of each and their ratios to the
// baseline (the project's target for the Applier and for the live path
// is ≥ 0.5). The live path's rate is measured from the first applied
// events on, when the consumer group has been joined; the join itself
// (runner_join_s) and the rate over the whole run including it
// (runner_with_join/raw) are reported beside it. Nothing about time is
// asserted.
func BenchmarkProjectionVsRawBatchedUpsert(b *testing.B) {
	ctx := context.Background()
	events := newSynthetic(b.N * 100).all()
	const batch = 1000
	chunks := func(f func([]eventstore.Envelope) error) time.Duration {
		start := time.Now()
		for lo := 0; lo < len(events); lo += batch {
			if err := f(events[lo:min(len(events), lo+batch)]); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	b.ResetTimer()
	var rawTime, applierTime time.Duration
	for range 2 { // alternate, so neither gets only a cold or a warm database
		raw := newWorld(b)
		rawTime += chunks(func(evs []eventstore.Envelope) error { return rawUpsert(ctx, raw.db, evs) })
		w := newWorld(b)
		a := w.applier(b)
		applierTime += chunks(func(evs []eventstore.Envelope) error { _, err := a.Apply(ctx, evs); return err })
	}

	// The live path: everything on the topic first, then the Runner.
	w := newWorld(b)
	brokers := testenv.KafkaBrokers(b)
	topics := bus.Topics{Prefix: testenv.UniqueName(b, "ns") + "."}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		b.Fatal(err)
	}
	defer pub.Close()
	for lo := 0; lo < len(events); lo += batch {
		var msgs []*message.Message
		for _, e := range events[lo:min(len(events), lo+batch)] {
			m, err := bus.EventMessage(e)
			if err != nil {
				b.Fatal(err)
			}
			msgs = append(msgs, m)
		}
		if err := pub.Publish(topics.Events(bankaccount.AggregateType), msgs...); err != nil {
			b.Fatal(err)
		}
	}
	// Each account's position is its last sequence, which is its number
	// of events: the positions add up to the number of events.
	want := int64(len(events))
	runner, err := projections.NewRunner(projections.RunnerConfig{Applier: w.applier(b), Brokers: brokers, Topics: topics, Publisher: pub})
	if err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- runner.Run(runCtx) }()
	// joined is when the first applied events showed: the consumer group
	// had been joined and the partitions assigned. The throughput is
	// measured from there, over the events applied since.
	var (
		joined   time.Duration
		atJoined int64
	)
	for {
		var n int64
		if err := w.db.QueryRow(ctx, `SELECT coalesce(sum(seq), 0) FROM projection_positions`).Scan(&n); err != nil {
			b.Fatal(err)
		}
		if n > 0 && joined == 0 {
			joined, atJoined = time.Since(start), n
		}
		if n == want {
			break
		}
		if time.Since(start) > 10*time.Minute {
			b.Fatalf("the runner applied %d of %d events in 10 minutes", n, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	runnerTime := time.Since(start)
	b.StopTimer()
	cancel()
	<-done

	rate := func(d time.Duration, rounds int) float64 { return float64(rounds*len(events)) / d.Seconds() }
	rawRate, applierRate := rate(rawTime, 2), rate(applierTime, 2)
	runnerRate := float64(want-atJoined) / (runnerTime - joined).Seconds()
	b.ReportMetric(rawRate, "raw_events/s")
	b.ReportMetric(applierRate, "applier_events/s")
	b.ReportMetric(applierRate/rawRate, "applier/raw")
	b.ReportMetric(runnerRate, "runner_events/s")
	b.ReportMetric(runnerRate/rawRate, "runner/raw")
	b.ReportMetric(joined.Seconds(), "runner_join_s")
	b.ReportMetric(rate(runnerTime, 1)/rawRate, "runner_with_join/raw")
}

const envReplayChild = "EVENTPIPE_TEST_REPLAY_CHILD"

// runReplayChildIfRequested replays a synthetic history into the schema
// named in the environment ("<schema> <events>"), prints "<events>
// <seconds>" and exits: a process of its own, so that its peak RSS is the
// replay's alone.
func runReplayChildIfRequested() {
	spec := os.Getenv(envReplayChild)
	if spec == "" {
		return
	}
	slog.SetLogLoggerLevel(slog.LevelWarn)
	err := func() error {
		var schema string
		var n int
		if _, err := fmt.Sscan(spec, &schema, &n); err != nil {
			return err
		}
		s := newSynthetic(n) // gap repair reads the store only: the synthetic history has no gaps
		ep := eventpipe.EndpointsFromEnv()
		sep := "?"
		if strings.Contains(ep.Postgres, "?") {
			sep = "&"
		}
		ep.Postgres += sep + "search_path=" + schema // the URL picks the schema
		res, err := operator.Replay(context.Background(), operator.ReplayConfig{ReadModel: readmodels.Accounts{}.Name(), Process: eventpipe.Process{Endpoints: ep},
			History: s.history, Count: s.count})
		if err != nil {
			return err
		}
		fmt.Println(res.Events, res.Elapsed.Seconds())
		return nil
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "replay child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// BenchmarkReplay replays 100,000 and then 1,000,000 account events into
// the accounts read model, each in a child process, and reports events/s
// and the child's peak RSS for both: the replay streams the history page
// by page, so memory should stay flat while the history grows tenfold.
// The history is generated as it is paged (a store holding 1M events
// takes DynamoDB Local far longer to fill than the replay takes), so this
// measures the replay itself: merge, Applier, shadow tables, swap.
func BenchmarkReplay(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		w := newWorld(b)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d", envReplayChild, w.schema, n))
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("replay child (%d events): %v", n, err)
		}
		var events int
		var secs float64
		if _, err := fmt.Sscan(strings.TrimSpace(string(out)), &events, &secs); err != nil || events != n {
			b.Fatalf("replay child printed %q (want %d events)", out, n)
		}
		var rows int
		if err := w.db.QueryRow(context.Background(), `SELECT count(*) FROM account_transactions`).Scan(&rows); err != nil {
			b.Fatal(err)
		}
		if rows != n-newSynthetic(n).accounts {
			b.Fatalf("after replaying %d events the model holds %d transactions", n, rows)
		}
		rss := float64(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss) / 1024 // KiB on Linux
		label := fmt.Sprintf("%dk", n/1000)
		b.ReportMetric(float64(n)/secs, "events/s_"+label)
		b.ReportMetric(rss, "peak_rss_MiB_"+label)
	}
}
