package sagas_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/bus/kafka/kafkatest"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
	ddbstore "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	migrate "github.com/eventpipe/eventpipe/migrations/dynamodb"
	pgmigrate "github.com/eventpipe/eventpipe/migrations/postgres"
	"github.com/eventpipe/eventpipe/privacy"
	"github.com/eventpipe/eventpipe/sagas"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// pingState is the state of the test saga.
type pingState struct {
	Pings  int    `json:"pings"`
	Answer string `json:"answer,omitempty"`
}

// pingSaga counts "Pinged" events of "pinger" aggregates per aggregate;
// the first one sends an OpenAccount for the bank account of the same id
// (step "open") and sets a timeout "expire" that cancels it. The answer,
// real or the cancel's, finishes the instance with its status.
func pingSaga(expire time.Duration) sagas.Saga[pingState] {
	return sagas.Saga[pingState]{
		Name:    "ping",
		Events:  []string{"pinger"},
		Route:   func(in sagas.Input) (string, bool) { return in.Event.AggregateID, in.Event.EventType == "Pinged" },
		Initial: func(string) pingState { return pingState{} },
		Handle: func(s pingState, in sagas.Input, fx *sagas.Effects) (pingState, error) {
			switch in.Kind {
			case sagas.KindEvent:
				s.Pings++
				if s.Pings == 1 {
					cmd, err := commands.NewJSON(bankaccount.OpenAccount, bankaccount.AggregateType, fx.Instance(), struct{}{})
					if err != nil {
						return s, err
					}
					fx.Send("open", cmd)
					fx.After("expire", expire)
				}
			case sagas.KindTimeout:
				fx.Cancel("open", eventstore.Ref{Type: bankaccount.AggregateType, ID: fx.Instance()}, "expired")
			case sagas.KindResult:
				s.Answer = in.Result.Reason
				fx.Finish(string(in.Result.Status))
			}
			return s, nil
		},
	}
}

// rig is a Runner of pingSaga on the real stack.
type rig struct {
	t      *testing.T
	topics bus.Topics
	db     *pgxpool.Pool
	store  *ddbstore.Store
	pub    message.Publisher
}

func newRig(t *testing.T) *rig {
	t.Helper()
	ctx := context.Background()
	schema, url := testenv.PostgresSchema(t, "sagas")
	if _, err := pgmigrate.Migrate(ctx, pgmigrate.Config{URL: testenv.Endpoints().Postgres, Schema: schema}); err != nil {
		t.Fatal(err)
	}
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	client := testenv.DynamoDB(t)
	table := testenv.UniqueName(t, "events")
	if err := migrate.CreateEventsTable(ctx, client, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, client, table) })
	store, err := ddbstore.New(ddbstore.Config{Client: client, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: testenv.KafkaBrokers(t), Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return &rig{t: t, topics: bus.Topics{Prefix: testenv.UniqueName(t, "ns") + "."}, db: db, store: store, pub: pub}
}

// run starts a Runner of saga publishing through pub (default the rig's)
// until t ends.
func (r *rig) run(saga sagas.Definition, pub message.Publisher, opts ...func(*sagas.Config)) {
	r.t.Helper()
	if pub == nil {
		pub = r.pub
	}
	cfg := sagas.Config{Saga: saga, DB: r.db, Publisher: pub, Outcomes: r.store, Brokers: testenv.KafkaBrokers(r.t),
		Topics: r.topics, PollInterval: 100 * time.Millisecond, SweepAfter: time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	runner, err := sagas.New(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx) }()
	r.t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			r.t.Errorf("runner: %v", err)
		}
	})
}

// ping publishes a Pinged event of pinger id with event id eventID.
func (r *rig) ping(id, eventID string) {
	r.t.Helper()
	msg, err := bus.EventMessage(eventstore.Envelope{EventID: eventID, EventType: "Pinged", AggregateType: "pinger", AggregateID: id,
		Sequence: 1, SchemaVersion: 1, OccurredAt: time.Now().UTC(), Payload: []byte(`{}`)})
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.pub.Publish(r.topics.Events("pinger"), msg); err != nil {
		r.t.Fatal(err)
	}
}

