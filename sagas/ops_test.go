package sagas_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/oklog/ulid/v2"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/sagas"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// commandsDown fails every publish onto the bank accounts' commands
// topic: the saga's outbox rows stay.
type commandsDown struct {
	message.Publisher
	topics bus.Topics
}

func (p commandsDown) Publish(topic string, msgs ...*message.Message) error {
	if topic == p.topics.Commands(bankaccount.AggregateType) {
		return errors.New("broker unavailable (injected)")
	}
	return p.Publisher.Publish(topic, msgs...)
}

// TestOperatorRetriesAnOutboxRowNoRunnerCouldSendAndAbortsWithoutCompensation
// runs the ping saga with a publisher that cannot reach the commands
// topic: the instance's command stays in the outbox, List shows it stuck,
// and Retry (with a working publisher) sends it under its own id and
// deletes the row. The ping saga has no Abort hook, so Abort ends the
// instance aborted at once, sends nothing and removes its timeout; a
// second abort is refused with ErrFinished, one of no instance with
// ErrNoInstance, one without a reason with a ValidationError.
func TestOperatorRetriesAnOutboxRowNoRunnerCouldSendAndAbortsWithoutCompensation(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	saga := pingSaga(time.Hour)
	r.run(saga, commandsDown{Publisher: r.pub, topics: r.topics})
	r.ping("p1", ulid.Make().String())
	r.instance("p1", func(in sagas.Instance) bool { return in.Version == 1 })

	var list []sagas.Overview
	integration.Await(t, "one stuck instance", func() error {
		var err error
		if list, err = sagas.List(ctx, r.db, sagas.Filter{Saga: "ping", Status: sagas.StatusStuck, StuckAfter: 500 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 {
			return fmt.Errorf("stuck instances %+v", list)
		}
		return nil
	})
	if len(list) != 1 || list[0].Status != sagas.StatusStuck || len(list[0].Pending) != 1 || !list[0].Pending[0].Queued ||
		list[0].Pending[0].CommandID != "ping.p1.open" || len(list[0].Timeouts) != 1 {
		t.Fatalf("stuck instances %+v", list)
	}

	op, err := sagas.NewOperator(sagas.OperatorConfig{Saga: saga, DB: r.db, Publisher: r.pub, Outcomes: r.store, Topics: r.topics, StuckAfter: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	res, err := op.Retry(ctx, "p1")
	if err != nil || res.Err() != nil || len(res.Retried) != 1 || res.Retried[0].Action != sagas.RetryRanOutbox {
		t.Fatalf("retry: %+v, %v", res, err)
	}
	if cmds := r.sent(1); cmds[0].ID != "ping.p1.open" {
		t.Errorf("sent %+v", cmds[0])
	}
	d, err := sagas.Inspect(ctx, r.db, r.store, "ping", "p1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Outbox) != 0 || len(d.Commands) != 1 || d.Commands[0].Answered || d.Commands[0].Answer != nil || d.Status != sagas.StatusRunning {
		t.Errorf("after the retry: %+v", d)
	}

	var invalid *eventstore.ValidationError
	if _, err := op.Abort(ctx, "p1", "ops", " "); !errors.As(err, &invalid) {
		t.Errorf("abort without a reason: %v", err)
	}
	if _, err := op.Abort(ctx, "nope", "ops", "test"); !errors.Is(err, sagas.ErrNoInstance) {
		t.Errorf("abort of no instance: %v", err)
	}
	ab, err := op.Abort(ctx, "p1", "ops", "no longer wanted")
	if err != nil || ab.Outcome != sagas.OutcomeAborted || ab.Compensated || len(ab.Effects) != 0 {
		t.Fatalf("abort: %+v, %v", ab, err)
	}
	if _, err := op.Abort(ctx, "p1", "ops", "again"); !errors.Is(err, sagas.ErrFinished) {
		t.Errorf("second abort: %v", err)
	}
	list, err = sagas.List(ctx, r.db, sagas.Filter{Status: sagas.OutcomeAborted})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Abort == nil || list[0].Abort.Reason != "no longer wanted" || len(list[0].Timeouts) != 0 {
		t.Errorf("aborted instances %+v", list)
	}
}

// TestARetriedStepsRecordedAnswerIsSignedForTheSagasCommand runs the ping
// saga with a command key. Its command is accepted (recorded in the event
// store) but the answer is lost; Retry republishes the recorded answer,
// signed for the saga's command, and the saga, which takes only signed
// answers, finishes the instance with it.
func TestARetriedStepsRecordedAnswerIsSignedForTheSagasCommand(t *testing.T) {
	ctx := context.Background()
	key := []byte("0123456789abcdef0123456789abcdef-deployment")
	r := newRig(t)
	saga := pingSaga(time.Hour)
	r.run(saga, nil, func(c *sagas.Config) { c.CommandKey = key })
	r.ping("p2", ulid.Make().String())
	r.instance("p2", func(in sagas.Instance) bool { return in.Version == 1 })
	sent := r.sent(1)[0]
	facet, err := bankaccount.NewFacet(r.store, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := facet.Append(ctx, "p2", eventstore.Change{Events: []eventstore.NewEvent{bankaccount.Opened("p2")}, CommandID: sent.ID}); err != nil {
		t.Fatal(err)
	}

	op, err := sagas.NewOperator(sagas.OperatorConfig{Saga: saga, DB: r.db, Publisher: r.pub, Outcomes: r.store, Topics: r.topics,
		CommandKey: key, StuckAfter: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	integration.Await(t, "Retry to republish the recorded answer", func() error {
		res, err := op.Retry(ctx, "p2")
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Retried) != 1 || res.Retried[0].Action != sagas.RetryRepublishedAnswer || res.Err() != nil {
			return fmt.Errorf("retry: %+v", res)
		}
		return nil
	})
	if in := r.instance("p2", func(in sagas.Instance) bool { return in.Outcome != "" }); in.Outcome != string(commands.StatusAccepted) {
		t.Errorf("outcome %q, want accepted (the republished answer)", in.Outcome)
	}
}
