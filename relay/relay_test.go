package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/eventstore"
	store "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	"github.com/eventpipe/eventpipe/relay"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestRelayPublishesEventsAndOutboxAndSkipsTheRest appends events (with
// STATE, command and outbound items beside them) and runs one relay: every
// event arrives once, in order, as the stored envelope on
// events.<aggregate type>; the outbound event arrives on
// outbound.<name>; nothing else is published. A clean stop checkpoints
// and releases the lease.
func TestRelayPublishesEventsAndOutboxAndSkipsTheRest(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	want := map[string]int64{}
	for a := range 5 {
		ref := eventstore.Ref{Type: "tick", ID: fmt.Sprintf("agg-%d", a)}
		for v := int64(0); v < 20; v += 4 {
			e.appendTicks(t, ref, v, 4)
		}
		want[ref.ID] = 20
	}
	// One append with a STATE item, a command record and an outbound event.
	ref := eventstore.Ref{Type: "tick", ID: "agg-out"}
	req, err := eventstore.Prepare(ref, 0, eventstore.Change{CommandID: "cmd-1", Events: []eventstore.NewEvent{eventstore.Event("Ticked", map[string]int{"n": 1})}}, eventstore.Schema{})
	if err != nil {
		t.Fatal(err)
	}
	req.State = json.RawMessage(`{"n":1}`)
	req.Outbound = []eventstore.Outbound{{Seq: 1, Index: 0, Name: "tickAlert", Payload: json.RawMessage(`{"alert":true}`)}}
	res, err := e.store.Append(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	want[ref.ID] = 1

	stop := runRelay(t, e.relayConfig(t, "w1"))
	got := readUntil(t, e.ep.KafkaBrokers, e.topics.Events("tick"), complete(want))
	if dups := coverage(t, got, want); dups != 0 {
		t.Errorf("%d duplicates without any crash", dups)
	}
	stored, err := e.store.Load(ctx, eventstore.Ref{Type: "tick", ID: "agg-3"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range got {
		if d.env.AggregateID == "agg-3" {
			s := stored[d.env.Sequence-1]
			if d.env.EventID != s.EventID || string(d.env.Payload) != string(s.Payload) || !d.env.OccurredAt.Equal(s.OccurredAt) {
				t.Errorf("published %+v, stored %+v", d.env, s)
			}
		}
	}

	out := testenv.Consume(t, e.ep.KafkaBrokers, testenv.UniqueName(t, "g"), e.topics.Outbound("tickAlert"), 1)
	var rec eventstore.OutboundRecord
	if err := json.Unmarshal(out[0].Payload, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Name != "tickAlert" || rec.EventID != res.EventIDs[0] || string(rec.Payload) != `{"alert":true}` ||
		out[0].Metadata.Get(bus.MetadataPartitionKey) != "agg-out" || out[0].UUID != rec.ID {
		t.Errorf("outbound message %s %v %+v", out[0].UUID, out[0].Metadata, rec)
	}

	if err := stop(); err != nil {
		t.Fatalf("clean stop: %v", err)
	}
	leases := e.leases(t)
	if len(leases) != 1 || leases[0].Owner != "" || leases[0].Checkpoint == "" || leases[0].Finished {
		t.Fatalf("leases after a clean stop: %+v, want one released lease with a checkpoint", leases)
	}
	// Restarting from the checkpoint republishes nothing.
	before := len(readUntil(t, e.ep.KafkaBrokers, e.topics.Events("tick"), complete(want)))
	stop = runRelay(t, e.relayConfig(t, "w2"))
	e.appendTicks(t, eventstore.Ref{Type: "tick", ID: "agg-0"}, 20, 1)
	want["agg-0"] = 21
	got = readUntil(t, e.ep.KafkaBrokers, e.topics.Events("tick"), complete(want))
	if len(got) != before+1 {
		t.Errorf("after a restart %d records, want %d (the new event only)", len(got), before+1)
	}
	_ = stop()
}

// TestUndecodableRecordGoesToPoisonAndTheShardMovesOn writes an EVENT
// item the store would never write (a broken event id and no payload)
// between good events: it lands on poison.relay with its raw image and
// the reason, and the events after it are still published.
func TestUndecodableRecordGoesToPoisonAndTheShardMovesOn(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	e := newEnv(t)
	ref := eventstore.Ref{Type: "tick", ID: "good"}
	e.appendTicks(t, ref, 0, 2)
	bad := map[string]types.AttributeValue{
		store.AttrPK:        &types.AttributeValueMemberS{Value: "AGGREGATE#tick#bad"},
		store.AttrSK:        &types.AttributeValueMemberS{Value: store.EventSK(1)},
		store.AttrEventID:   &types.AttributeValueMemberS{Value: "not-a-ulid"},
		store.AttrEventType: &types.AttributeValueMemberS{Value: "Ticked"},
	}
	if _, err := e.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(e.ep.EventsTable), Item: bad}); err != nil {
		t.Fatal(err)
	}
	e.appendTicks(t, ref, 2, 2)
	runRelay(t, e.relayConfig(t, "w1"))

	want := map[string]int64{"good": 4}
	coverage(t, readUntil(t, e.ep.KafkaBrokers, e.topics.Events("tick"), complete(want)), want)
	poison := testenv.Consume(t, e.ep.KafkaBrokers, testenv.UniqueName(t, "g"), e.topics.Poison("relay"), 1)
	var p relay.PoisonRecord
	if err := json.Unmarshal(poison[0].Payload, &p); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Reason, "malformed") || p.SequenceNumber == "" || p.ShardID == "" ||
		fmt.Sprint(p.NewImage[store.AttrEventID]) != "map[S:not-a-ulid]" || poison[0].Metadata.Get(relay.MetadataPoisonReason) != p.Reason {
		t.Fatalf("poison message %v %+v", poison[0].Metadata, p)
	}
}

// TestTwoRelayProcessesDeliverTenThousandEventsInOrder appends 10,000
// events over 100 aggregates while two relay processes share the stream:
// every event reaches Kafka, and per aggregate the sequences arrive in
// order (a repeat is the only exception allowed).
func TestTwoRelayProcessesDeliverTenThousandEventsInOrder(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	const aggregates, perAggregate, perAppend, writers = 100, 100, 10, 10
	e := newEnv(t)
	startRelayChild(t, e, "proc-a", 1000)
	startRelayChild(t, e, "proc-b", 1000)
	want := appendConcurrently(t, e, aggregates, perAggregate, perAppend, writers, nil)
	got := readUntil(t, e.ep.KafkaBrokers, e.topics.Events("tick"), complete(want))
	dups := coverage(t, got, want)
	t.Logf("%d events over %d aggregates: %d records on Kafka, %d duplicates", aggregates*perAggregate, aggregates, len(got), dups)
	for _, l := range e.leases(t) {
		if l.Owner != "proc-a-1" && l.Owner != "proc-b-1" {
			t.Errorf("lease %+v held by neither relay", l)
		}
	}
}

// appendConcurrently appends perAggregate "Ticked" events to each of
// `aggregates` aggregates, perAppend per transaction, from `writers`
// goroutines; between appends it calls tick (when set). It returns the
// last sequence per aggregate.
func appendConcurrently(t *testing.T, e *env, aggregates, perAggregate, perAppend, writers int, tick func()) map[string]int64 {
	want := map[string]int64{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for v := 0; v < perAggregate; v += perAppend {
				for a := w; a < aggregates; a += writers {
					e.appendTicks(t, eventstore.Ref{Type: "tick", ID: fmt.Sprintf("agg-%03d", a)}, int64(v), perAppend)
					if tick != nil {
						tick()
					}
				}
			}
		})
	}
	for a := range aggregates {
		want[fmt.Sprintf("agg-%03d", a)] = int64(perAggregate)
	}
	wg.Wait()
	return want
}

