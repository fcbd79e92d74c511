package e2e_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/oklog/ulid/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/domains/transfer"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/operator"
	"github.com/eventpipe/eventpipe/sagas"
	"github.com/eventpipe/eventpipe/sagas/transfersaga"
)

// kafkaOffsets is an offset reader on the stack's broker for tests.
func kafkaOffsets(t *testing.T) *kafka.OffsetReader {
	t.Helper()
	r, err := kafka.NewOffsetReader(kafka.Cluster{Brokers: testenv.KafkaBrokers(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// topicEnd sums the end offsets of topic: how many records it holds (0
// while it does not exist, or its offsets cannot be read).
func topicEnd(t *testing.T, offsets *kafka.OffsetReader, topic string) int64 {
	t.Helper()
	read, err := offsets.Read(context.Background(), kafka.OffsetsRequest{Newest: []string{topic}})
	if err != nil {
		t.Fatal(err)
	}
	return read.Newest[topic]
}

// runConsumers runs cfg's consumers until t ends and fails t when Run
// returns an error.
func runConsumers(t *testing.T, cfg eventpipe.ConsumersConfig) {
	t.Helper()
	cons, err := eventpipe.NewConsumers(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cons.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("consumers %v: %v", cfg.Names, err)
		}
		_ = cons.Close()
	})
}

// todoEvent is a TodoCreated event of todo id, as the relay publishes it.
func todoEvent(t *testing.T, id string) *message.Message {
	t.Helper()
	e := eventstore.Envelope{EventID: ulid.Make().String(), AggregateType: todo.AggregateType, AggregateID: id, Sequence: 1,
		EventType: todo.TodoCreated, SchemaVersion: 1, OccurredAt: time.Now().UTC(), Payload: []byte(`{"title":"t"}`)}
	msg, err := bus.EventMessage(e)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// TestAPlainWatermillHandlerRunsAsAConsumerWithItsGroupPoisonMetricsAndStatusRow
// registers a user's Watermill handler on the todo events topic in the
// catalogue and runs it as `eventpipe consume` does (NewConsumers): it
// sees nothing published before its first start (its default start is
// latest), sees what comes after in its own group
// (<prefix>handler.<name>), sends the message it refuses for good to its
// poison topic, exports its router metrics labelled consumer=<name>, and
// Status reports its row (kind, group, committed offsets, poisoned).
func TestAPlainWatermillHandlerRunsAsAConsumerWithItsGroupPoisonMetricsAndStatusRow(t *testing.T) {
	ep := rigs.Endpoints(t)
	topics := bus.Topics{Prefix: ep.TopicPrefix}
	topic := topics.Events(todo.AggregateType)
	offsets := kafkaOffsets(t)
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: ep.KafkaBrokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	for _, id := range []string{"old-1", "old-2", "old-3"} {
		if err := pub.Publish(topic, todoEvent(t, id)); err != nil {
			t.Fatal(err)
		}
	}

	var (
		mu   sync.Mutex
		seen []string
	)
	h, err := eventpipe.Handler(eventpipe.HandlerConfig{Name: "audit", Topics: []string{bus.EventsTopic(todo.AggregateType)},
		Handler: func(msg *message.Message) error {
			e, err := bus.EventFromMessage(msg)
			if err != nil {
				return err
			}
			if e.AggregateID == "poison-me" {
				return &eventstore.ValidationError{Field: "aggregate_id", Reason: "refused for good by the test"}
			}
			mu.Lock()
			seen = append(seen, e.AggregateID)
			mu.Unlock()
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	cat := eventpipe.NewCatalog()
	if err := cat.AddDomain(todo.Domain()); err != nil {
		t.Fatal(err)
	}
	if err := cat.AddConsumer(h); err != nil {
		t.Fatal(err)
	}
	group := eventpipe.HandlerGroup(topics, "audit")
	reg := prometheus.NewRegistry()
	runConsumers(t, eventpipe.ConsumersConfig{Process: eventpipe.Process{Catalog: cat, Endpoints: ep}, Names: []string{"audit"}, Registerer: reg})
	// The group's start (the end of the topic) is committed before it
	// joins: what was published before is never seen.
	rigs.WaitFor(t, "the handler's group to start", func() bool { return rigs.GroupCommitted(t, group, topic) >= 0 })
	if got := rigs.GroupCommitted(t, group, topic); got != 3 {
		t.Fatalf("the handler's group started at %d, want 3 (the end of the topic)", got)
	}
	for _, id := range []string{"new-1", "poison-me", "new-2"} {
		if err := pub.Publish(topic, todoEvent(t, id)); err != nil {
			t.Fatal(err)
		}
	}
	poison := topics.Poison("handler.audit")
	rigs.WaitFor(t, "the new events and the poisoned one", func() bool {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		return n >= 2 && topicEnd(t, offsets, poison) == 1 && rigs.GroupCommitted(t, group, topic) == 6
	})
	mu.Lock()
	slices.Sort(seen)
	if !slices.Equal(seen, []string{"new-1", "new-2"}) {
		t.Errorf("the handler saw %v, want only the events published after its start", seen)
	}
	mu.Unlock()

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labelled := 0
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "consumer" && l.GetValue() == "audit" {
					labelled++
				}
			}
		}
	}
	if labelled == 0 {
		t.Errorf("no metric labelled consumer=audit among %d families", len(families))
	}

	rep := operator.Status(context.Background(), operator.StatusConfig{Process: eventpipe.Process{Catalog: cat, Endpoints: ep}})
	i := slices.IndexFunc(rep.Groups, func(g operator.GroupStatus) bool { return g.Consumer == "audit" })
	if i < 0 {
		t.Fatalf("no status row for the handler among %+v (errors %v)", rep.Groups, rep.Errors)
	}
	g := rep.Groups[i]
	if g.Kind != eventpipe.KindHandler || g.Group != group || g.PoisonTopic != poison || g.Poisoned != 1 ||
		g.Committed != 6 || g.Lag != 0 || !slices.Equal(g.Topics, []string{topic}) {
		t.Errorf("status row %+v", g)
	}
}

// TestASagaFirstDeployedOnHistoryActsOnNoneOfItUnlessStartedAtEarliest
// requests transfers before the transfer saga was ever deployed (their
// events are stored and on the saga's topics), then deploys it. By
// default it acts on none of them, only on a transfer requested after
// its start; started with --start earliest (ConsumersConfig.Start) it
// acts on all of them.
func TestASagaFirstDeployedOnHistoryActsOnNoneOfItUnlessStartedAtEarliest(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	for _, tc := range []struct {
		name  string
		start bus.Start
	}{{"default", bus.Start{}}, {"earliest", bus.StartEarliest}} {
		t.Run(tc.name, func(t *testing.T) {
			rig := rigs.NewTransferRig(t, time.Minute)
			for _, acc := range []string{"a", "b"} {
				rig.Dispatch(bankaccount.OpenAccount, bankaccount.AggregateType, acc, struct{}{})
				rig.Dispatch(bankaccount.RecordTransaction, bankaccount.AggregateType, acc, bankaccount.TransactionAcceptedData{Desc: "deposit", Amount: 1000})
			}
			old := []string{"old-1", "old-2", "old-3"}
			for _, id := range old {
				rig.RequestTransfer(id, "a", "b", 10)
			}
			offsets := kafkaOffsets(t)
			topics := bus.Topics{Prefix: rig.EP.TopicPrefix}
			eventsTopic := topics.Events(transfer.AggregateType)
			rigs.WaitFor(t, "the old transfers' events on the saga's topic", func() bool {
				return topicEnd(t, offsets, eventsTopic) >= int64(len(old))
			})
			cons, _ := rig.Cat.Consumer(eventpipe.SagaConsumer(transfersaga.Name))
			info := cons.Describe(topics)
			runConsumers(t, eventpipe.ConsumersConfig{Process: eventpipe.Process{Catalog: rig.Cat, Endpoints: rig.EP}, DB: rig.DB, Start: tc.start,
				Names: []string{eventpipe.SagaConsumer(transfersaga.Name)}})
			rigs.WaitFor(t, "the saga's group to start", func() bool { return rigs.GroupCommitted(t, info.Group, info.Topics...) >= 0 })
			if tc.start.IsEarliest() {
				rigs.WaitFor(t, "the saga to finish the old transfers", func() bool { return rig.Finished() == int64(len(old)) })
				for _, id := range old {
					// The saga's last command completes the transfer after
					// the instance finished.
					rigs.WaitFor(t, "transfer "+id+" to complete", func() bool { return rig.TransferStatus(id) == transfer.StatusCompleted })
				}
				return
			}
			rig.RequestTransfer("new-1", "a", "b", 10)
			rigs.WaitFor(t, "the saga to finish the new transfer", func() bool { return rig.TransferStatus("new-1") == transfer.StatusCompleted })
			// The saga's group is past every old event: it will never
			// act on them.
			rigs.WaitFor(t, "the saga's group to commit past the new transfer", func() bool {
				return rigs.GroupCommitted(t, info.Group, eventsTopic) == topicEnd(t, offsets, eventsTopic)
			})
			if n := rig.Finished(); n != 1 {
				t.Errorf("the saga finished %d instances, want 1 (the new transfer only)", n)
			}
			for _, id := range old {
				if s := rig.TransferStatus(id); s != transfer.StatusRequested {
					t.Errorf("transfer %s requested before the saga's deployment is %q, want still requested", id, s)
				}
			}
		})
	}
}

// TestConsumersRefuseAStartTheirKindCannotTake: history is for read and
// search models; a saga, the aggregator or the snapshotter asked to start
// there is refused before anything runs, with a typed error.
func TestConsumersRefuseAStartTheirKindCannotTake(t *testing.T) {
	ep := rigs.Endpoints(t)
	for _, name := range []string{eventpipe.SagaConsumer(transfersaga.Name), eventpipe.Snapshotter, eventpipe.AnalyticsAggregator} {
		_, err := eventpipe.NewConsumers(context.Background(), eventpipe.ConsumersConfig{Process: eventpipe.Process{Endpoints: ep}, Names: []string{name}, Start: bus.StartHistory})
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || ve.Field != "start" {
			t.Errorf("%s with start history: %v", name, err)
		}
	}
	_, err := eventpipe.NewConsumers(context.Background(), eventpipe.ConsumersConfig{Process: eventpipe.Process{Endpoints: ep}, Names: []string{"no-such"}})
	if !errors.Is(err, eventpipe.ErrUnknownConsumer) {
		t.Errorf("an unknown consumer: %v", err)
	}
	if _, err := bus.ParseStart("yesterday"); err == nil {
		t.Error("a start that is not a start was accepted")
	}
	for in, want := range map[string]string{"history": "history", "earliest": "earliest", "latest": "latest", "2026-11-25T10:00:00Z": "2026-11-25T10:00:00Z"} {
		s, err := bus.ParseStart(in)
		if err != nil || s.String() != want {
			t.Errorf("ParseStart(%q) = %v, %v", in, s, err)
		}
	}
}

// TestAReadModelStartedAtLatestShowsNoHistory stores three todos (their
// events relayed onto the topic), then starts the todos read model for the
// first time with start latest: it shows none of them, only a todo created
// after its start.
func TestAReadModelStartedAtLatestShowsNoHistory(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ep := rigs.Endpoints(t)
	db := withLeasesAndReadModels(t, &ep, "latest")
	svc := rigs.NewService(t, ep, testenv.UniqueName(t, "g"))
	rel, err := eventpipe.NewRelay(ctx, eventpipe.RelayConfig{Process: eventpipe.Process{Endpoints: ep}, DiscoveryInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer rel.Close()
	relayed := make(chan error, 1)
	go func() { relayed <- rel.Run(ctx) }()
	defer func() { cancel(); <-relayed }()
	create := func(id string) {
		res, err := svc.Dispatcher.Dispatch(ctx, rigs.TodoCmd(t, todo.CreateTodo, id, todo.TodoData{Title: id}, nil))
		if err != nil || res.Status != "accepted" {
			t.Fatalf("create %s: %+v, %v", id, res, err)
		}
	}
	for _, id := range []string{"old-1", "old-2", "old-3"} {
		create(id)
	}
	offsets := kafkaOffsets(t)
	topic := bus.Topics{Prefix: ep.TopicPrefix}.Events(todo.AggregateType)
	rigs.WaitFor(t, "the old todos on the topic", func() bool { return topicEnd(t, offsets, topic) == 3 })

	runConsumers(t, eventpipe.ConsumersConfig{Process: eventpipe.Process{Endpoints: ep}, DB: db, Names: []string{"todos"}, Start: bus.StartLatest})
	group := bus.Topics{Prefix: ep.TopicPrefix}.Prefix + "projection.todos"
	rigs.WaitFor(t, "the read model's group to start", func() bool { return rigs.GroupCommitted(t, group, topic) >= 0 })
	create("new-1")
	rows := func() []string {
		var ids []string
		r, err := db.Query(ctx, `SELECT todo_id FROM todos ORDER BY todo_id`)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for r.Next() {
			var id string
			if err := r.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		return ids
	}
	rigs.WaitFor(t, "the new todo in the read model", func() bool { return slices.Contains(rows(), "new-1") })
	rigs.WaitFor(t, "the group past the new todo", func() bool { return rigs.GroupCommitted(t, group, topic) == 4 })
	if got := rows(); !slices.Equal(got, []string{"new-1"}) {
		t.Errorf("read model started at latest holds %v, want only new-1", got)
	}
}

// TestACommandUnderASagasIDIsRefusedUnlessTheSagaSignedIt gives the
// command handlers and the transfer saga a command key. A client sends a
// credit of 999 to account b under the command id the saga will use for
// transfer tr-1's credit step, before the saga does: it is answered
// invalid and nothing is recorded or appended. The transfer then runs:
// the saga's own signed credit of 300 is applied under that id, once.
func TestACommandUnderASagasIDIsRefusedUnlessTheSagaSignedIt(t *testing.T) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	key = []byte(hex.EncodeToString(key))
	rig := rigs.NewSagaRigWithKey(t, rigs.TransferCatalog(time.Minute), key)
	rig.Dispatch(bankaccount.OpenAccount, bankaccount.AggregateType, "a", struct{}{})
	rig.Dispatch(bankaccount.RecordTransaction, bankaccount.AggregateType, "a", bankaccount.TransactionAcceptedData{Desc: "deposit", Amount: 1000})
	rig.Dispatch(bankaccount.OpenAccount, bankaccount.AggregateType, "b", struct{}{})
	rig.RunSaga(transfersaga.Name)

	creditID := sagas.CommandID(transfersaga.Name, "tr-1", transfersaga.StepCredit)
	forged, err := commands.NewJSON(bankaccount.RecordTransaction, bankaccount.AggregateType, "b", bankaccount.TransactionAcceptedData{Desc: "forged", Amount: 999})
	if err != nil {
		t.Fatal(err)
	}
	forged.ID = creditID
	msg, err := forged.ToMessage()
	if err != nil {
		t.Fatal(err)
	}
	topics := bus.Topics{Prefix: rig.EP.TopicPrefix}
	if err := rig.Pub.Publish(forged.Topic(topics), msg); err != nil {
		t.Fatal(err)
	}
	replies := testenv.Consume(t, rig.EP.KafkaBrokers, testenv.UniqueName(t, "replies"), topics.Replies(), 1)
	res, err := commands.ResultFromMessage(replies[0])
	if err != nil || res.CommandID != creditID || res.Status != commands.StatusInvalid || !strings.Contains(res.Reason, "not signed") {
		t.Fatalf("the forged command's answer: %+v, %v; want invalid, not signed", res, err)
	}
	if _, err := rig.Svc.Store.CommandResult(context.Background(), eventstore.Ref{Type: bankaccount.AggregateType, ID: "b"}, creditID); !errors.Is(err, eventstore.ErrCommandNotFound) {
		t.Fatalf("the forged command left a record: %v", err)
	}
	if b, _ := rig.Account("b"); b.Balance != 0 {
		t.Fatalf("b holds %d after the forged credit, want 0", b.Balance)
	}

	rig.RequestTransfer("tr-1", "a", "b", 300)
	rigs.WaitFor(t, "the transfer to complete", func() bool { return rig.TransferStatus("tr-1") == transfer.StatusCompleted })
	a, _ := rig.Account("a")
	b, _ := rig.Account("b")
	if a.Balance != 700 || b.Balance != 300 {
		t.Errorf("balances a %d, b %d; want 700 and 300", a.Balance, b.Balance)
	}
	if got := rig.Moves("b")[creditID]; !slices.Equal(got, []int64{300}) {
		t.Errorf("b's transactions under %s: %v, want the saga's one credit of 300", creditID, got)
	}
}