// answer publishes a command's answer on the ping saga's replies topic,
// as the command handlers do for the commands the saga sends.
func (r *rig) answer(res commands.Result) {
	r.t.Helper()
	msg, err := res.ToMessage("")
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.pub.Publish(sagas.ReplyTopic(r.topics, "ping"), msg); err != nil {
		r.t.Fatal(err)
	}
}

// handled answers the saga's OpenAccount command id of instance as the
// command handlers do: the answer is recorded in the event store (the
// account opened under the command id when accepted, the refusal
// otherwise), then published on the replies topic.
func (r *rig) handled(instance string, status commands.Status) {
	r.t.Helper()
	ctx := context.Background()
	id := sagas.CommandID("ping", instance, "open")
	ref := eventstore.Ref{Type: bankaccount.AggregateType, ID: instance}
	res := commands.Result{CommandID: id, Status: status, AggregateType: ref.Type, AggregateID: ref.ID}
	if status == commands.StatusAccepted {
		facet, err := bankaccount.NewFacet(r.store, nil)
		if err != nil {
			r.t.Fatal(err)
		}
		out, err := facet.Append(ctx, instance, eventstore.Change{Events: []eventstore.NewEvent{bankaccount.Opened(instance)}, CommandID: id})
		if err != nil {
			r.t.Fatal(err)
		}
		res.Version = out.Append.LastSeq
	} else if _, err := r.store.RecordRefusal(ctx, ref, id, eventstore.Refusal{Status: string(status), Reason: "refused by the test"}); err != nil {
		r.t.Fatal(err)
	}
	r.answer(res)
}

// instance waits until the instance id exists and cond holds for it.
func (r *rig) instance(id string, cond func(sagas.Instance) bool) sagas.Instance {
	r.t.Helper()
	var in sagas.Instance
	integration.Await(r.t, "instance "+id, func() error {
		var err error
		in, err = sagas.Get(context.Background(), r.db, "ping", id)
		if err != nil && !errors.Is(err, sagas.ErrNoInstance) {
			r.t.Fatal(err)
		}
		if err != nil || !cond(in) {
			return fmt.Errorf("%+v, %v", in, err)
		}
		return nil
	})
	return in
}

// drained waits until the saga's consumer group has committed
// every message published so far on each of topics (no lag on any
// partition). The runner acks an input once its transaction committed,
// so every input published before the call has been handled.
func (r *rig) drained(topics ...string) {
	r.t.Helper()
	group := sagas.ConsumerGroup(r.topics, "ping")
	integration.Await(r.t, fmt.Sprintf("group %s to commit everything on %v", group, topics), func() error {
		lag, err := kafka.ConsumerLag(context.Background(), kafka.Cluster{Brokers: testenv.KafkaBrokers(r.t)}, group, topics)
		if err != nil {
			r.t.Fatal(err)
		}
		seen := map[string]bool{}
		var behind int64
		for _, p := range lag {
			seen[p.Topic] = true
			behind += p.Lag
		}
		if len(seen) != len(topics) || behind != 0 {
			return fmt.Errorf("still behind: %+v", lag)
		}
		return nil
	})
}

// sent reads the commands the saga published for bank accounts.
func (r *rig) sent(n int) []commands.Command {
	r.t.Helper()
	var out []commands.Command
	for _, msg := range testenv.Consume(r.t, testenv.KafkaBrokers(r.t), testenv.UniqueName(r.t, "reader"), r.topics.Commands(bankaccount.AggregateType), n) {
		cmd, err := commands.FromMessage(msg)
		if err != nil {
			r.t.Fatal(err)
		}
		out = append(out, cmd)
	}
	return out
}

