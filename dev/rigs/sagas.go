package rigs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/domains/transfer"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/eventstore"
	migrate "github.com/eventpipe/eventpipe/migrations/dynamodb"
	pgmigrate "github.com/eventpipe/eventpipe/migrations/postgres"
	"github.com/eventpipe/eventpipe/sagas"
	"github.com/eventpipe/eventpipe/sagas/transfersaga"
)

// envSagaChild, set to a transfer deadline (a Go duration), makes the
// test binary a child process running the transfer saga as `eventpipe
// consume transfer-saga` does, on the endpoints in the environment.
const envSagaChild = "EVENTPIPE_TEST_SAGA_CHILD_TIMEOUT"

// TransferCatalog is the catalogue of the saga tests: bank accounts,
// transfers, and the transfer saga with the given deadline.
func TransferCatalog(timeout time.Duration) *eventpipe.Catalog {
	c := eventpipe.NewCatalog()
	for _, d := range []commands.Domain{bankaccount.Domain(), transfer.Domain()} {
		if err := c.AddDomain(d); err != nil {
			panic(err)
		}
	}
	if err := c.AddSaga(transfersaga.New(transfersaga.Config{Timeout: timeout})); err != nil {
		panic(err)
	}
	return c
}

// RunSagaChildIfRequested runs the transfer saga in this process when a
// test started it as a child (TransferRig.StartSaga); call it first in
// TestMain. It does not return in a child.
func RunSagaChildIfRequested() {
	v := os.Getenv(envSagaChild)
	if v == "" {
		return
	}
	timeout, err := time.ParseDuration(v)
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		var cons *eventpipe.Consumers
		cons, err = eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{Process: eventpipe.Process{Catalog: TransferCatalog(timeout), Endpoints: endpoints.FromEnv()},
			Names: []string{eventpipe.SagaConsumer(transfersaga.Name)}})
		if err == nil {
			err = cons.Run(ctx)
			_ = cons.Close()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "saga child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Background is a Run function going on a goroutine of its own until the
// test ends (GoRun); what it returned reaches the test goroutine through
// done.
type Background struct {
	what  string
	done  chan error
	ended bool
}

// GoRun runs run on a goroutine of its own until t ends, then cancels
// its context, waits for it and fails t if it returned an error other
// than the context's cancellation. Register what must outlive run (a
// Close) with t.Cleanup before calling GoRun.
func GoRun(t *testing.T, what string, run func(context.Context) error) *Background {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	b := &Background{what: what, done: make(chan error, 1)}
	go func() { b.done <- run(ctx) }()
	t.Cleanup(func() {
		stop()
		if b.ended {
			return
		}
		if err := <-b.done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v", what, err)
		}
	})
	return b
}

// Check fails t if the goroutine has returned while the test runs: call
// it from the test goroutine.
func (b *Background) Check(t *testing.T) {
	t.Helper()
	if b.ended {
		return
	}
	select {
	case err := <-b.done:
		b.ended = true
		t.Fatalf("%s stopped while the test ran: %v", b.what, err)
	default:
	}
}

// Returned reports, without waiting, whether the goroutine has
// returned, and fails t if it returned an error: call it from the test
// goroutine, for a run that is meant to end.
func (b *Background) Returned(t *testing.T) bool {
	t.Helper()
	if b.ended {
		return true
	}
	select {
	case err := <-b.done:
		b.ended = true
		if err != nil {
			t.Fatal(err)
		}
	default:
	}
	return b.ended
}

// TransferRig is the pipeline of the saga tests: the write side's command
// handlers and the relay in this process, the saga in a child process.
type TransferRig struct {
	T       *testing.T
	EP      endpoints.Endpoints
	Cat     *eventpipe.Catalog
	Timeout time.Duration
	Svc     *eventpipe.WriteSide
	DB      *pgxpool.Pool
	Pub     message.Publisher
	Child   *exec.Cmd
	Running []*Background
	Key     []byte // the command key of the write side and the in-process sagas
}

// Alive fails the test if a Run of the rig (command handlers, relay, an
// in-process saga) has stopped.
func (r *TransferRig) Alive() {
	r.T.Helper()
	for _, b := range r.Running {
		b.Check(r.T)
	}
}

// NewTransferRig starts the command handlers of TransferCatalog(timeout)
// (with mws around the dispatcher) and the relay; StartSaga starts the
// saga.
func NewTransferRig(t *testing.T, timeout time.Duration, mws ...message.HandlerMiddleware) *TransferRig {
	t.Helper()
	r := NewSagaRig(t, TransferCatalog(timeout), mws...)
	r.Timeout = timeout
	return r
}

