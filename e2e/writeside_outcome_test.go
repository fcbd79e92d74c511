package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// replyLog collects every result published on the replies topic, by
// command id, in the order they arrive (one partition per command id).
type replyLog struct {
	mu  sync.Mutex
	got map[string][]commands.Result
}

func collectReplies(t *testing.T, ep endpoints.Endpoints) *replyLog {
	t.Helper()
	sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{Brokers: ep.KafkaBrokers, ConsumerGroup: testenv.UniqueName(t, "replies"), Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); _ = sub.Close() })
	ch, err := sub.Subscribe(ctx, bus.Topics{Prefix: ep.TopicPrefix}.Replies())
	if err != nil {
		t.Fatal(err)
	}
	l := &replyLog{got: map[string][]commands.Result{}}
	go func() {
		for msg := range ch {
			if res, err := commands.ResultFromMessage(msg); err == nil {
				l.mu.Lock()
				l.got[res.CommandID] = append(l.got[res.CommandID], res)
				l.mu.Unlock()
			}
			msg.Ack()
		}
	}()
	return l
}

// wait returns the replies to id once there are at least n, or fails t
// when they do not come (integration.Await).
func (l *replyLog) wait(t *testing.T, id string, n int) []commands.Result {
	t.Helper()
	var got []commands.Result
	integration.Await(t, fmt.Sprintf("%d replies to command %s", n, id), func() error {
		l.mu.Lock()
		got = append([]commands.Result(nil), l.got[id]...)
		l.mu.Unlock()
		if len(got) < n {
			return fmt.Errorf("%d replies: %+v", len(got), got)
		}
		return nil
	})
	return got
}

func accountCmd(t *testing.T, typ, id string, payload any) commands.Command {
	t.Helper()
	return mustCmd(t, typ, bankaccount.AggregateType, id, payload)
}

// waitKilled waits for child to exit and fails t unless SIGKILL ended it
// (or it is still running after integration.HangAfter).
func waitKilled(t *testing.T, child *exec.Cmd) {
	t.Helper()
	timeout := integration.HangAfter()
	done := make(chan error, 1)
	go func() { done <- child.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || !exit.Sys().(syscall.WaitStatus).Signaled() || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("serve child ended with %v, want killed by SIGKILL", err)
		}
	case <-time.After(timeout):
		t.Fatalf("serve child still running after %v: it never handled its command", timeout)
	}
}

