package eventpipe_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/internal/endpoints"
	"github.com/eventpipe/eventpipe/internal/testenv"
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
	cfg := eventpipe.WriteSideConfig{Endpoints: endpoints.FromEnv(), ConsumerGroup: group}
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
		endpoints.EnvEventsTable+"="+ep.EventsTable, endpoints.EnvTopicPrefix+"="+ep.TopicPrefix,
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
// that is killed with SIGKILL at random moments and restarted. In the end
// every command was applied exactly once: each todo holds one event per
// command sent for it, caused by exactly those command ids.
func TestKillingServeLosesNoCommandAndAppliesNoneTwice(t *testing.T) {
	const todos, updatesPerTodo, kills = 20, 14, 4
	ep := testEndpoints(t)
	group := testenv.UniqueName(t, "g")
	topics := bus.Topics{Prefix: ep.TopicPrefix}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: ep.KafkaBrokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()

	child := startServeChild(t, ep, group)
	sent := map[string]map[string]bool{} // todo id -> command ids
	publishDone := make(chan struct{})
	go func() {
		defer close(publishDone)
		for round := 0; round <= updatesPerTodo; round++ {
			for i := range todos {
				id := fmt.Sprintf("todo-%02d", i)
				typ := todo.UpdateTodo
				if round == 0 {
					typ = todo.CreateTodo
				}
				cmd := todoCmd(t, typ, id, todo.TodoData{Title: fmt.Sprintf("round %d", round)}, nil)
				msg, _ := cmd.ToMessage()
				if err := pub.Publish(cmd.Topic(topics), msg); err != nil {
					t.Errorf("publish: %v", err)
					return
				}
				if sent[id] == nil {
					sent[id] = map[string]bool{}
				}
				sent[id][cmd.ID] = true
			}
			time.Sleep(40 * time.Millisecond)
		}
	}()
	for k := 0; k < kills; k++ {
		time.Sleep(time.Duration(300+rand.IntN(700)) * time.Millisecond)
		_ = child.Process.Signal(syscall.SIGKILL)
		_, _ = child.Process.Wait()
		child = startServeChild(t, ep, group)
	}
	<-publishDone

	svc := newService(t, ep, group+"-reader")
	deadline := time.Now().Add(120 * time.Second)
	for i := range todos {
		id := fmt.Sprintf("todo-%02d", i)
		var evs []eventstore.Envelope
		for {
			evs = events(t, svc, todo.AggregateType, id)
			if len(evs) >= updatesPerTodo+1 || time.Now().After(deadline) {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		causes := map[string]int{}
		for _, e := range evs {
			causes[e.Metadata.CausationID]++
		}
		if len(evs) != updatesPerTodo+1 || len(causes) != len(evs) {
			t.Errorf("%s: %d events from %d distinct commands, want %d", id, len(evs), len(causes), updatesPerTodo+1)
		}
		for c := range sent[id] {
			if causes[c] != 1 {
				t.Errorf("%s: command %s applied %d times", id, c, causes[c])
			}
		}
	}
	_ = commands.StatusAccepted
}