// TestKilledRelaysLoseNothing runs two relay processes and kills one with
// SIGKILL at random moments (the lease holder most of the time) at least
// 10 times while appends continue, restarting each killed process. In the
// end every event is on Kafka in per-aggregate order, duplicates are at
// most one batch per kill, and the survivor took over the dead holder's
// shard after the lease timeout.
func TestKilledRelaysLoseNothing(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	const aggregates, perAggregate, perAppend, writers, batch, minKills = 40, 100, 2, 8, 100, 10
	const total = aggregates * perAggregate
	e := newEnv(t)
	procs := []*relayChild{startRelayChild(t, e, "proc-a", batch), startRelayChild(t, e, "proc-b", batch)}
	var kills atomic.Int64
	var appended atomic.Int64
	takeovers := 0
	type atKill struct{ appended, published int64 }
	var killed []atKill
	stopKilling := make(chan struct{})
	killerDone := make(chan struct{})
	holder := func() *relayChild {
		for _, l := range e.leases(t) {
			for _, p := range procs {
				if l.Owner != "" && p.worker == l.Owner {
					return p
				}
			}
		}
		return nil
	}
	published := func() int64 {
		n, err := kafka.TopicMessages(context.Background(), kafka.Cluster{Brokers: e.ep.KafkaBrokers}, []string{e.topics.Events("tick")})
		if err != nil {
			t.Errorf("count published: %v", err)
		}
		return n[e.topics.Events("tick")]
	}
	go func() {
		defer close(killerDone)
		for {
			select {
			case <-stopKilling:
				if kills.Load() >= minKills {
					return
				}
			case <-time.After(time.Duration(700+rand.IntN(1300)) * time.Millisecond):
			}
			victim := holder()
			if victim == nil || rand.IntN(4) == 0 {
				// Sometimes the standby: the holder must keep going.
				victim = procs[rand.IntN(2)]
			}
			wasHolder := victim == holder()
			victim.kill()
			killed = append(killed, atKill{appended: appended.Load(), published: published()})
			kills.Add(1)
			if wasHolder {
				// Keep the holder down past the lease timeout until the
				// survivor took its shard over (if it never does, for
				// integration.HangAfter; the check below then fails).
				for down := time.Now(); time.Since(down) < integration.HangAfter(); time.Sleep(100 * time.Millisecond) {
					if h := holder(); h != nil && h != victim {
						takeovers++
						break
					}
				}
			}
			victim.start()
		}
	}()
	// The writers pace themselves until the kills are done, so that the
	// kills land while events are being appended and relayed.
	want := appendConcurrently(t, e, aggregates, perAggregate, perAppend, writers, func() {
		appended.Add(perAppend)
		if kills.Load() < minKills {
			time.Sleep(150 * time.Millisecond)
		}
	})
	close(stopKilling)
	<-killerDone
	got := readUntil(t, e.ep.KafkaBrokers, e.topics.Events("tick"), complete(want))
	dups := coverage(t, got, want)
	t.Logf("%d kills, %d takeovers, %d events, %d records on Kafka, %d duplicates (bound %d); appended / published at each kill: %+v",
		kills.Load(), takeovers, total, len(got), dups, kills.Load()*batch, killed)
	if dups > int(kills.Load())*batch {
		t.Errorf("%d duplicates after %d kills, more than one batch (%d) per kill", dups, kills.Load(), batch)
	}
	if takeovers == 0 {
		t.Errorf("the survivor never took over a killed holder's shard")
	}
	inFlight := 0
	for _, k := range killed {
		if k.appended < total && k.published < total {
			inFlight++
		}
	}
	if inFlight*2 <= len(killed) {
		t.Errorf("only %d of %d kills landed while events were still being appended and relayed: %+v", inFlight, len(killed), killed)
	}
}