// TestRedeliveredRefusalsAreAnsweredAsFirstAfterAKill runs the command
// handlers in child processes that kill themselves (SIGKILL) right after
// answering a chosen command and before acking it, so the command is
// delivered again after the restart. Between the kill and the restart a
// later command changes the aggregate so that deciding the first command
// again would accept it (a deposit that covers a refused withdrawal, the
// opening of a missing account). Every delivery, first and redelivered,
// answers what the first answered (rejected, not found, invalid), with
// the refusal's code, which the redelivered answer (the refusal recorded
// in DynamoDB) matches with errors.Is as the first did; and the refused
// commands append nothing.
func TestRedeliveredRefusalsAreAnsweredAsFirstAfterAKill(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	ctx := context.Background()
	ep := rigs.Endpoints(t)
	group := testenv.UniqueName(t, "g")
	svc := rigs.NewService(t, ep, group+"-direct")
	replies := collectReplies(t, ep)
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: ep.KafkaBrokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	topics := bus.Topics{Prefix: ep.TopicPrefix}

	poor, missing, odd := testenv.UniqueName(t, "poor"), testenv.UniqueName(t, "missing"), testenv.UniqueName(t, "odd")
	for _, id := range []string{poor, odd} {
		if res, err := svc.Dispatcher.Dispatch(ctx, accountCmd(t, bankaccount.OpenAccount, id, struct{}{})); err != nil || res.Status != commands.StatusAccepted {
			t.Fatalf("open %s: %+v, %v", id, res, err)
		}
	}
	overdraw := int64(-bankaccount.DefaultMinimumBalance + 100)
	cases := []struct {
		name   string
		want   commands.Status
		code   eventstore.Code // the refusal's kind, on every answer ("": none)
		cmd    commands.Command
		enable commands.Command // would make cmd succeed if decided again (except the invalid one)
		ref    eventstore.Ref
		events int // the aggregate's events in the end
	}{
		{"rejected", commands.StatusRejected, bankaccount.ErrInsufficientFunds,
			accountCmd(t, bankaccount.RecordTransaction, poor, bankaccount.TransactionAcceptedData{Desc: "withdrawal", Amount: -overdraw}),
			accountCmd(t, bankaccount.RecordTransaction, poor, bankaccount.TransactionAcceptedData{Desc: "deposit", Amount: 500}),
			eventstore.Ref{Type: bankaccount.AggregateType, ID: poor}, 2},
		{"not found", commands.StatusNotFound, bankaccount.ErrNotFound,
			accountCmd(t, bankaccount.RecordTransaction, missing, bankaccount.TransactionAcceptedData{Desc: "deposit", Amount: 10}),
			accountCmd(t, bankaccount.OpenAccount, missing, struct{}{}),
			eventstore.Ref{Type: bankaccount.AggregateType, ID: missing}, 1},
		{"invalid", commands.StatusInvalid, "",
			accountCmd(t, bankaccount.RecordTransaction, odd, bankaccount.TransactionAcceptedData{Desc: "nothing", Amount: 0}),
			accountCmd(t, bankaccount.RecordTransaction, odd, bankaccount.TransactionAcceptedData{Desc: "deposit", Amount: 5}),
			eventstore.Ref{Type: bankaccount.AggregateType, ID: odd}, 2},
	}
	for _, c := range cases {
		// A child that dies right after answering c.cmd; it may first
		// answer the earlier cases' commands again.
		child := startServeChild(t, ep, group, envServeKillAfter+"="+c.cmd.ID)
		msg, err := c.cmd.ToMessage()
		if err != nil {
			t.Fatal(err)
		}
		if err := pub.Publish(c.cmd.Topic(topics), msg); err != nil {
			t.Fatal(err)
		}
		waitKilled(t, child)
		first := replies.wait(t, c.cmd.ID, 1)[0]
		if first.Status != c.want || first.Duplicate {
			t.Fatalf("%s: first answer %+v, want %s", c.name, first, c.want)
		}
		if res, err := svc.Dispatcher.Dispatch(ctx, c.enable); err != nil || res.Status != commands.StatusAccepted {
			t.Fatalf("%s: the later command: %+v, %v", c.name, res, err)
		}
	}
	startServeChild(t, ep, group)
	for _, c := range cases {
		got := replies.wait(t, c.cmd.ID, 2)
		for i, res := range got {
			if res.Status != c.want || res.Reason != got[0].Reason || res.Code != c.code || res.Version != got[0].Version || res.Duplicate != (i > 0) {
				t.Errorf("%s: answer %d of %d is %+v; want the first %+v repeated (duplicate)", c.name, i+1, len(got), res, got[0])
			}
			if c.code != "" && !errors.Is(res.Err(), c.code) {
				t.Errorf("%s: answer %d of %d: %v does not match %s (errors.Is)", c.name, i+1, len(got), res.Err(), c.code)
			}
		}
		evs := rigs.Events(t, svc, c.ref.Type, c.ref.ID)
		if len(evs) != c.events {
			t.Errorf("%s: %s holds %d events, want %d", c.name, c.ref, len(evs), c.events)
		}
		for _, e := range evs {
			if e.Metadata.CausationID == c.cmd.ID {
				t.Errorf("%s: the refused command appended %s at %d", c.name, e.EventType, e.Sequence)
			}
		}
		var refused *eventstore.RefusedCommandError
		if _, err := svc.Store.CommandResult(ctx, c.ref, c.cmd.ID); !errors.As(err, &refused) || refused.Refusal.Status != string(c.want) {
			t.Errorf("%s: recorded answer %v, want %s", c.name, err, c.want)
		}
		t.Logf("%s: answered %s %d times", c.name, c.want, len(got))
	}
}

