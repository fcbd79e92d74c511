package readmodels_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/projections/readmodels"
)

const (
	envConsumeChildSchema = "EVENTPIPE_TEST_CONSUME_CHILD_SCHEMA"
	// envConsumeChildStart is the child's ConsumersConfig.Start
	// (bus.ParseStart; "default" for the zero Start, i.e. the read
	// model's default: history); unset: earliest, no catch-up.
	envConsumeChildStart = "EVENTPIPE_TEST_CONSUME_CHILD_START"
)

func TestMain(m *testing.M) {
	runConsumeChildIfRequested()
	runReplayChildIfRequested()
	runGainedChildIfRequested()
	runVersionChildIfRequested()
	os.Exit(m.Run())
}

// runConsumeChildIfRequested runs the accounts projection in this process
// when a test started it as a child (the schema is in the environment),
// from the topics' oldest records unless envConsumeChildStart says
// otherwise.
func runConsumeChildIfRequested() {
	schema := os.Getenv(envConsumeChildSchema)
	if schema == "" {
		return
	}
	slog.SetLogLoggerLevel(slog.LevelWarn)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := func() error {
		db, err := schemaPool(ctx, schema)
		if err != nil {
			return err
		}
		defer db.Close()
		start := bus.StartEarliest
		if s := os.Getenv(envConsumeChildStart); s != "" {
			if start, err = bus.ParseStart(s); err != nil {
				return err
			}
		}
		consumers, err := eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{Names: []string{readmodels.Accounts{}.Name()}, DB: db, Start: start})
		if err != nil {
			return err
		}
		defer consumers.Close()
		return consumers.Run(ctx)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "consume child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestKilledConsumerAppliesEveryEventOnce publishes 9,999 account events
// (101 accounts) and runs the accounts projection in a child process that
// is killed with SIGKILL at random moments at least 10 times and
// restarted, each kill once the running child has made progress; most
// kills must land before the last event is applied. In the end every
// account equals its replay and every event was applied exactly once
// (apply_count = version = position).
func TestKilledConsumerAppliesEveryEventOnce(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	const accounts, perAccount, kills = 101, 98, 10
	w := newWorld(t)
	topics := bus.Topics{Prefix: testenv.UniqueName(t, "ns") + "."}
	brokers := testenv.KafkaBrokers(t)
	type account struct {
		events  []eventstore.Envelope
		balance int64
	}
	byID := map[string]account{}
	var msgs []*message.Message
	for i := range accounts {
		id := fmt.Sprintf("acc-%03d", i)
		evs, bal := w.openAccount(t, id, perAccount)
		byID[id] = account{evs, bal}
		for _, e := range evs {
			m, err := bus.EventMessage(e)
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, m)
		}
	}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	if err := pub.Publish(topics.Events(msgs[0].Metadata.Get(bus.MetadataAggregateType)), msgs...); err != nil {
		t.Fatal(err)
	}

	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		// A static group member, as a StatefulSet's pod would be: each
		// restart takes back the partitions at once instead of waiting
		// for the killed member's session to expire (the dynamic member's
		// path through kills is keyed's and the serve kill tests').
		cmd.Env = append(os.Environ(), envConsumeChildSchema+"="+w.schema, endpoints.EnvKafkaInstanceID+"=consume-child",
			endpoints.EnvEventsTable+"="+w.table, endpoints.EnvTopicPrefix+"="+topics.Prefix)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	applied := func() int64 {
		var n int64
		if err := w.db.QueryRow(context.Background(), `SELECT coalesce(sum(seq), 0) FROM projection_positions`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	testenv.KillRepeatedly(t, start, applied, int64(len(msgs)), kills)
	for id, acc := range byID {
		if got, want := w.row(t, id), want(acc.events, acc.balance); got != want {
			t.Errorf("%s: read model %+v, want %+v", id, got, want)
		}
	}
}
