package poison_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/eventstore"
	pgmigrate "github.com/eventpipe/eventpipe/migrations/postgres"
	"github.com/eventpipe/eventpipe/poison"
)

// redriveEnv is a migrated Postgres schema, a publisher, and a poison
// topic holding n messages poisoned (Watermill's form) from origin.
type redriveEnv struct {
	db             *pgxpool.Pool
	pub            *kafka.Publisher
	brokers        []string
	poison, origin string
	msgs           []poison.Message
}

func newRedriveEnv(t *testing.T, n int) *redriveEnv {
	t.Helper()
	ctx := context.Background()
	brokers := testenv.KafkaBrokers(t)
	schema, url := testenv.PostgresSchema(t, "poison")
	if _, err := pgmigrate.Migrate(ctx, pgmigrate.Config{URL: testenv.Endpoints().Postgres, Schema: schema}); err != nil {
		t.Fatal(err)
	}
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	ns := testenv.UniqueName(t, "ns") + "."
	e := &redriveEnv{db: db, pub: pub, brokers: brokers, poison: bus.Topics{Prefix: ns}.Poison("g"), origin: bus.Topics{Prefix: ns}.Commands("todo")}
	for i := range n {
		m := message.NewMessage(watermill.NewULID(), []byte(`{"n":`+string(rune('0'+i))+`}`))
		m.Metadata.Set(bus.MetadataPartitionKey, "agg-1")
		m.Metadata.Set(poison.KeyReasonPoisoned, "handler panic: boom")
		m.Metadata.Set(poison.KeyTopicPoisoned, e.origin)
		m.Metadata.Set(poison.KeyHandlerPoisoned, "commands:"+e.origin)
		m.Metadata.Set(poison.KeySubscriberPoisoned, "sub")
		if err := pub.Publish(e.poison, m); err != nil {
			t.Fatal(err)
		}
	}
	e.msgs = e.read(t, e.poison)
	if len(e.msgs) != n {
		t.Fatalf("poison topic holds %d messages, want %d", len(e.msgs), n)
	}
	return e
}