// TestTwoProcessesDeliveringOneCommandAnswerOnce runs the command
// handlers in two child processes of two consumer groups on the same
// commands topic, so every command is delivered to both at about the same
// time, while a deposit races each withdrawal: one process may decide
// against the balance before the deposit and the other after it. Both
// processes answer each command the same way; exactly one of the answers
// is not a duplicate (the one that recorded it); the withdrawal is in the
// log exactly when it was accepted.
func TestTwoProcessesDeliveringOneCommandAnswerOnce(t *testing.T) {
	const accounts = 24
	ctx := context.Background()
	ep := rigs.Endpoints(t)
	svc := rigs.NewService(t, ep, testenv.UniqueName(t, "direct"))
	replies := collectReplies(t, ep)
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: ep.KafkaBrokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	topics := bus.Topics{Prefix: ep.TopicPrefix}
	// Both processes are up (and the topic exists) before the race.
	ids := make([]string, accounts)
	for i := range ids {
		ids[i] = fmt.Sprintf("acct-%02d", i)
		if res, err := svc.Dispatcher.Dispatch(ctx, accountCmd(t, bankaccount.OpenAccount, ids[i], struct{}{})); err != nil || res.Status != commands.StatusAccepted {
			t.Fatalf("open %s: %+v, %v", ids[i], res, err)
		}
	}
	warm := accountCmd(t, bankaccount.RenameOwner, ids[0], bankaccount.OwnerRenamedData{OwnerFirst: "A", OwnerLast: "B"})
	msg, _ := warm.ToMessage()
	if err := pub.Publish(warm.Topic(topics), msg); err != nil {
		t.Fatal(err)
	}
	startServeChild(t, ep, testenv.UniqueName(t, "g1"))
	startServeChild(t, ep, testenv.UniqueName(t, "g2"))
	replies.wait(t, warm.ID, 2)

	overdraw := int64(-bankaccount.DefaultMinimumBalance + 50)
	withdrawals := make([]commands.Command, accounts)
	var wg sync.WaitGroup
	for i, id := range ids {
		withdrawals[i] = accountCmd(t, bankaccount.RecordTransaction, id, bankaccount.TransactionAcceptedData{Desc: "withdrawal", Amount: -overdraw})
		msg, _ := withdrawals[i].ToMessage()
		if err := pub.Publish(withdrawals[i].Topic(topics), msg); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rand.IntN(150)) * time.Millisecond)
			if res, err := svc.Dispatcher.Dispatch(ctx, accountCmd(t, bankaccount.RecordTransaction, id, bankaccount.TransactionAcceptedData{Desc: "deposit", Amount: 100})); err != nil || res.Status != commands.StatusAccepted {
				t.Errorf("deposit on %s: %+v, %v", id, res, err)
			}
		}()
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	outcomes := map[commands.Status]int{}
	for i, w := range withdrawals {
		got := replies.wait(t, w.ID, 2)
		fresh := 0
		for _, res := range got {
			if !res.Duplicate {
				fresh++
			}
			if res.Status != got[0].Status || res.Version != got[0].Version {
				t.Errorf("withdrawal on %s answered %+v and %+v", ids[i], got[0], res)
			}
		}
		if fresh != 1 {
			t.Errorf("withdrawal on %s: %d answers were not duplicates, want exactly 1: %+v", ids[i], fresh, got)
		}
		outcomes[got[0].Status]++
		applied := 0
		for _, e := range rigs.Events(t, svc, bankaccount.AggregateType, ids[i]) {
			if e.Metadata.CausationID == w.ID {
				applied++
			}
		}
		if want := map[bool]int{true: 1, false: 0}[got[0].Status == commands.StatusAccepted]; applied != want {
			t.Errorf("withdrawal on %s answered %s but appended %d times", ids[i], got[0].Status, applied)
		}
	}
	t.Logf("withdrawals: %v", outcomes)
}
