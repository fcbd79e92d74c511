package poison_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/poison"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// Environment of a redrive child (TestMain).
const (
	envChild      = "EVENTPIPE_POISON_REDRIVE_CHILD" // "before" or "after" the publish it stops
	envChildDB    = "EVENTPIPE_POISON_CHILD_DB"
	envChildRef   = "EVENTPIPE_POISON_CHILD_REF" // topic/partition/offset
	envChildKafka = "EVENTPIPE_POISON_CHILD_KAFKA"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(envChild); mode != "" {
		runRedriveChild(mode)
		return
	}
	os.Exit(m.Run())
}

// stallingPublisher prints "stalled" and blocks forever, before or after
// it publishes: the point where its process is killed.
type stallingPublisher struct {
	message.Publisher
	after bool
}

func (p stallingPublisher) Publish(topic string, msgs ...*message.Message) error {
	if p.after {
		if err := p.Publisher.Publish(topic, msgs...); err != nil {
			return err
		}
	}
	fmt.Println("stalled")
	select {}
}

// runRedriveChild redrives the message of envChildRef with a
// stallingPublisher, to be killed by its parent.
func runRedriveChild(mode string) {
	ctx := context.Background()
	fail := func(err error) { fmt.Fprintln(os.Stderr, err); os.Exit(2) }
	brokers := strings.Split(os.Getenv(envChildKafka), ",")
	parts := strings.Split(os.Getenv(envChildRef), "/")
	topic := strings.Join(parts[:len(parts)-2], "/")
	offset, _ := strconv.ParseInt(parts[len(parts)-1], 10, 64)
	msgs, err := poison.Read(ctx, poison.ReadConfig{Brokers: brokers, Topic: topic, Match: func(m poison.Message) bool { return m.Offset == offset }})
	if err != nil || len(msgs) != 1 {
		fail(fmt.Errorf("read %s: %v, %v", os.Getenv(envChildRef), msgs, err))
	}
	db, err := pgxpool.New(ctx, os.Getenv(envChildDB))
	if err != nil {
		fail(err)
	}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		fail(err)
	}
	r, err := poison.NewRedriver(poison.RedriverConfig{DB: db, Publisher: stallingPublisher{Publisher: pub, after: mode == "after"},
		Brokers: brokers, Actor: "child", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fail(err)
	}
	res := r.Redrive(ctx, msgs[0])
	fail(fmt.Errorf("redrive returned: %+v", res))
}

// TestPoisonRedriveKilledBeforeOrAfterItsPublishIsCompletedOnceByTheNextRedrive
// starts a child process that redrives a poison message and kills it
// (SIGKILL) while it is stalled right before its publish, and another
// right after it: each time the next redrive (after the dead session's
// lock is gone) leaves exactly one copy on the origin topic, publishing it
// in the first case and finding it in the second, and a third says it
// was already redriven.
func TestPoisonRedriveKilledBeforeOrAfterItsPublishIsCompletedOnceByTheNextRedrive(t *testing.T) {
	ctx := context.Background()
	e := newRedriveEnv(t, 2)
	dbURL := e.db.Config().ConnString() // selects the test's schema
	for i, mode := range []string{"before", "after"} {
		m := e.msgs[i]
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envChild+"="+mode, envChildDB+"="+dbURL, envChildRef+"="+m.Ref.String(),
			envChildKafka+"="+strings.Join(e.brokers, ","))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stalled := make(chan bool, 1)
		go func() {
			line, _ := bufio.NewReader(stdout).ReadString('\n')
			stalled <- strings.TrimSpace(line) == "stalled"
		}()
		select {
		case ok := <-stalled:
			if !ok {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("%s: child did not stall: %s", mode, stderr.String())
			}
		case <-time.After(integration.HangAfter()):
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("%s: child did not stall within %v (%s): %s", mode, integration.HangAfter(), integration.EnvHangAfter, stderr.String())
		}
		var state string
		if err := e.db.QueryRow(ctx, `SELECT state FROM poison_redrives WHERE poison_topic = $1 AND poison_partition = $2 AND poison_offset = $3`,
			m.Topic, m.Partition, m.Offset).Scan(&state); err != nil || state != "started" {
			t.Fatalf("%s: record before the kill: %q, %v; want started", mode, state, err)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()

		r := e.redriver(t, "parent")
		var got poison.Result
		integration.Await(t, mode+": a redrive after the kill that is not Busy", func() error {
			if got = r.Redrive(ctx, m); got.Outcome == poison.Busy {
				return fmt.Errorf("%+v", got) // Busy until Postgres has seen the killed session go
			}
			return nil
		})
		want := map[string]poison.Outcome{"before": poison.Redriven, "after": poison.Recovered}[mode]
		if got.Outcome != want || (mode == "before" && !got.Resumed) {
			t.Fatalf("%s: redrive after the kill: %+v, want %s", mode, got, want)
		}
		if n := len(e.copies(t, m)); n != 1 {
			t.Fatalf("%s: %d copies on the origin topic, want 1", mode, n)
		}
		if got := r.Redrive(ctx, m); got.Outcome != poison.AlreadyRedriven {
			t.Fatalf("%s: third redrive: %+v, want already redriven", mode, got)
		}
	}
}
