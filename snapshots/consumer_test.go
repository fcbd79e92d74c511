package snapshots_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/oklog/ulid/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/snapshots"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// fakeSnapshots is a SnapshotFunc per aggregate type over an in-memory
// version per aggregate: a snapshot is "taken" at the current version.
type fakeSnapshots struct {
	mu       sync.Mutex
	version  map[string]int64   // by aggregate id
	calls    map[string][]int64 // versions snapshotted, by aggregate id
	failWith map[string]error   // by aggregate id
}

func newFake() *fakeSnapshots {
	return &fakeSnapshots{version: map[string]int64{}, calls: map[string][]int64{}, failWith: map[string]error{}}
}

func (f *fakeSnapshots) fn(_ context.Context, id string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failWith[id]; err != nil {
		return 0, err
	}
	v := f.version[id]
	f.calls[id] = append(f.calls[id], v)
	return v, nil
}

func (f *fakeSnapshots) taken(id string) []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.calls[id]...)
}

func event(t testing.TB, typ, id string, seq int64) *message.Message {
	t.Helper()
	msg, err := bus.EventMessage(eventstore.Envelope{EventID: ulid.Make().String(), AggregateType: typ,
		AggregateID: id, Sequence: seq, EventType: "Happened", SchemaVersion: 1, OccurredAt: time.Now().UTC(), Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

var quiet = slog.New(slog.DiscardHandler)

func newConsumer(t *testing.T, cfg snapshots.Config) *snapshots.Consumer {
	t.Helper()
	cfg.Logger = quiet
	if cfg.Publisher == nil {
		cfg.Publisher = gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
	}
	if cfg.NewSubscriber == nil {
		cfg.NewSubscriber = func(string) (message.Subscriber, error) { return nil, errors.New("unused") }
	}
	c, err := snapshots.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConfigValidateNamesTheBadField(t *testing.T) {
	fn := commands.SnapshotFunc(func(context.Context, string) (int64, error) { return 0, nil })
	sub := func(string) (message.Subscriber, error) { return nil, nil }
	pub := gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
	ok := func() snapshots.Config {
		return snapshots.Config{Aggregates: map[string]commands.SnapshotFunc{"order": fn}, NewSubscriber: sub, Publisher: pub}
	}
	for _, tc := range []struct {
		name, field, want string
		mod               func(*snapshots.Config)
	}{
		{"no aggregates", "Aggregates", "is empty", func(c *snapshots.Config) { c.Aggregates = nil }},
		{"nil func", `Aggregates["order"]`, "is nil", func(c *snapshots.Config) { c.Aggregates["order"] = nil }},
		{"bad type", "Aggregates", "aggregate_type", func(c *snapshots.Config) { c.Aggregates["a#b"] = fn }},
		{"no subscriber", "Brokers", "NewSubscriber", func(c *snapshots.Config) { c.NewSubscriber = nil }},
		{"no publisher", "Publisher", "is nil", func(c *snapshots.Config) { c.Publisher = nil }},
		{"negative every", "Every", "is -1", func(c *snapshots.Config) { c.Every = -1 }},
		{"override of unknown type", `EveryByType["todo"]`, "not an aggregate type", func(c *snapshots.Config) { c.EveryByType = map[string]int64{"todo": 5} }},
		{"zero override", `EveryByType["order"]`, "is 0", func(c *snapshots.Config) { c.EveryByType = map[string]int64{"order": 0} }},
		{"negative concurrency", "Concurrency", "is -2", func(c *snapshots.Config) { c.Concurrency = -2 }},
		{"negative give-up", "GiveUpAfter", "is -1s", func(c *snapshots.Config) { c.GiveUpAfter = -time.Second }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok()
			tc.mod(&cfg)
			_, err := snapshots.New(cfg)
			var ve *eventstore.ValidationError
			if !errors.As(err, &ve) || ve.Field != tc.field || !strings.Contains(ve.Reason, tc.want) {
				t.Fatalf("err = %v, want an *eventstore.ValidationError on %s saying %q", err, tc.field, tc.want)
			}
		})
	}
	c, err := snapshots.New(ok())
	if err != nil {
		t.Fatal(err)
	}
	if c.Group() != "snapshots" || c.PoisonTopic() != "poison.snapshots" {
		t.Errorf("group %q poison %q", c.Group(), c.PoisonTopic())
	}
	cfg := ok()
	cfg.Topics = bus.Topics{Prefix: "staging."}
	if c, _ = snapshots.New(cfg); c.Group() != "staging.snapshots" || c.PoisonTopic() != "staging.poison.snapshots" ||
		c.Topics()[0] != "staging.events.order" {
		t.Errorf("group %q poison %q topics %v", c.Group(), c.PoisonTopic(), c.Topics())
	}
}

func TestOnlyMultiplesOfEveryTriggerAndOverridesApplyPerType(t *testing.T) {
	orders, todos := newFake(), newFake()
	c := newConsumer(t, snapshots.Config{
		Aggregates:  map[string]commands.SnapshotFunc{"order": orders.fn, "todo": todos.fn},
		Every:       10,
		EveryByType: map[string]int64{"todo": 3},
	})
	for seq := int64(1); seq <= 25; seq++ {
		orders.version["o1"], todos.version["t1"] = seq, seq
		for _, msg := range []*message.Message{event(t, "order", "o1", seq), event(t, "todo", "t1", seq), event(t, "bankaccount", "b1", seq)} {
			if err := c.Handle(msg); err != nil {
				t.Fatalf("seq %d: %v", seq, err)
			}
		}
	}
	if got := fmt.Sprint(orders.taken("o1")); got != "[10 20]" {
		t.Errorf("orders snapshotted at %s, want [10 20]", got)
	}
	if got := fmt.Sprint(todos.taken("t1")); got != "[3 6 9 12 15 18 21 24]" {
		t.Errorf("todos snapshotted at %s, want every 3", got)
	}
}

func TestABacklogOfOneAggregateTakesOneSnapshot(t *testing.T) {
	fake := newFake()
	reg := prometheus.NewRegistry()
	c := newConsumer(t, snapshots.Config{Aggregates: map[string]commands.SnapshotFunc{"order": fake.fn}, Every: 10, Registerer: reg})
	fake.version["o1"] = 1000 // the consumer lags: the aggregate is far ahead
	for seq := int64(1); seq <= 1000; seq++ {
		if err := c.Handle(event(t, "order", "o1", seq)); err != nil {
			t.Fatal(err)
		}
	}
	if got := fmt.Sprint(fake.taken("o1")); got != "[1000]" {
		t.Fatalf("snapshots taken at %s, want one at 1000", got)
	}
	fake.version["o1"] = 1010
	if err := c.Handle(event(t, "order", "o1", 1010)); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(fake.taken("o1")); got != "[1000 1010]" {
		t.Fatalf("snapshots taken at %s, want a new one at 1010", got)
	}
	// A redelivery of a covered trigger is skipped too.
	if err := c.Handle(event(t, "order", "o1", 1000)); err != nil {
		t.Fatal(err)
	}
	written, skipped := counter(t, reg, snapshots.MetricWritten), counter(t, reg, snapshots.MetricSkipped)
	if written != 2 || skipped != 100 {
		t.Errorf("written %v skipped %v, want 2 and 100", written, skipped)
	}
}

// counter sums the series of counter name in reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.Metric {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func TestPermanentFailuresAreFailedErrorsAndTransientOnesGiveUpInTime(t *testing.T) {
	fake := newFake()
	c := newConsumer(t, snapshots.Config{Aggregates: map[string]commands.SnapshotFunc{"order": fake.fn}, Every: 1, GiveUpAfter: 50 * time.Millisecond})
	for _, cause := range []error{
		&eventstore.RuleRejection{EventType: "OrderShipped", Sequence: 1, Reason: "not paid"},
		&eventstore.DecodeError{What: "state", Reason: "not JSON"},
		fmt.Errorf("put snapshot: %w", eventstore.ErrItemTooLarge),
		fmt.Errorf("load: %w", eventstore.ErrAggregateNotFound),
	} {
		fake.failWith["o1"] = cause
		err := c.Handle(event(t, "order", "o1", 1))
		var failed *snapshots.FailedError
		if !errors.As(err, &failed) || !eventstore.IsPermanent(err) || !errors.Is(err, cause) || failed.For != 0 {
			t.Errorf("%v: err = %v, want a permanent *FailedError wrapping it", cause, err)
		}
	}

	fake.failWith["o2"] = errors.New("dial tcp 127.0.0.1:8000: connection refused")
	msg := event(t, "order", "o2", 7)
	start := time.Now()
	for {
		err := c.Handle(msg)
		var failed *snapshots.FailedError
		if errors.As(err, &failed) {
			if failed.For < 50*time.Millisecond || failed.Sequence != 7 || !eventstore.IsPermanent(err) {
				t.Fatalf("gave up with %+v", failed)
			}
			break
		}
		if err == nil || eventstore.IsPermanent(err) {
			t.Fatalf("a transient failure returned %v, want a transient error", err)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("never gave up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The clock restarts for the next delivery.
	if err := c.Handle(msg); err == nil || eventstore.IsPermanent(err) {
		t.Fatalf("a new delivery returned %v, want a transient error", err)
	}
}

func TestNotAnEventIsPermanent(t *testing.T) {
	c := newConsumer(t, snapshots.Config{Aggregates: map[string]commands.SnapshotFunc{"order": newFake().fn}})
	if err := c.Handle(message.NewMessage("m1", []byte("not json"))); !eventstore.IsPermanent(err) {
		t.Fatalf("err = %v, want permanent", err)
	}
}

// TestAPoisonedAggregateDoesNotBlockTheOthers runs the consumer's router
// over an in-memory pub/sub: the aggregate whose rules reject its log
// goes to the poison topic once, the others get their snapshots.
func TestAPoisonedAggregateDoesNotBlockTheOthers(t *testing.T) {
	ps := gochannel.NewGoChannel(gochannel.Config{Persistent: true}, watermill.NopLogger{})
	defer ps.Close()
	fake := newFake()
	fake.failWith["bad"] = &eventstore.RuleRejection{EventType: "OrderShipped", Sequence: 3, Reason: "not paid"}
	c, err := snapshots.New(snapshots.Config{Aggregates: map[string]commands.SnapshotFunc{"order": fake.fn}, Every: 5, Logger: quiet,
		NewSubscriber: func(string) (message.Subscriber, error) { return ps, nil }, Publisher: ps})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	poisoned, err := ps.Subscribe(ctx, c.PoisonTopic())
	if err != nil {
		t.Fatal(err)
	}
	fake.mu.Lock()
	fake.version["a1"], fake.version["a2"] = 10, 10 // already there when the consumer reads trigger 5
	fake.mu.Unlock()
	for seq := int64(1); seq <= 10; seq++ {
		for _, id := range []string{"bad", "a1", "a2"} {
			if err := ps.Publish(c.Topics()[0], event(t, "order", id, seq)); err != nil {
				t.Fatal(err)
			}
		}
	}
	var reasons []string
	for len(reasons) < 2 {
		select {
		case p := <-poisoned:
			reasons = append(reasons, p.Metadata.Get(bus.ReasonMetadataKey))
			p.Ack()
		case <-time.After(integration.HangAfter()):
			t.Fatalf("poisoned %d messages, want 2 (bad's triggers 5 and 10), then none for %v (%s)", len(reasons), integration.HangAfter(), integration.EnvHangAfter)
		}
	}
	for _, r := range reasons {
		if !strings.Contains(r, "snapshot of order/bad") || !strings.Contains(r, "not paid") {
			t.Errorf("poison reason %q", r)
		}
	}
	integration.Await(t, "one snapshot at 10 of a1 and of a2", func() error {
		if got := fmt.Sprint(fake.taken("a1"), fake.taken("a2")); got != "[10] [10]" {
			return fmt.Errorf("snapshots of a1 and a2: %s", got)
		}
		return nil
	})
}
