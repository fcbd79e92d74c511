package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/eventstore/memstore"
	"github.com/eventpipe/eventpipe/relay"
	"github.com/eventpipe/eventpipe/testkit/integration"
	"github.com/eventpipe/eventpipe/testkit/pipeline"
)

var quiet = slog.New(slog.DiscardHandler)

func command(t *testing.T, typ, aggType, id string, payload any) commands.Command {
	t.Helper()
	cmd, err := commands.NewJSON(typ, aggType, id, payload)
	if err != nil {
		t.Fatal(err)
	}
	return cmd
}

// collect gathers the messages of a topic of the pipeline's bus, acking
// each.
type collect struct {
	mu   sync.Mutex
	msgs []*message.Message
}

// settle is p.Settle, failing the test on an error.
func settle(t *testing.T, ctx context.Context, p *pipeline.Pipeline) {
	t.Helper()
	if err := p.Settle(ctx); err != nil {
		t.Fatal(err)
	}
}

func (c *collect) from(t *testing.T, ctx context.Context, p *pipeline.Pipeline, topic string) {
	t.Helper()
	ch, err := p.Bus.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for m := range ch {
			c.mu.Lock()
			c.msgs = append(c.msgs, m)
			c.mu.Unlock()
			m.Ack()
		}
	}()
}

// got returns the messages gathered so far (after Settle: every one
// published), by UUID, failing the test on a message seen twice.
func (c *collect) got(t *testing.T) map[string]*message.Message {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]*message.Message{}
	for _, m := range c.msgs {
		if out[m.UUID] != nil {
			t.Fatalf("message %s delivered twice", m.UUID)
		}
		out[m.UUID] = m
	}
	return out
}