func TestEachInputTakesEffectOnceAndAFinishedInstanceTakesNoMore(t *testing.T) {
	r := newRig(t)
	r.run(pingSaga(time.Hour), nil)
	first, second := ulid.Make().String(), ulid.Make().String()
	r.ping("i1", first)
	r.ping("i1", first) // a redelivery
	r.ping("i1", second)
	in := r.instance("i1", func(in sagas.Instance) bool { return in.Version == 2 })
	if string(in.State) != `{"pings": 2}` && string(in.State) != `{"pings":2}` {
		t.Errorf("state %s, want 2 pings", in.State)
	}
	cmds := r.sent(1)
	if cmds[0].ID != "ping.i1.open" || cmds[0].Type != bankaccount.OpenAccount || cmds[0].AggregateID != "i1" {
		t.Errorf("sent %+v", cmds[0])
	}

	r.handled("i1", commands.StatusAccepted)
	r.answer(commands.Result{CommandID: "ping.i1.open", Status: commands.StatusAccepted, Version: 1,
		AggregateType: bankaccount.AggregateType, AggregateID: "i1", Duplicate: true}) // a redelivery
	r.answer(commands.Result{CommandID: "other.i1.open", Status: commands.StatusRejected}) // not this saga's
	in = r.instance("i1", func(in sagas.Instance) bool { return in.Outcome != "" })
	if in.Outcome != "accepted" || in.Version != 3 {
		t.Errorf("after the answer: outcome %q version %d, want accepted at 3", in.Outcome, in.Version)
	}
	r.ping("i1", ulid.Make().String())
	r.drained(r.topics.Events("pinger"), sagas.ReplyTopic(r.topics, "ping")) // the third ping and every answer are handled
	if in := r.instance("i1", func(sagas.Instance) bool { return true }); in.Version != 3 {
		t.Errorf("a finished instance took an input: version %d", in.Version)
	}
	var handled int
	if err := r.db.QueryRow(context.Background(), `SELECT count(*) FROM saga_inputs WHERE saga = 'ping' AND instance = 'i1'`).Scan(&handled); err != nil {
		t.Fatal(err)
	}
	if handled != 4 { // two pings, one answer, the ping after the finish
		t.Errorf("%d inputs recorded for i1, want 4", handled)
	}
}

