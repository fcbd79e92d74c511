package e2e_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

const (
	envServeChild = "EVENTPIPE_TEST_SERVE_CHILD_GROUP"
	// envServeKillAfter names a command id: the child kills itself with
	// SIGKILL right after the dispatcher handled it (its answer is on the
	// replies topic) and before the message is acked, so its offset is
	// never committed and the command is delivered again.
	envServeKillAfter = "EVENTPIPE_TEST_SERVE_KILL_AFTER"
)

// killAfter is the handler middleware of envServeKillAfter.
func killAfter(commandID string) message.HandlerMiddleware {
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			out, err := h(msg)
			if msg.UUID == commandID {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // never ack
			}
			return out, err
		}
	}
}

// runServeChildIfRequested runs the command handlers in this process
// when a test started it as a child (the group is in the environment).
func runServeChildIfRequested() {
	group := os.Getenv(envServeChild)
	if group == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cfg := eventpipe.WriteSideConfig{Process: eventpipe.Process{Endpoints: endpoints.FromEnv()}, ConsumerGroup: group}
	if id := os.Getenv(envServeKillAfter); id != "" {
		cfg.Middlewares = append(cfg.Middlewares, killAfter(id))
	}
	svc, err := eventpipe.NewWriteSide(ctx, cfg)
	if err == nil {
		err = svc.RunCommandHandlers(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// startServeChild starts the command handlers of group in a child
// process (env adds variables, e.g. envServeKillAfter) and kills it when
// t ends.
func startServeChild(t *testing.T, ep endpoints.Endpoints, group string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envServeChild+"="+group,
		endpoints.EnvEventsTable+"="+ep.EventsTable, endpoints.EnvKeysTable+"="+ep.KeysTable, endpoints.EnvTopicPrefix+"="+ep.TopicPrefix,
		"EVENTPIPE_LOG_LEVEL=warn")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	return cmd
}

// TestKillingServeLosesNoCommandAndAppliesNoneTwice publishes a stream of
// todo commands while `serve`'s command handlers run in a child process
// that is killed with SIGKILL and restarted. Each kill waits until the
// running child has applied commands of its own, then lands at a random
// moment while commands are still being published and applied (the test
// records, at every kill, how many were sent and how many applied, and
// fails unless most kills found commands in flight). In
// the end every command was applied exactly once: each todo holds one
// event per command sent for it, caused by exactly those command ids.
func TestKillingServeLosesNoCommandAndAppliesNoneTwice(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	const todos, kills = 20, 4
	ep := rigs.Endpoints(t)
	group := testenv.UniqueName(t, "g")
	topics := bus.Topics{Prefix: ep.TopicPrefix}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: ep.KafkaBrokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	svc := rigs.NewService(t, ep, group+"-reader")
	todoID := func(i int) string { return fmt.Sprintf("todo-%02d", i) }
	// applied counts the commands applied so far (the todos' versions).
	applied := func() int64 {
		var n int64
		for i := range todos {
			v, err := svc.Store.Version(context.Background(), eventstore.Ref{Type: todo.AggregateType, ID: todoID(i)})
			if err == nil {
				n += v
			}
		}
		return n
	}

	child := startServeChild(t, ep, group)
	sent := map[string]map[string]bool{} // todo id -> command ids; read after publishDone
	var sentCount atomic.Int64
	stop, publishDone := make(chan struct{}), make(chan struct{})
	go func() { // rounds of commands (a create, then updates) until stop, at most ~3 rounds ahead
		defer close(publishDone)
		for round := 0; ; round++ {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if sentCount.Load()-applied() < 3*todos {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			for i := range todos {
				typ := todo.UpdateTodo
				if round == 0 {
					typ = todo.CreateTodo
				}
				// Not rigs.TodoCmd: t.Fatal must not run on this goroutine.
				cmd, err := commands.NewJSON(typ, todo.AggregateType, todoID(i), todo.TodoData{Title: fmt.Sprintf("round %d", round)})
				if err != nil {
					t.Errorf("command: %v", err)
					return
				}
				msg, err := cmd.ToMessage()
				if err != nil {
					t.Errorf("command message: %v", err)
					return
				}
				if err := pub.Publish(cmd.Topic(topics), msg); err != nil {
					t.Errorf("publish: %v", err)
					return
				}
				if sent[todoID(i)] == nil {
					sent[todoID(i)] = map[string]bool{}
				}
				sent[todoID(i)][cmd.ID] = true
				sentCount.Add(1)
			}
		}
	}()
	type atKill struct{ sent, applied int64 }
	var killed []atKill
	for k := 0; k < kills; k++ {
		// Wait until this child applies commands, then kill it mid-stream.
		before := applied()
		integration.Await(t, fmt.Sprintf("kill %d: commands applied by the serve child", k+1), func() error {
			if n := applied(); n == before {
				return fmt.Errorf("still %d applied", n)
			}
			return nil
		})
		time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond)
		_ = child.Process.Signal(syscall.SIGKILL)
		_, _ = child.Process.Wait()
		killed = append(killed, atKill{sent: sentCount.Load(), applied: applied()})
		child = startServeChild(t, ep, group)
	}
	close(stop)
	<-publishDone
	t.Logf("at each kill, commands sent / applied: %+v; %d sent in all", killed, sentCount.Load())
	// A child that keeps up with the publisher may have nothing in flight
	// at the instant of one kill; most kills must still land mid-stream.
	inFlight := 0
	for _, at := range killed {
		if at.applied > 0 && at.applied < at.sent {
			inFlight++
		}
	}
	if inFlight*2 <= kills {
		t.Errorf("only %d of %d kills landed with commands in flight (%+v)", inFlight, kills, killed)
	}

	integration.AwaitProgress(t, "commands applied after the kills", applied, sentCount.Load())
	for i := range todos {
		id := todoID(i)
		want := len(sent[id])
		evs := rigs.Events(t, svc, todo.AggregateType, id)
		causes := map[string]int{}
		for _, e := range evs {
			causes[e.Metadata.CausationID]++
		}
		if len(evs) != want || len(causes) != len(evs) {
			t.Errorf("%s: %d events from %d distinct commands, want %d", id, len(evs), len(causes), want)
		}
		for c := range sent[id] {
			if causes[c] != 1 {
				t.Errorf("%s: command %s applied %d times", id, c, causes[c])
			}
		}
	}
}