// TestCommandsRunThroughTheWholePipelineWithoutServices sends bank
// account commands through the in-process pipeline, with no service
// running: each is answered, appended to the memory store, relayed onto
// the events and outbound topics exactly as the relay's Translator
// publishes them, handled by a handler consumer, and the snapshot
// consumer snapshots the account.
func TestCommandsRunThroughTheWholePipelineWithoutServices(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	cat := eventpipe.Builtin()
	alertsCh := make(chan *message.Message, 16)
	h, err := eventpipe.Handler(eventpipe.HandlerConfig{Name: "overdrawn-alerts", Topics: []string{bus.OutboundTopic(bankaccount.OutboundAccountOverdrawn)},
		Handler: func(m *message.Message) error { alertsCh <- m; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.AddConsumer(h); err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.Start(ctx, pipeline.Config{Catalog: cat, TopicPrefix: "it.", Consumers: []string{"overdrawn-alerts", eventpipe.Snapshotter},
		SnapshotEvery: 2, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	topics := p.Topics()
	if topics.Prefix != "it." {
		t.Fatalf("topics %+v, want the prefix it.", topics)
	}
	var events, outbound collect
	events.from(t, ctx, p, topics.Events(bankaccount.AggregateType))
	outbound.from(t, ctx, p, topics.Outbound(bankaccount.OutboundAccountOverdrawn))

	const acc = "acc-1"
	cmds := []commands.Command{
		command(t, bankaccount.OpenAccount, bankaccount.AggregateType, acc, struct{}{}),
		command(t, bankaccount.RecordTransaction, bankaccount.AggregateType, acc, bankaccount.TransactionAcceptedData{Desc: "salary", Amount: 100}),
		command(t, bankaccount.RecordTransaction, bankaccount.AggregateType, acc, bankaccount.TransactionAcceptedData{Desc: "rent", Amount: -150}),
		command(t, bankaccount.RecordTransaction, bankaccount.AggregateType, acc, bankaccount.TransactionAcceptedData{Desc: "tv", Amount: -2000}),
	}
	want := []commands.Status{commands.StatusAccepted, commands.StatusAccepted, commands.StatusAccepted, commands.StatusRejected}
	for i, c := range cmds {
		res, err := p.Sender.SendAndWait(ctx, c)
		if err != nil {
			t.Fatalf("command %d: %v", i, err)
		}
		if res.CommandID != c.ID || res.Status != want[i] {
			t.Fatalf("command %d (%s): answer %+v, want %s", i, c.Type, res, want[i])
		}
	}
	// A command sent again gets the first answer, appending nothing.
	if res, err := p.Sender.SendAndWait(ctx, cmds[1]); err != nil || res.Status != commands.StatusAccepted {
		t.Fatalf("command 1 again: %+v, %v; want its first answer", res, err)
	}

	ref := eventstore.Ref{Type: bankaccount.AggregateType, ID: acc}
	stored, err := p.Store.Load(ctx, ref, 0)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range stored {
		types = append(types, e.EventType)
	}
	if got := strings.Join(types, " "); got != "AccountOpened TransactionAccepted TransactionAccepted" {
		t.Fatalf("stored events %s", got)
	}
	settle(t, ctx, p)

	// Relayed as the relay's Translator publishes each event.
	got := events.got(t)
	if len(got) != len(stored) {
		t.Fatalf("%d messages on the events topic, want %d", len(got), len(stored))
	}
	for _, e := range stored {
		want, err := bus.EventMessage(e)
		if err != nil {
			t.Fatal(err)
		}
		m := got[e.EventID]
		if m == nil {
			t.Fatalf("event %s (%s) was not relayed", e.EventID, e.EventType)
		}
		if !bytes.Equal(m.Payload, want.Payload) {
			t.Errorf("event %d payload\n%s\nwant\n%s", e.Sequence, m.Payload, want.Payload)
		}
		for k, v := range want.Metadata {
			if m.Metadata.Get(k) != v {
				t.Errorf("event %d metadata %s = %q, want %q", e.Sequence, k, m.Metadata.Get(k), v)
			}
		}
	}

	// The overdraft's outbound record, relayed and handled.
	out := outbound.got(t)
	if len(out) != 1 {
		t.Fatalf("%d messages on the outbound topic, want 1", len(out))
	}
	for _, m := range out {
		var o eventstore.OutboundRecord
		err := json.Unmarshal(m.Payload, &o)
		if err != nil || o.AggregateID != acc || o.EventID != stored[2].EventID || o.Name != bankaccount.OutboundAccountOverdrawn {
			t.Fatalf("outbound message %+v, %v; want accountOverdrawn of %s caused by event %s", o, err, acc, stored[2].EventID)
		}
		select {
		case h := <-alertsCh:
			if h.UUID != m.UUID {
				t.Fatalf("the handler got %s, want %s", h.UUID, m.UUID)
			}
		default:
			t.Fatal("the handler consumer got no outbound message")
		}
	}

	// The snapshot consumer snapshots the account when its event 2
	// arrives, at the version the account has then.
	snap, err := p.Store.Snapshot(ctx, ref)
	if err != nil {
		t.Fatalf("no snapshot of the account: %v", err)
	}
	if snap.Seq < 2 {
		t.Fatalf("snapshot at %d, want 2 or 3", snap.Seq)
	}
	if err := p.Err(); err != nil {
		t.Fatalf("the pipeline stopped: %v", err)
	}
}

// TestTheRelayPublishesAGivenStoresHistoryAndPoisonsWhatItCannotUpcast
// starts the pipeline on a store that already holds an append: its
// outbound record is relayed, and its event, which the catalogue's
// upcaster refuses, goes to the relay's poison topic with the reason,
// while the pipeline keeps running.
func TestTheRelayPublishesAGivenStoresHistoryAndPoisonsWhatItCannotUpcast(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	store, err := memstore.New(memstore.Config{}) // any type, no upcasters
	if err != nil {
		t.Fatal(err)
	}
	ref := eventstore.Ref{Type: "gadget", ID: "g1"}
	req, err := eventstore.Prepare(ref, 0, eventstore.Change{Events: []eventstore.NewEvent{eventstore.Event("GadgetMade", map[string]int{"size": 1})}}, store.Schema())
	if err != nil {
		t.Fatal(err)
	}
	req.Outbound = []eventstore.Outbound{{Seq: 1, Name: "gadgetMade", Payload: json.RawMessage(`{"id":"g1"}`)}}
	res, err := store.Append(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	cat := eventpipe.Builtin()
	cat.Upcasters().MustRegister("GadgetMade", 1, func(json.RawMessage) (json.RawMessage, error) { return nil, errors.New("no gadgets here") })
	p, err := pipeline.Start(ctx, pipeline.Config{Catalog: cat, Store: store, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var poison, outbound collect
	poison.from(t, ctx, p, p.Topics().Poison(relay.DefaultPoisonGroup))
	outbound.from(t, ctx, p, p.Topics().Outbound("gadgetMade"))
	settle(t, ctx, p)
	if n, m := len(poison.got(t)), len(outbound.got(t)); n != 1 || m != 1 {
		t.Fatalf("%d poison and %d outbound messages, want 1 and 1", n, m)
	}
	for _, m := range poison.got(t) {
		var rec pipeline.PoisonRecord
		if err := json.Unmarshal(m.Payload, &rec); err != nil {
			t.Fatal(err)
		}
		if m.UUID != res.EventIDs[0] || rec.Event == nil || rec.Event.EventID != res.EventIDs[0] || rec.Position != 1 ||
			!strings.Contains(rec.Reason, "no gadgets here") || m.Metadata.Get(relay.MetadataPoisonReason) != rec.Reason {
			t.Fatalf("poison message %s %s %v", m.UUID, m.Payload, m.Metadata)
		}
	}
	for _, m := range outbound.got(t) {
		var o eventstore.OutboundRecord
		if err := json.Unmarshal(m.Payload, &o); err != nil || o.EventID != res.EventIDs[0] || string(o.Payload) != `{"id":"g1"}` || m.UUID != o.ID {
			t.Fatalf("outbound message %s %s: %v", m.UUID, m.Payload, err)
		}
	}
	if err := p.Err(); err != nil {
		t.Fatalf("the pipeline stopped: %v", err)
	}
	if err := p.Close(); err != nil || p.Close() != nil {
		t.Fatalf("Close: %v, then %v; want nil twice", err, p.Close())
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("Done is open after Close")
	}
}

func TestConfigValidateRefusesWhatCannotRunInOneProcess(t *testing.T) {
	cases := map[string]pipeline.Config{
		"unknown consumer":        {Consumers: []string{"nope"}},
		"named twice":             {Consumers: []string{eventpipe.Snapshotter, eventpipe.Snapshotter}},
		"read model without DB":   {Consumers: []string{"todos"}},
		"saga without DB":         {Consumers: []string{eventpipe.SagaConsumer("transfer")}},
		"search model, no search": {Consumers: []string{"todos-search"}, NoParking: true},
		"analytics aggregator":    {Consumers: []string{eventpipe.AnalyticsAggregator}},
		"short command key":       {CommandKey: []byte("short")},
		"negative buffer":         {Buffer: -1},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := pipeline.Start(context.Background(), cfg)
			if err == nil {
				p.Close()
				t.Fatal("Start succeeded")
			}
			t.Log(err)
		})
	}
	if err := (pipeline.Config{Catalog: eventpipe.Builtin(), Consumers: []string{eventpipe.Snapshotter}}).Validate(); err != nil {
		t.Fatalf("the snapshotter needs no service: %v", err)
	}
}