func (e *redriveEnv) read(t *testing.T, topic string) []poison.Message {
	t.Helper()
	msgs, err := poison.Read(context.Background(), poison.ReadConfig{Brokers: e.brokers, Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

func (e *redriveEnv) redriver(t *testing.T, actor string) *poison.Redriver {
	t.Helper()
	r, err := poison.NewRedriver(poison.RedriverConfig{DB: e.db, Publisher: e.pub, Brokers: e.brokers, Actor: actor, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// copies returns the origin topic's records that are copies of m.
func (e *redriveEnv) copies(t *testing.T, m poison.Message) []poison.Message {
	t.Helper()
	var out []poison.Message
	for _, c := range e.read(t, e.origin) {
		if c.UUID == m.UUID {
			out = append(out, c)
		}
	}
	return out
}

// started records m's redrive as started and never finished: a redrive
// killed between its record and its "done".
func (e *redriveEnv) started(t *testing.T, m poison.Message) {
	t.Helper()
	if _, err := e.db.Exec(context.Background(), `INSERT INTO poison_redrives (poison_topic, poison_partition, poison_offset, message_uuid, target_topic, state, actor)
		VALUES ($1, $2, $3, $4, $5, 'started', 'killed')`, m.Topic, m.Partition, m.Offset, m.UUID, e.origin); err != nil {
		t.Fatal(err)
	}
}

// TestPoisonRedriveIsOnceAcrossRetriesInterruptionsAndRacingRedrivers
// redrives four poison messages on the real Kafka and Postgres: the
// first is published once, without its poison fields, with its key, and
// a second redrive publishes nothing; the second had a redrive killed
// before it published (a "started" row, no copy): it is published once;
// the third had one killed after it published (a "started" row and a
// copy): it is recorded, not published again; the fourth is redriven by
// eight racing redrivers: one copy. A relay poison record is refused.
func TestPoisonRedriveIsOnceAcrossRetriesInterruptionsAndRacingRedrivers(t *testing.T) {
	ctx := context.Background()
	e := newRedriveEnv(t, 4)
	r := e.redriver(t, "alice")

	first := e.msgs[0]
	if got := r.Redrive(ctx, first); got.Outcome != poison.Redriven || got.Target != e.origin || got.By != "alice" || got.Err != nil {
		t.Fatalf("first redrive: %+v", got)
	}
	if got := r.Redrive(ctx, first); got.Outcome != poison.AlreadyRedriven || got.By != "alice" || got.At.IsZero() {
		t.Fatalf("second redrive: %+v, want already redriven by alice", got)
	}
	cs := e.copies(t, first)
	if len(cs) != 1 {
		t.Fatalf("%d copies of the first message on %s, want 1", len(cs), e.origin)
	}
	c := cs[0]
	if c.Key != "agg-1" || string(c.Payload) != string(first.Payload) || c.Metadata.Get(poison.KeyReasonPoisoned) != "" ||
		c.Metadata.Get(poison.KeyTopicPoisoned) != "" || c.Metadata.Get(poison.KeyRedrivenFrom) != first.Ref.String() {
		t.Fatalf("copy %+v", c)
	}

	killedBefore := e.msgs[1]
	e.started(t, killedBefore)
	if got := r.Redrive(ctx, killedBefore); got.Outcome != poison.Redriven || !got.Resumed {
		t.Fatalf("redrive after one killed before publishing: %+v, want redriven (resumed)", got)
	}
	if n := len(e.copies(t, killedBefore)); n != 1 {
		t.Fatalf("%d copies after a redrive killed before publishing, want 1", n)
	}

	killedAfter := e.msgs[2]
	e.started(t, killedAfter)
	topic, msg, err := killedAfter.Redrive()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.pub.Publish(topic, msg); err != nil {
		t.Fatal(err)
	}
	if got := r.Redrive(ctx, killedAfter); got.Outcome != poison.Recovered {
		t.Fatalf("redrive after one killed after publishing: %+v, want recovered", got)
	}
	if got := r.Redrive(ctx, killedAfter); got.Outcome != poison.AlreadyRedriven {
		t.Fatalf("redrive after the recovery: %+v, want already redriven", got)
	}
	if n := len(e.copies(t, killedAfter)); n != 1 {
		t.Fatalf("%d copies after a redrive killed after publishing, want 1", n)
	}

	raced := e.msgs[3]
	var wg sync.WaitGroup
	results := make(chan poison.Result, 8)
	for range 8 {
		wg.Go(func() { results <- e.redriver(t, "racer").Redrive(ctx, raced) })
	}
	wg.Wait()
	close(results)
	redriven := 0
	for res := range results {
		switch res.Outcome {
		case poison.Redriven:
			redriven++
		case poison.Busy, poison.AlreadyRedriven:
		default:
			t.Errorf("racing redrive: %+v", res)
		}
	}
	if redriven != 1 {
		t.Fatalf("%d racing redrives published, want 1", redriven)
	}
	if n := len(e.copies(t, raced)); n != 1 {
		t.Fatalf("%d copies after racing redrives, want 1", n)
	}

	recs, err := poison.Redrives(ctx, e.db, e.poison)
	if err != nil || len(recs) != 4 {
		t.Fatalf("Redrives = %v, %v; want 4 records", recs, err)
	}
	for ref, rec := range recs {
		if rec.State != "done" || rec.DoneAt == nil || rec.Target != e.origin {
			t.Errorf("record of %s: %+v", ref, rec)
		}
	}

	relay := poison.Message{Ref: poison.Ref{Topic: e.poison, Partition: 0, Offset: 99}, Metadata: message.Metadata{poison.KeyReason: "bad", poison.KeyShardID: "s"}}
	if got := r.Redrive(ctx, relay); got.Outcome != poison.Failed || !errors.Is(got.Err, poison.ErrNoOrigin) {
		t.Fatalf("relay record redrive: %+v, want failed with ErrNoOrigin", got)
	}
}

// TestPoisonReadOfAMissingTopicIsEmptyAndCreatesNothing reads a topic
// that does not exist: no messages, no error, and still no topic.
func TestPoisonReadOfAMissingTopicIsEmptyAndCreatesNothing(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.UniqueName(t, "ns") + ".poison.none"
	for range 2 {
		msgs, err := poison.Read(context.Background(), poison.ReadConfig{Brokers: brokers, Topic: topic})
		if err != nil || len(msgs) != 0 {
			t.Fatalf("Read(%s) = %v, %v; want nothing", topic, msgs, err)
		}
	}
}

// TestPoisonRedriverConfigValidateNamesTheField refuses incomplete
// configurations with an *eventstore.ValidationError naming the field.
func TestPoisonRedriverConfigValidateNamesTheField(t *testing.T) {
	db := &pgxpool.Pool{}
	pub := &kafka.Publisher{}
	for _, tc := range []struct {
		field string
		cfg   poison.RedriverConfig
	}{
		{"DB", poison.RedriverConfig{Publisher: pub, Brokers: []string{"b"}, Actor: "a"}},
		{"Publisher", poison.RedriverConfig{DB: db, Brokers: []string{"b"}, Actor: "a"}},
		{"Brokers", poison.RedriverConfig{DB: db, Publisher: pub, Actor: "a"}},
		{"Actor", poison.RedriverConfig{DB: db, Publisher: pub, Brokers: []string{"b"}}},
		{"ClockSkew", poison.RedriverConfig{DB: db, Publisher: pub, Brokers: []string{"b"}, Actor: "a", ClockSkew: -1}},
	} {
		_, err := poison.NewRedriver(tc.cfg)
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("NewRedriver without %s: %v, want a ValidationError on %s", tc.field, err, tc.field)
		}
	}
}

// TestARedrivenV1EventIsReadAsV2OnceItsUpcasterIsAdded: a consumer
// poisoned an event of schema v1; its v1→v2 upcaster is added and the
// message re-driven. The redrive publishes the message as it was
// poisoned (the v1 payload, byte for byte), and a consumer's decoding of
// what it takes from the topic (bus.UpcastedEventFromMessage, as the
// projections' and the sagas' runners do) upcasts it to v2; without the
// upcaster the same copy stays v1. (e2e's
// TestAPoisonedV1EventRedrivenAfterItsUpcasterIsAddedReachesTheSagaAsV2
// runs the whole path with a saga.)
func TestARedrivenV1EventIsReadAsV2OnceItsUpcasterIsAdded(t *testing.T) {
	ctx := context.Background()
	e := newRedriveEnv(t, 0)
	ns := strings.TrimSuffix(e.poison, bus.Topics{}.Poison("g"))
	e.poison, e.origin = bus.Topics{Prefix: ns}.Poison("v1-reader"), bus.Topics{Prefix: ns}.Events("todo")
	v1 := eventstore.Envelope{EventID: eventstore.NewEventID(time.Now()), AggregateType: "todo", AggregateID: "t1", Sequence: 1,
		EventType: "TodoCreated", SchemaVersion: 1, OccurredAt: time.Now().UTC(), Payload: []byte(`{"name":"buy milk"}`)}
	msg, err := bus.EventMessage(v1)
	if err != nil {
		t.Fatal(err)
	}
	original := append([]byte(nil), msg.Payload...)
	msg.Metadata.Set(poison.KeyReasonPoisoned, "invalid title: is empty in TodoCreated v1")
	msg.Metadata.Set(poison.KeyTopicPoisoned, e.origin)
	msg.Metadata.Set(poison.KeyHandlerPoisoned, "v1-reader")
	msg.Metadata.Set(poison.KeySubscriberPoisoned, "sub")
	if err := e.pub.Publish(e.poison, msg); err != nil {
		t.Fatal(err)
	}
	poisoned := e.read(t, e.poison)
	if len(poisoned) != 1 {
		t.Fatalf("poison topic holds %d messages, want 1", len(poisoned))
	}

	upcasters := &eventstore.Upcasters{}
	upcasters.MustRegister("TodoCreated", 1, func(p json.RawMessage) (json.RawMessage, error) {
		var old struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(p, &old); err != nil {
			return nil, err
		}
		return json.Marshal(map[string]string{"title": old.Name})
	})
	if res := e.redriver(t, "test").Redrive(ctx, poisoned[0]); res.Outcome != poison.Redriven {
		t.Fatalf("redrive: %+v", res)
	}
	copies := e.copies(t, poisoned[0])
	if len(copies) != 1 || !bytes.Equal(copies[0].Payload, original) {
		t.Fatalf("%d copies on %s; want one, the poisoned message's payload unchanged", len(copies), e.origin)
	}
	taken := message.NewMessage(copies[0].UUID, copies[0].Payload)
	taken.Metadata = copies[0].Metadata
	got, err := bus.UpcastedEventFromMessage(taken, upcasters)
	if err != nil || got.SchemaVersion != 2 || string(got.Payload) != `{"title":"buy milk"}` || got.EventID != v1.EventID {
		t.Fatalf("the re-driven copy as a consumer reads it: v%d %s, %v; want v2 with its title", got.SchemaVersion, got.Payload, err)
	}
	if before, err := bus.UpcastedEventFromMessage(taken, nil); err != nil || before.SchemaVersion != 1 {
		t.Fatalf("without the upcaster: v%d, %v; want v1", before.SchemaVersion, err)
	}
}