// NewSagaRig starts the command handlers of cat (with mws around the
// dispatcher) and the relay, on fresh tables, topics and schema.
func NewSagaRig(t *testing.T, cat *eventpipe.Catalog, mws ...message.HandlerMiddleware) *TransferRig {
	t.Helper()
	return NewSagaRigWithKey(t, cat, nil, mws...)
}

// NewSagaRigWithKey is NewSagaRig whose command handlers and in-process
// sagas hold the command key key.
func NewSagaRigWithKey(t *testing.T, cat *eventpipe.Catalog, key []byte, mws ...message.HandlerMiddleware) *TransferRig {
	t.Helper()
	ctx := context.Background()
	ep := Endpoints(t)
	ep.LeasesTable = testenv.UniqueName(t, "leases")
	if err := migrate.CreateLeasesTable(ctx, testenv.DynamoDB(t), ep.LeasesTable); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteTable(t, testenv.DynamoDB(t), ep.LeasesTable) })
	schema, url := testenv.PostgresSchema(t, "saga")
	if _, err := pgmigrate.Migrate(ctx, pgmigrate.Config{URL: testenv.Endpoints().Postgres, Schema: schema}); err != nil {
		t.Fatal(err)
	}
	ep.Postgres = url
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	svc, err := eventpipe.NewWriteSide(ctx, eventpipe.WriteSideConfig{Process: eventpipe.Process{Endpoints: ep, Catalog: cat}, ConsumerGroup: testenv.UniqueName(t, "g"), Middlewares: mws,
		CommandKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	rel, err := eventpipe.NewRelay(ctx, eventpipe.RelayConfig{Process: eventpipe.Process{Catalog: cat, Endpoints: ep}, DiscoveryInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rel.Close() })
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: ep.KafkaBrokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return &TransferRig{T: t, EP: ep, Cat: cat, Svc: svc, DB: db, Pub: pub, Key: key, Running: []*Background{
		GoRun(t, "command handlers", svc.RunCommandHandlers),
		GoRun(t, "relay", rel.Run),
	}}
}

// RunSaga runs the saga called name in this process, as `eventpipe
// consume <name>-saga` does, until t ends.
func (r *TransferRig) RunSaga(name string) {
	r.T.Helper()
	cons, err := eventpipe.NewConsumers(context.Background(), eventpipe.ConsumersConfig{Process: eventpipe.Process{Catalog: r.Cat, Endpoints: r.EP}, DB: r.DB,
		CommandKey: r.Key, Names: []string{eventpipe.SagaConsumer(name)}})
	if err != nil {
		r.T.Fatal(err)
	}
	r.T.Cleanup(func() { _ = cons.Close() })
	r.Running = append(r.Running, GoRun(r.T, "saga "+name, cons.Run))
	r.WaitSagaStarted(name)
}

// WaitSagaStarted waits until the saga called name has started its
// consumer group (committed its start, latest by default): inputs
// published from then on reach it; earlier ones never would.
func (r *TransferRig) WaitSagaStarted(name string) {
	r.T.Helper()
	cons, ok := r.Cat.Consumer(eventpipe.SagaConsumer(name))
	if !ok {
		r.T.Fatalf("no saga %s in the catalogue", name)
	}
	info := cons.Describe(bus.Topics{Prefix: r.EP.TopicPrefix})
	WaitFor(r.T, "saga "+name+" to start its group", func() bool { return GroupCommitted(r.T, info.Group, info.Topics...) >= 0 })
}

// StartSaga starts the saga's child process.
func (r *TransferRig) StartSaga() {
	r.T.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// A static group member (one saga child runs at a time): a child
	// started after a kill takes back the partitions at once.
	cmd.Env = append(os.Environ(), envSagaChild+"="+r.Timeout.String(), endpoints.EnvKafkaInstanceID+"=saga-child",
		endpoints.EnvEventsTable+"="+r.EP.EventsTable, endpoints.EnvKeysTable+"="+r.EP.KeysTable, endpoints.EnvTopicPrefix+"="+r.EP.TopicPrefix,
		endpoints.EnvPostgres+"="+r.EP.Postgres, endpoints.EnvLeasesTable+"="+r.EP.LeasesTable, "EVENTPIPE_LOG_LEVEL=warn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		r.T.Fatal(err)
	}
	r.Child = cmd
	r.T.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	r.WaitSagaStarted(transfersaga.Name)
}

// KillSaga kills the saga's child process with SIGKILL.
func (r *TransferRig) KillSaga() {
	r.T.Helper()
	if err := r.Child.Process.Signal(syscall.SIGKILL); err != nil {
		r.T.Fatal(err)
	}
	_, _ = r.Child.Process.Wait()
}

// Dispatch runs a setup command directly and wants it accepted.
func (r *TransferRig) Dispatch(typ, aggType, id string, payload any) {
	r.T.Helper()
	cmd, err := commands.NewJSON(typ, aggType, id, payload)
	if err != nil {
		r.T.Fatal(err)
	}
	res, err := r.Svc.Dispatcher.Dispatch(context.Background(), cmd)
	if err != nil || res.Status != commands.StatusAccepted {
		r.T.Fatalf("%s %s: %+v, %v", typ, id, res, err)
	}
}

// RequestTransfer publishes a RequestTransfer onto the bus, as a user
// does.
func (r *TransferRig) RequestTransfer(id, from, to string, amount int64) {
	r.T.Helper()
	if err := r.PublishTransfer(id, from, to, amount); err != nil {
		r.T.Fatal(err)
	}
}

// PublishTransfer is RequestTransfer returning its error: it does not
// touch r.T, so any goroutine may call it.
func (r *TransferRig) PublishTransfer(id, from, to string, amount int64) error {
	cmd, err := transfer.RequestTransferCommand.New(transfer.AggregateType, id, transfer.RequestedData{From: from, To: to, Amount: amount})
	if err != nil {
		return fmt.Errorf("request transfer %s: %w", id, err)
	}
	msg, err := cmd.ToMessage()
	if err != nil {
		return fmt.Errorf("request transfer %s: %w", id, err)
	}
	if err := r.Pub.Publish(cmd.Topic(bus.Topics{Prefix: r.EP.TopicPrefix}), msg); err != nil {
		return fmt.Errorf("request transfer %s: publish: %w", id, err)
	}
	return nil
}

// Account returns an account's state.
func (r *TransferRig) Account(id string) (bankaccount.Account, int64) {
	r.T.Helper()
	r.Alive()
	st, err := r.Svc.Store.State(context.Background(), eventstore.Ref{Type: bankaccount.AggregateType, ID: id})
	if err != nil {
		r.T.Fatalf("account %s: %v", id, err)
	}
	var a bankaccount.Account
	if err := json.Unmarshal(st.Data, &a); err != nil {
		r.T.Fatal(err)
	}
	return a, st.Seq
}

// TransferStatus returns a transfer's status ("" while it does not exist).
func (r *TransferRig) TransferStatus(id string) transfer.Status {
	r.T.Helper()
	r.Alive()
	st, err := r.Svc.Store.State(context.Background(), eventstore.Ref{Type: transfer.AggregateType, ID: id})
	if errors.Is(err, eventstore.ErrAggregateNotFound) {
		return ""
	}
	if err != nil {
		r.T.Fatalf("transfer %s: %v", id, err)
	}
	var tr transfer.Transfer
	if err := json.Unmarshal(st.Data, &tr); err != nil {
		r.T.Fatal(err)
	}
	return tr.Status
}

// Finished counts the saga's finished instances.
func (r *TransferRig) Finished() int64 {
	r.T.Helper()
	r.Alive()
	s, err := sagas.Summarize(context.Background(), r.DB, transfersaga.Name)
	if err != nil {
		r.T.Fatal(err)
	}
	var n int64
	for _, c := range s.Outcomes {
		n += c
	}
	return n
}

// Moves returns the transactions of an account by the command that
// caused them (the saga's command ids name transfer and step).
func (r *TransferRig) Moves(id string) map[string][]int64 {
	r.T.Helper()
	evs, err := r.Svc.Store.Load(context.Background(), eventstore.Ref{Type: bankaccount.AggregateType, ID: id}, 0)
	if err != nil {
		r.T.Fatal(err)
	}
	out := map[string][]int64{}
	for _, e := range evs {
		if e.EventType != bankaccount.TransactionAccepted {
			continue
		}
		d, err := bankaccount.TransactionAcceptedEvent.Decode(e)
		if err != nil {
			r.T.Fatal(err)
		}
		out[e.Metadata.CausationID] = append(out[e.Metadata.CausationID], d.Amount)
	}
	return out
}