func TestATimeoutCancelsAnUnansweredCommandUnlessItWasAnsweredFirst(t *testing.T) {
	r := newRig(t)
	r.run(pingSaga(500*time.Millisecond), nil)

	// Nobody answers i1's command: the timeout cancels it, and the
	// cancel's refusal is the answer, recorded in the store.
	r.ping("i1", ulid.Make().String())
	in := r.instance("i1", func(in sagas.Instance) bool { return in.Outcome != "" })
	if in.Outcome != string(commands.StatusRejected) || string(in.State) == "" {
		t.Errorf("i1: outcome %q, state %s", in.Outcome, in.State)
	}
	var refused *eventstore.RefusedCommandError
	_, err := r.store.CommandResult(context.Background(), eventstore.Ref{Type: bankaccount.AggregateType, ID: "i1"}, "ping.i1.open")
	if !errors.As(err, &refused) || refused.Refusal.Reason != "expired" {
		t.Fatalf("the store's answer to ping.i1.open: %v, want the refusal", err)
	}

	// i2's command was applied (its answer still unread) when the
	// timeout fires: the cancel loses, and the answer is the acceptance.
	facet, err := bankaccount.NewFacet(r.store, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := facet.Append(context.Background(), "i2", eventstore.Change{Events: []eventstore.NewEvent{bankaccount.Opened("i2")}, CommandID: "ping.i2.open"}); err != nil {
		t.Fatal(err)
	}
	r.ping("i2", ulid.Make().String())
	if in := r.instance("i2", func(in sagas.Instance) bool { return in.Outcome != "" }); in.Outcome != string(commands.StatusAccepted) {
		t.Errorf("i2: outcome %q, want accepted (the command won the race)", in.Outcome)
	}
	if v, err := r.store.Version(context.Background(), eventstore.Ref{Type: bankaccount.AggregateType, ID: "i2"}); err != nil || v != 1 {
		t.Errorf("i2's account at %d, %v; want 1", v, err)
	}
}

// failingPublisher fails the first publish onto a commands topic.
type failingPublisher struct {
	message.Publisher
	failed atomic.Int32
	once   sync.Once
	topics bus.Topics
}

func (p *failingPublisher) Publish(topic string, msgs ...*message.Message) error {
	if topic == p.topics.Commands(bankaccount.AggregateType) {
		var fail bool
		p.once.Do(func() { fail = true })
		if fail {
			p.failed.Add(1)
			return errors.New("broker unavailable (injected)")
		}
	}
	return p.Publisher.Publish(topic, msgs...)
}

func TestEffectsThatFailedAfterTheCommitAreRunByTheSweep(t *testing.T) {
	r := newRig(t)
	pub := &failingPublisher{Publisher: r.pub, topics: r.topics}
	r.run(pingSaga(time.Hour), pub)
	r.ping("i1", ulid.Make().String())
	r.instance("i1", func(in sagas.Instance) bool { return in.Version == 1 })
	cmds := r.sent(1) // published by the sweep, after SweepAfter
	if pub.failed.Load() != 1 || cmds[0].ID != "ping.i1.open" {
		t.Errorf("failed publishes %d, sent %+v", pub.failed.Load(), cmds[0])
	}
	integration.Await(t, "no effects left, 1 running with its timeout", func() error {
		s, err := sagas.Summarize(context.Background(), r.db, "ping")
		if err != nil {
			t.Fatal(err)
		}
		if s.Effects != 0 || s.Running != 1 || s.Timeouts != 1 {
			return fmt.Errorf("summary %+v", s)
		}
		return nil
	})
}

func TestTheInputsOfAFinishedInstanceArePrunedAndItStillTakesNoMore(t *testing.T) {
	r := newRig(t)
	r.run(pingSaga(time.Hour), nil, func(c *sagas.Config) { c.KeepInputs = 300 * time.Millisecond })
	first := ulid.Make().String()
	r.ping("i1", first)
	r.ping("i2", ulid.Make().String())
	r.instance("i1", func(in sagas.Instance) bool { return in.Version == 1 })
	r.handled("i1", commands.StatusAccepted)
	r.instance("i1", func(in sagas.Instance) bool { return in.Outcome != "" })
	r.instance("i2", func(sagas.Instance) bool { return true })
	inputs := func(instance string) int {
		var n int
		if err := r.db.QueryRow(context.Background(), `SELECT count(*) FROM saga_inputs WHERE saga = 'ping' AND instance = $1`, instance).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	integration.Await(t, "the input ids of i1 (finished) to be pruned", func() error {
		if n := inputs("i1"); n > 0 {
			return fmt.Errorf("i1 still has %d input ids", n)
		}
		return nil
	})
	if n := inputs("i2"); n != 1 {
		t.Errorf("i2 (running) has %d input ids, want its 1 kept", n)
	}
	r.ping("i1", first) // a redelivery after the prune
	r.drained(r.topics.Events("pinger"))
	if in := r.instance("i1", func(sagas.Instance) bool { return true }); in.Version != 2 || in.Outcome != "accepted" {
		t.Errorf("i1 after a redelivery: version %d outcome %q, want 2 and accepted", in.Version, in.Outcome)
	}
}

// TestForgedRepliesAreIgnored publishes, on the replies topic that any
// client can write to, answers with the saga's command id form that the
// command handlers never gave: to a command the saga never sent, naming
// another aggregate than the one the command went to, and contradicting
// the answer the event store recorded. The saga takes none of them; the
// genuine answer then finishes the instance with the recorded status.
func TestForgedRepliesAreIgnored(t *testing.T) {
	r := newRig(t)
	r.run(pingSaga(time.Hour), nil)
	r.ping("i1", ulid.Make().String())
	r.instance("i1", func(in sagas.Instance) bool { return in.Version == 1 })
	r.sent(1)
	forged := []commands.Result{
		{CommandID: "ping.i9.open", Status: commands.StatusAccepted, AggregateType: bankaccount.AggregateType, AggregateID: "i9"}, // never sent
		{CommandID: "ping.i1.open", Status: commands.StatusAccepted, AggregateType: bankaccount.AggregateType, AggregateID: "i2"}, // another aggregate
		{CommandID: "ping.i1.open", Status: commands.StatusAccepted, AggregateType: bankaccount.AggregateType, AggregateID: "i1"}, // nothing recorded yet
	}
	for _, f := range forged {
		r.answer(f)
	}
	r.drained(sagas.ReplyTopic(r.topics, "ping"))
	if in := r.instance("i1", func(sagas.Instance) bool { return true }); in.Outcome != "" || in.Version != 1 {
		t.Fatalf("a forged reply moved the instance: outcome %q version %d", in.Outcome, in.Version)
	}
	// The store records a refusal; a reply claiming acceptance is forged.
	r.handled("i1", commands.StatusRejected)
	r.answer(commands.Result{CommandID: "ping.i1.open", Status: commands.StatusAccepted, AggregateType: bankaccount.AggregateType, AggregateID: "i1"})
	in := r.instance("i1", func(in sagas.Instance) bool { return in.Outcome != "" })
	if in.Outcome != string(commands.StatusRejected) || in.Version != 2 {
		t.Errorf("outcome %q version %d, want rejected at 2 (the recorded answer)", in.Outcome, in.Version)
	}
	var unverified float64
	r.drained(sagas.ReplyTopic(r.topics, "ping"))
	if err := r.db.QueryRow(context.Background(), `SELECT count(*) FROM saga_inputs WHERE saga = 'ping' AND input_id LIKE 'result:%'`).Scan(&unverified); err != nil {
		t.Fatal(err)
	}
	if unverified != 1 {
		t.Errorf("%v replies taken as inputs, want 1 (the genuine one)", unverified)
	}
}

// TestAReplyToACommandSentBeforeSagaCommandsIsTakenAfterItsTimeout
// simulates a command sent before migration 008 (its saga_commands row is
// gone): its genuine reply is ignored, and the step's timeout then cancels
// the command, which records it as the saga's; the answer the store holds
// (the acceptance, which came first) finishes the instance.
func TestAReplyToACommandSentBeforeSagaCommandsIsTakenAfterItsTimeout(t *testing.T) {
	r := newRig(t)
	r.run(pingSaga(2*time.Second), nil)
	r.ping("i3", ulid.Make().String())
	r.instance("i3", func(in sagas.Instance) bool { return in.Version == 1 })
	if _, err := r.db.Exec(context.Background(), `DELETE FROM saga_commands WHERE saga = 'ping' AND command_id = 'ping.i3.open'`); err != nil {
		t.Fatal(err)
	}
	r.handled("i3", commands.StatusAccepted)
	if in := r.instance("i3", func(in sagas.Instance) bool { return in.Outcome != "" }); in.Outcome != string(commands.StatusAccepted) {
		t.Errorf("after the timeout: outcome %q, want accepted (the store's answer)", in.Outcome)
	}
	// The reply was taken only after the timeout: the first reply (sent
	// right away) was ignored, the cancel's answer finished the instance.
	var timeoutAt, resultAt *time.Time
	if err := r.db.QueryRow(context.Background(), `SELECT
		(SELECT min(handled_at) FROM saga_inputs WHERE saga = 'ping' AND instance = 'i3' AND input_id LIKE 'timeout:%'),
		(SELECT min(handled_at) FROM saga_inputs WHERE saga = 'ping' AND instance = 'i3' AND input_id LIKE 'result:%')`).Scan(&timeoutAt, &resultAt); err != nil {
		t.Fatal(err)
	}
	if timeoutAt == nil || resultAt == nil || resultAt.Before(*timeoutAt) {
		t.Errorf("timeout handled at %v, reply at %v: want the reply taken after the timeout", timeoutAt, resultAt)
	}
}

// TestASagaIgnoresAReplyToACommandItDidNotSend runs the ping saga with a
// command key. Its step's id is then answered by a command the saga did
// not send (recorded accepted in the event store under that id) and by a
// reply signed for another command with the same id: the saga takes
// neither, although the store confirms the id was answered. The answer
// signed for the command it sent then finishes the instance.
func TestASagaIgnoresAReplyToACommandItDidNotSend(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef-deployment")
	r := newRig(t)
	r.run(pingSaga(time.Hour), nil, func(c *sagas.Config) { c.CommandKey = key })
	r.ping("i1", ulid.Make().String())
	r.instance("i1", func(in sagas.Instance) bool { return in.Version == 1 })
	sent := r.sent(1)[0]
	replies := sagas.ReplyTopic(r.topics, "ping")

	r.handled("i1", commands.StatusAccepted) // another command took the id; its answer is unsigned
	other := sent
	other.Payload = []byte(`{"owner":"mallory"}`)
	forged := commands.Result{CommandID: sent.ID, Status: commands.StatusAccepted, AggregateType: sent.AggregateType, AggregateID: sent.AggregateID, Version: 1}
	forged.Signature = commands.SignResult(key, commands.SignCommand(key, other, replies), forged)
	r.answer(forged)
	r.drained(replies)
	if in := r.instance("i1", func(sagas.Instance) bool { return true }); in.Outcome != "" || in.Version != 1 {
		t.Fatalf("a reply to a command the saga did not send moved the instance: outcome %q version %d", in.Outcome, in.Version)
	}

	genuine := commands.Result{CommandID: sent.ID, Status: commands.StatusAccepted, AggregateType: sent.AggregateType, AggregateID: sent.AggregateID, Version: 1}
	genuine.Signature = commands.SignResult(key, commands.SignCommand(key, sent, replies), genuine)
	r.answer(genuine)
	if in := r.instance("i1", func(in sagas.Instance) bool { return in.Outcome != "" }); in.Outcome != string(commands.StatusAccepted) || in.Version != 2 {
		t.Errorf("outcome %q version %d, want accepted at 2 (the answer signed for the saga's command)", in.Outcome, in.Version)
	}
}

// forgottenSubjects is an Opener and CommandSealer for whom every
// aggregate's subject was forgotten: no command can be sealed.
type forgottenSubjects struct{}

func (forgottenSubjects) OpenEvent(_ context.Context, e eventstore.Envelope) (eventstore.Envelope, error) {
	return e, nil
}

func (forgottenSubjects) OpenOutbound(_ context.Context, o eventstore.OutboundRecord) (eventstore.OutboundRecord, error) {
	return o, nil
}

func (forgottenSubjects) SealCommand(_ context.Context, c eventstore.CommandRef, _ json.RawMessage) (json.RawMessage, error) {
	return nil, &privacy.ForgottenError{Scope: privacy.Scope(c.Aggregate)}
}

func (forgottenSubjects) OpenCommand(_ context.Context, _ eventstore.CommandRef, p json.RawMessage) (json.RawMessage, error) {
	return p, nil
}

// TestACommandWhoseSubjectWasForgottenIsAnsweredRejected: a command the
// runner cannot seal because its aggregate's subject was forgotten is
// never published; the saga gets the answer the handlers would give,
// rejected with privacy.forgotten, recorded in the store under its id.
func TestACommandWhoseSubjectWasForgottenIsAnsweredRejected(t *testing.T) {
	r := newRig(t)
	r.run(pingSaga(time.Hour), nil, func(c *sagas.Config) { c.Opener = forgottenSubjects{} })
	r.ping("i1", ulid.Make().String())
	in := r.instance("i1", func(in sagas.Instance) bool { return in.Outcome != "" })
	if in.Outcome != string(commands.StatusRejected) || !strings.Contains(string(in.State), "forgotten") {
		t.Errorf("i1: outcome %q, state %s; want rejected as forgotten", in.Outcome, in.State)
	}
	var refused *eventstore.RefusedCommandError
	_, err := r.store.CommandResult(context.Background(), eventstore.Ref{Type: bankaccount.AggregateType, ID: "i1"}, "ping.i1.open")
	if !errors.As(err, &refused) || refused.Refusal.Code != privacy.CodeForgotten {
		t.Fatalf("the store's answer to ping.i1.open: %v, want a refusal with %s", err, privacy.CodeForgotten)
	}
	if dump := kafkatest.TopicsDump(t, testenv.KafkaBrokers(t), r.topics.Commands(bankaccount.AggregateType)); dump != "" {
		t.Errorf("the command was published:\n%s", dump)
	}
}