// TestTrimmedCheckpointStopsTheRelayLoudly gives the relay a lease whose
// checkpoint the stream no longer has: Run stops with a *TrimmedError that
// names the shard and points to replay, instead of skipping ahead.
func TestTrimmedCheckpointStopsTheRelayLoudly(t *testing.T) {
	e := newEnv(t)
	e.appendTicks(t, eventstore.Ref{Type: "tick", ID: "a"}, 0, 1)
	cfg := e.relayConfig(t, "w1")
	arn, err := relay.StreamARN(context.Background(), e.db, e.ep.EventsTable)
	if err != nil {
		t.Fatal(err)
	}
	shards, err := relay.Shards(context.Background(), cfg.Streams, arn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Streams = &trimmingStreams{StreamsAPI: cfg.Streams}
	leases := &relay.Leases{Client: e.db, Table: e.ep.LeasesTable}
	if err := leases.Ensure(context.Background(), arn, shards[0].ShardID, ""); err != nil {
		t.Fatal(err)
	}
	l, err := leases.Take(context.Background(), relay.Lease{StreamARN: arn, ShardID: shards[0].ShardID}, "old")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Checkpoint(context.Background(), l, "000000000000000000001", false); err != nil {
		t.Fatal(err)
	}
	cfg.LeaseDuration, cfg.DiscoveryInterval = 50*time.Millisecond, 15*time.Millisecond
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter()) // Run stops by itself
	defer cancel()
	err = r.Run(ctx)
	var trimmed *relay.TrimmedError
	if !errors.As(err, &trimmed) || trimmed.ShardID != shards[0].ShardID || trimmed.Checkpoint != "000000000000000000001" ||
		!strings.Contains(err.Error(), "eventpipe replay") {
		t.Fatalf("Run = %v, want a *TrimmedError for shard %s pointing to replay", err, shards[0].ShardID)
	}
}
